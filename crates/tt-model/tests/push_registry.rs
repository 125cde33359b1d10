//! The sharing round trip through a real OCI registry (Debian's `docker-registry` on a
//! loopback port, Basic auth) and the Hub-protocol test server, with the real engine: package
//! `examples/minimal-http` with `image.registry` → push without credentials refused, the
//! password never printed → push (the image to the registry, the pointer to the Hub) → `info`
//! → re-push (no blob sent) → the same image under another repository (every blob mounted,
//! none sent) → pull on a clean state dir (by digest from the registry) → serve `--device none`
//! → ready → stop → one source file changed, re-packaged and re-pushed (the layers holding it
//! and the config only) → a blob corrupted in the registry refused at pull, naming its digest.
//!
//! Needs Docker and docker-registry: without them it prints why and passes, unless
//! `TT_MODEL_REQUIRE_DOCKER=1`.

use crate::common;

use common::registry::{LocalRegistry, PASSWORD};
use common::*;
use tt_model_testkit::hub::{HubServer, TEST_TOKEN};

const NAME: &str = "reg-http";
const ID: &str = "acme/reg-http";

#[tokio::test(flavor = "multi_thread")]
async fn push_to_a_registry_pull_by_digest_serve_and_refuse_a_corrupt_blob() {
    let Some(client) = engine().await else { return };
    let tmp = TempDir::new("registry");
    let t = tmp.0.clone();
    let Some(registry) = LocalRegistry::start(&t) else {
        return;
    };
    make_base_images();
    let _ = client
        .remove_container_force(&format!("tt-model-{NAME}-default"))
        .await;

    // The example, on a copy of the fixture tree (one source file changes later), its image
    // pushed to the loopback registry under namespace `tt`.
    let fixture = repo_root().join("tests/fixtures/tt-metal-tree");
    let tree = t.join("tt-metal-tree");
    copy_tree(&fixture, &tree);
    let yaml = example_yaml(&t, NAME);
    let text = std::fs::read_to_string(&yaml)
        .unwrap()
        .replace(&*fixture.to_string_lossy(), &tree.to_string_lossy())
        + &format!("\nimage:\n  registry: {}/tt\n", registry.host);
    std::fs::write(&yaml, text).unwrap();
    let out = t.join("out");
    let pkg = tokio::task::block_in_place(|| package(&t, &[], &yaml, &out));
    assert!(pkg.status.success(), "{}", stderr(&pkg));
    let staged = out.join(NAME);
    let (wire, image, image_id, manifest_digest) = staged_facts(&staged);
    assert_ne!(
        manifest_digest, image_id,
        "a registry package pins the manifest digest"
    );

    let server = HubServer::start(vec![example_weights_repo()])
        .await
        .unwrap();
    let endpoint = server.endpoint();
    let docker_config = registry.docker_config(&t.join("docker"));
    let docker_config = docker_config.to_str().unwrap();
    let env = [
        ("HF_ENDPOINT", endpoint.as_str()),
        ("HF_TOKEN", TEST_TOKEN),
        ("DOCKER_CONFIG", docker_config),
    ];
    let run = |dir: &std::path::Path, args: &[&str]| {
        tokio::task::block_in_place(|| tt_model(dir, &env, args))
    };
    let staged_s = staged.to_str().unwrap();

    // ── no credentials: refused before anything reaches the Hub; the password never shows ──
    let empty = t.join("no-docker-config");
    std::fs::create_dir_all(&empty).unwrap();
    let anon = tokio::task::block_in_place(|| {
        tt_model(
            &t,
            &[
                ("HF_ENDPOINT", endpoint.as_str()),
                ("HF_TOKEN", TEST_TOKEN),
                ("DOCKER_CONFIG", empty.to_str().unwrap()),
            ],
            &["push", staged_s, "--repo", ID],
        )
    });
    let text = stderr(&anon);
    assert_eq!(anon.status.code(), Some(1), "{text}");
    assert!(text.contains("refused the credentials"), "{text}");
    assert!(
        text.contains(&format!("docker login {}", registry.host)),
        "{text}"
    );
    assert_eq!(server.head(ID), None, "no repo created");
    assert_eq!(server.bytes_received(), 0);

    // ── first push: the image to the registry, the pointer to the Hub ──
    let first = run(&t, &["push", staged_s, "--repo", ID]);
    let text = stderr(&first);
    assert!(first.status.success(), "{text}");
    assert!(text.contains(&format!("pushed image tt/{NAME}:")), "{text}");
    assert!(text.contains("0 already there · 0 mounted"), "{text}");
    assert!(!text.contains(PASSWORD) && !stdout(&first).contains(PASSWORD));
    assert!(registry.has_manifest(&format!("tt/{NAME}"), &manifest_digest));
    let files = server.files(ID, "main").unwrap();
    assert!(
        files.iter().all(|f| !f.path.starts_with("image/")),
        "the Hub repo carries a pointer, not the layout"
    );
    assert!(files.iter().any(|f| f.path == "tt_kernel_manifest.json"));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.join("state/pushed/acme__reg-http.json")).unwrap())
            .unwrap();
    assert_eq!(
        record["image"],
        format!("{}/tt/{NAME}@{manifest_digest}", registry.host).as_str()
    );

    let info = json(&run(&t, &["info", ID, "--json"]));
    assert_eq!(
        info["registry"],
        format!("{}/tt/{NAME}@{manifest_digest}", registry.host).as_str()
    );
    assert_eq!(info["image_digest"], image_id.as_str());

    // ── re-push: every blob already there, none sent ──
    let again = run(&t, &["push", staged_s, "--repo", ID]);
    let text = stderr(&again);
    assert!(again.status.success(), "{text}");
    assert!(text.contains("0 blobs sent (0 B)"), "{text}");

    // ── the same image under another repository: every blob mounted, none sent ──
    let p = staged.join("tt_kernel_manifest.json");
    let mut mirror = wire.clone();
    mirror["container"]["image"]["repository"] = "reg-mirror".into();
    std::fs::write(&p, serde_json::to_string_pretty(&mirror).unwrap()).unwrap();
    let mounted = run(&t, &["push", staged_s, "--repo", "acme/reg-mirror"]);
    let text = stderr(&mounted);
    assert!(mounted.status.success(), "{text}");
    assert!(text.contains("0 blobs sent (0 B)"), "{text}");
    assert!(!text.contains(" 0 mounted"), "{text}");
    assert!(registry.has_manifest("tt/reg-mirror", &manifest_digest));
    std::fs::write(&p, serde_json::to_string_pretty(&wire).unwrap()).unwrap();

    // ── pull on a clean state dir: the image by digest from the registry; serve; stop ──
    assert!(run(&t, &["rm", NAME]).status.success());
    assert!(client.image(&image).await.unwrap().is_none());
    let clean = TempDir::new("registry-pull");
    let c = clean.0.clone();
    let pull = run(&c, &["pull", ID]);
    let text = stderr(&pull);
    assert!(pull.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "fetched image {}/tt/{NAME}@{manifest_digest}",
            registry.host
        )),
        "{text}"
    );
    assert!(text.contains(&format!("loaded image {image}")), "{text}");
    assert_eq!(client.image(&image).await.unwrap().unwrap().id, image_id);
    assert!(
        !c.join("state/pull-cache/registry").exists()
            || std::fs::read_dir(c.join("state/pull-cache/registry"))
                .unwrap()
                .next()
                .is_none(),
        "the pulled layout is dropped once loaded"
    );
    // The pulled package's Kubernetes fleet runs the registry image by the digest pull checked.
    let fleet = run(&c, &["serve", ID, "--print", "k8s", "--replicas", "2"]);
    assert!(fleet.status.success(), "{}", stderr(&fleet));
    let fleet_yaml = String::from_utf8(fleet.stdout).unwrap();
    let pinned = format!("image: {}/tt/{NAME}@{manifest_digest}", registry.host);
    assert!(
        fleet_yaml.contains(&pinned) && fleet_yaml.contains("replicas: 2"),
        "{fleet_yaml}"
    );
    if let Some(v) = tt_model_testkit::k8s::validator_or_skip() {
        let report = tt_model_testkit::k8s::validate(&v, &fleet_yaml);
        assert!(report.is_ok(), "{report:?}\n{fleet_yaml}");
    }
    let port = free_port();
    let served = run(&c, &["serve", ID, "--device", "none", "--port", &port]);
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(health(&port).contains(" 200 "));
    assert!(run(&c, &["stop", ID]).status.success());

    // ── one source file changed: re-package, re-push; the registry gets the layers holding it
    //    (and the new config), the Hub the changed file (and the manifest that pins the image) ──
    assert!(run(&c, &["rm", ID]).status.success());
    let blobs = |staged: &std::path::Path| -> std::collections::BTreeSet<String> {
        let l = tt_model_oci::OciLayout::open(&staged.join("image")).unwrap();
        std::iter::once(&l.config)
            .chain(&l.layers)
            .map(|b| b.digest.clone())
            .collect()
    };
    let old_blobs = blobs(&staged);
    let script = tree.join("models/demos/minimal_http/serve.sh");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("# changed\n");
    std::fs::write(&script, text).unwrap();
    let pkg = tokio::task::block_in_place(|| package(&t, &[], &yaml, &out));
    assert!(pkg.status.success(), "{}", stderr(&pkg));
    let (_, image, _, new_digest) = staged_facts(&staged);
    assert_ne!(new_digest, manifest_digest);
    let before = server.bytes_received();
    let changed = run(&t, &["push", staged_s, "--repo", ID]);
    let text = stderr(&changed);
    assert!(changed.status.success(), "{text}");
    let sent = text
        .lines()
        .find(|l| l.contains("pushed image"))
        .unwrap()
        .to_string();
    // Exactly the blobs the new build does not share with the pushed one are sent (which
    // layers a rebuild keeps depends on the engine's build cache: with it warm, only the
    // layers holding the file and the config).
    let new_blobs = blobs(&staged);
    let fresh = new_blobs.difference(&old_blobs).count();
    let count = |what: &str| -> usize {
        let before = sent.split(what).next().unwrap();
        before.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert_eq!(
        (count(" blobs sent"), count(" already there")),
        (fresh, new_blobs.len() - fresh),
        "only the blobs the registry lacks: {sent}"
    );
    eprintln!(
        "BYTES re-push after one source file changed: registry {} · Hub {} (the changed file, manifest, card, lock)",
        sent.trim(),
        server.bytes_received() - before
    );

    // ── a blob corrupted in the registry: refused at pull, naming it; nothing loaded ──
    client.remove_image(&image).await.unwrap();
    let layout = tt_model_oci::OciLayout::open(&staged.join("image")).unwrap();
    let layer = layout.layers.last().unwrap();
    let stored = registry.blob_path(&layer.digest);
    // Every byte flipped: zeros would be no corruption of an empty layer (BuildKit gives a RUN
    // that changes nothing one, and an empty tar is 1,024 zero bytes).
    let flipped: Vec<u8> = std::fs::read(&stored).unwrap().iter().map(|b| !b).collect();
    std::fs::write(&stored, flipped).unwrap();
    let fresh = TempDir::new("registry-corrupt");
    let bad = run(&fresh.0, &["pull", ID]);
    let text = stderr(&bad);
    assert_eq!(bad.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&layer.digest) && text.contains("corrupt"),
        "{text}"
    );
    assert!(
        client.image(&image).await.unwrap().is_none(),
        "nothing loaded from a bad blob"
    );
    let _ = client.remove_image(&image).await;
}

