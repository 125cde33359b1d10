//! `package` pulls a base image the engine lacks, through the engine, with the registry's
//! credentials from the Docker config, and pins it by the registry's manifest digest. The
//! registry is Debian's `docker-registry` on loopback with Basic auth; the base is the busybox
//! test base plus a 1 MiB layer no other image has, pushed there and then removed from the
//! engine, so the pull really downloads. Also: `--pull never` refuses the missing base by
//! name, and a pull without credentials fails with the registry's answer.
//!
//! Needs Docker and docker-registry: without them it prints why and passes, unless
//! `TT_MODEL_REQUIRE_DOCKER=1`.

use crate::common;

use common::registry::{LocalRegistry, PASSWORD, USER};
use common::*;
use tt_model_testkit::engine::{derive_image, push_image};

const NAME: &str = "pull-http";

/// 1 MiB that no other image has: xorshift from the process id and the clock.
fn unique_payload() -> Vec<u8> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut x = nanos ^ (u64::from(std::process::id()) << 32) | 1;
    (0..1 << 17)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow end to end: a package on a fresh base builds every layer (~40 s); CI runs it with --ignored"]
async fn a_base_only_a_registry_holds_is_pulled_with_credentials_and_pinned() {
    let Some(client) = engine().await else { return };
    let tmp = TempDir::new("package-pull");
    let t = tmp.0.clone();
    let Some(registry) = LocalRegistry::start(&t) else {
        return;
    };
    make_base_images();

    // ── the base: only in the registry ──
    let base = format!("{}/tt/pull-base:v1", registry.host);
    derive_image(
        &client,
        BASE,
        &base,
        &[("/etc/tt-model-pull-test", unique_payload())],
    )
    .await
    .unwrap();
    push_image(&client, &base, USER, PASSWORD).await.unwrap();
    client.remove_image(&base).await.unwrap();
    assert!(
        client.image(&base).await.unwrap().is_none(),
        "the engine no longer holds the base"
    );
    let tag_link = registry
        .storage
        .join("docker/registry/v2/repositories/tt/pull-base/_manifests/tags/v1/current/link");
    let registry_digest = std::fs::read_to_string(&tag_link)
        .unwrap()
        .trim()
        .to_string();
    assert!(registry_digest.starts_with("sha256:"), "{registry_digest}");

    let yaml = example_yaml(&t, NAME);
    let out = t.join("out");
    let docker_config = registry.docker_config(&t.join("docker"));
    let with_login = [("DOCKER_CONFIG", docker_config.to_str().unwrap())];
    let package = |env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec![
            "package",
            "--container",
            yaml.to_str().unwrap(),
            "--base-image",
            &base,
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        tokio::task::block_in_place(|| tt_model(&t, env, &args))
    };

    // ── --pull never: the missing base refused by name, nothing pulled ──
    let never = package(&with_login, &["--pull", "never"]);
    let text = stderr(&never);
    assert_eq!(never.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "base image `{base}` is not in the container engine"
        )),
        "{text}"
    );
    assert!(text.contains("`--pull never`"), "{text}");
    assert!(client.image(&base).await.unwrap().is_none());

    // ── no credentials: the registry's refusal, with the image named ──
    let empty = t.join("no-docker-config");
    std::fs::create_dir_all(&empty).unwrap();
    let anon = package(&[("DOCKER_CONFIG", empty.to_str().unwrap())], &[]);
    let text = stderr(&anon);
    assert_eq!(anon.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("pulling base image `{base}` failed: ")),
        "{text}"
    );
    assert!(
        text.to_lowercase().contains("auth"),
        "the registry's answer is about authentication: {text}"
    );
    assert!(!text.contains(PASSWORD));
    assert!(client.image(&base).await.unwrap().is_none());

    // ── the default policy (missing): pulled with the Docker config's credentials, pinned ──
    let started = std::time::Instant::now();
    let pulled = package(&with_login, &[]);
    let text = stderr(&pulled);
    assert!(pulled.status.success(), "{text}");
    assert!(text.contains(&format!("✓ pulled {base}")), "{text}");
    assert!(!text.contains(PASSWORD));
    let facts = client.image(&base).await.unwrap().expect("pulled");
    assert!(
        facts
            .repo_digests
            .contains(&format!("{}/tt/pull-base@{registry_digest}", registry.host)),
        "{:?}",
        facts.repo_digests
    );
    let wire: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join(NAME).join("tt_kernel_manifest.json")).unwrap(),
    )
    .unwrap();
    let bases = &wire["container"]["built"]["base_images"];
    for stage in ["builder", "runtime"] {
        assert_eq!(
            bases[stage],
            format!("{base}@{registry_digest}").as_str(),
            "{stage}: pinned by the registry's manifest digest: {bases}"
        );
    }
    eprintln!(
        "package with a 1 MiB-layer base pulled: {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // ── present now: the default does not pull again ──
    let again = package(&with_login, &[]);
    let text = stderr(&again);
    assert!(again.status.success(), "{text}");
    assert!(!text.contains("pulled"), "{text}");

    let _ = client.remove_image(&base).await;
}