/// The staged manifest, the built image tag, its image id and the pinned manifest digest.
fn staged_facts(staged: &std::path::Path) -> (serde_json::Value, String, String, String) {
    let wire: serde_json::Value =
        serde_json::from_slice(&std::fs::read(staged.join("tt_kernel_manifest.json")).unwrap())
            .unwrap();
    let s = |v: &serde_json::Value| v.as_str().unwrap().to_string();
    let image = s(&wire["container"]["built"]["image"]);
    let id = s(&wire["container"]["built"]["image_digest"]);
    let digest = s(&wire["container"]["image"]["digest"]);
    (wire, image, id, digest)
}

/// Writes a one-layer OCI layout whose layer holds `bytes` of incompressible data; returns the
/// layout's directory.
fn big_layout(dir: &std::path::Path, bytes: usize) -> std::path::PathBuf {
    use sha2::{Digest, Sha256};
    let layout = dir.join("big-layout");
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let layer_tmp = layout.join("layer.tar");
    {
        let file = std::fs::File::create(&layer_tmp).unwrap();
        let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        // xorshift: fast, incompressible enough that no layer of the stack can shortcut it.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut data = vec![0u8; bytes];
        for chunk in data.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        tar.append_data(&mut header, "data.bin", &data[..]).unwrap();
        tar.into_inner().unwrap();
    }
    let put = |bytes: &[u8]| {
        let d = format!("sha256:{}", hex(&Sha256::digest(bytes)));
        std::fs::write(blobs.join(&d[7..]), bytes).unwrap();
        d
    };
    let layer_bytes = std::fs::read(&layer_tmp).unwrap();
    let layer = put(&layer_bytes);
    std::fs::remove_file(&layer_tmp).unwrap();
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {}, "rootfs": {"type": "layers", "diff_ids": [layer]},
    })
    .to_string();
    let config_digest = put(config.as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer, "size": layer_bytes.len()}],
    })
    .to_string();
    let manifest_digest = put(manifest.as_bytes());
    std::fs::write(
        layout.join("index.json"),
        serde_json::json!({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest, "size": manifest.len()}]})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .unwrap();
    layout
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Throughput of a 512 MB image on loopback: registry push and pull against the engine's own
/// load and export, in the same run (for issue 14 and docs/benchmarks.md; timing is printed,
/// never asserted). Slow and disk-heavy, so not part of the README test command.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement: cargo test -p tt-model --test integration measure_registry_512mb -- --ignored --nocapture"]
async fn measure_registry_512mb() {
    use std::sync::Arc;
    use std::time::Instant;
    use tt_model_hub::registry::push::{BlobFile, ImageToPush, push_image};
    use tt_model_hub::registry::{Registry, RegistryTarget, pull};
    use tt_model_local::progress::Silent;
    use tt_model_oci::OciLayout;

    let Some(client) = engine().await else { return };
    let tmp = TempDir::new("registry-512");
    let t = tmp.0.clone();
    let Some(registry) = LocalRegistry::start_with(&t, false) else {
        return;
    };
    const SIZE: usize = 512 << 20;
    let mb = SIZE as f64 / 1e6;
    let rate = |what: &str, s: f64| eprintln!("MEASURED {what}: {s:.2} s, {:.0} MB/s", mb / s);
    let src = tokio::task::block_in_place(|| big_layout(&t, SIZE));
    let reference = "tt-model/measure-512:latest";
    let layout = OciLayout::open(&src).unwrap();

    let t0 = Instant::now();
    let loaded = client.load_oci_layout(&layout, reference).await.unwrap();
    rate(
        "engine load (our OCI layout loader)",
        t0.elapsed().as_secs_f64(),
    );
    let t0 = Instant::now();
    let exported = t.join("exported");
    client
        .export_oci_layout(&loaded.id, &exported, "latest")
        .await
        .unwrap();
    rate(
        "engine export (to an OCI layout)",
        t0.elapsed().as_secs_f64(),
    );

    let exported = OciLayout::open(&exported).unwrap();
    let manifest = std::fs::read(
        exported
            .dir
            .join("blobs/sha256")
            .join(exported.manifest_digest.trim_start_matches("sha256:")),
    )
    .unwrap();
    let image = ImageToPush {
        manifest,
        media_type: tt_model_hub::registry::OCI_MANIFEST.into(),
        manifest_digest: exported.manifest_digest.clone(),
        blobs: std::iter::once(&exported.config)
            .chain(&exported.layers)
            .map(|b| BlobFile {
                digest: b.digest.clone(),
                size: b.size,
                path: b.path.clone(),
            })
            .collect(),
    };
    let target = RegistryTarget::new(&format!("{}/tt", registry.host), "measure-512").unwrap();
    let reg = Registry::connect(target, true, &[]).await.unwrap();
    let no_mounts = Default::default();
    let push = || push_image(&reg, &image, "latest", &no_mounts, Arc::new(Silent));
    let t0 = Instant::now();
    let report = push().await.unwrap();
    rate("registry push (first)", t0.elapsed().as_secs_f64());
    assert_eq!(report.uploaded, 2);
    let t0 = Instant::now();
    let again = push().await.unwrap();
    eprintln!(
        "MEASURED registry re-push (nothing to send): {:.3} s, {} bytes",
        t0.elapsed().as_secs_f64(),
        again.bytes_sent
    );
    let t0 = Instant::now();
    let pulled = t.join("pulled");
    pull::pull_layout(&reg, &exported.manifest_digest, "latest", &pulled, &Silent)
        .await
        .unwrap();
    rate("registry pull (verified)", t0.elapsed().as_secs_f64());
    let _ = client.remove_image(reference).await;
    let t0 = Instant::now();
    let from_pull = OciLayout::open(&pulled).unwrap();
    client.load_oci_layout(&from_pull, reference).await.unwrap();
    rate(
        "engine load of the pulled layout",
        t0.elapsed().as_secs_f64(),
    );
    let _ = client.remove_image(reference).await;
}
