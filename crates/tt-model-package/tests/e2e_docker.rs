//! End to end on the real engine: package `examples/minimal-http` (an http-server whose
//! tt-metal tree is the repository's fixture), then check the image, verify, the outputs and
//! the no-op re-package; and a manifest with a false assertion must fail with its text.
//!
//! Needs a Docker engine. Without one the tests print why and pass, unless
//! `TT_MODEL_REQUIRE_DOCKER=1` (CI sets it) turns that into a failure. The busybox base image
//! is made with `scripts/make-base-images.sh` when missing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tt_model_engine::Client;
use tt_model_manifest::WireManifest;
use tt_model_oci::labels;
use tt_model_package::report::{Event, Recorder};
use tt_model_package::{PackageError, Packaged, package_manifest};

const BASE: &str = "local/busybox:tt-model";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

use tt_model_testkit::engine::engine_or_skip as engine;

async fn ensure_base(client: &Client) {
    if client.image(BASE).await.unwrap().is_some() {
        return;
    }
    let out = std::process::Command::new(repo_root().join("scripts/make-base-images.sh"))
        .output()
        .expect("run scripts/make-base-images.sh");
    assert!(
        out.status.success(),
        "scripts/make-base-images.sh failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Packages through the one entry point, as `tt-model package` does; the engine is the one
/// the entry point connects to (the same as `client`'s).
async fn run_package(
    _client: &Client,
    manifest_path: &Path,
    base_dir: &Path,
    out_root: &Path,
) -> (Result<Packaged, PackageError>, Vec<Event>) {
    let options = crate::busybox::options(out_root, base_dir);
    let recorder = Recorder::default();
    let result = package_manifest(manifest_path, &options, &recorder).await;
    (result, recorder.into_events())
}

/// The tree digest of a directory, computed independently of staging.
fn digest_dir(dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::PermissionsExt;
    let mut records = Vec::new();
    for e in walkdir::WalkDir::new(dir).into_iter().map(Result::unwrap) {
        if e.file_type().is_file() {
            let bytes = std::fs::read(e.path()).unwrap();
            records.push(tt_model_package::digest::FileRecord {
                path: e
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
                mode: tt_model_package::digest::normal_mode(
                    e.metadata().unwrap().permissions().mode(),
                ),
                size: bytes.len() as u64,
                sha256: Sha256::digest(&bytes).into(),
            });
        }
    }
    tt_model_package::digest::tree_digest(&records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_http_packages_verifies_and_repackages_as_a_no_op() {
    let Some(client) = engine().await else { return };
    ensure_base(&client).await;
    let example = repo_root().join("examples/minimal-http");
    let out = tempfile::tempdir_in(std::env::temp_dir()).unwrap();

    // ── first package ──
    let (first, events) = run_package(
        &client,
        &example.join("tt-model.yaml"),
        &example,
        out.path(),
    )
    .await;
    let first = first.unwrap_or_else(|e| panic!("package failed: {e}\n{e:?}"));
    let pkg = out.path().join("minimal-http");
    assert_eq!(first.out_dir, pkg);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Verified { reused: false, .. }))
    );
    // Kind checks (build/lib, each code entry, the server program) + the 3 authored ones.
    assert_eq!(first.verify_checks, 3 + 3);

    // The image exists under its content tag, with the labels.
    let built = &first.built;
    let image_digest = built.image_digest.as_deref().expect("built.image_digest");
    let code_sha256 = built.code_sha256.as_deref().expect("built.code_sha256");
    let short = &image_digest["sha256:".len().."sha256:".len() + 12];
    assert_eq!(built.image, format!("tt-model/minimal-http:{short}"));
    let facts = client
        .image(&built.image)
        .await
        .unwrap()
        .expect("the tagged image exists");
    assert_eq!(facts.id, image_digest);
    assert_eq!(facts.labels[labels::PACKAGE], "minimal-http");
    assert_eq!(facts.labels[labels::KIND], "http-server");
    assert_eq!(facts.labels[labels::REPO], "acme/minimal-http");
    assert_eq!(facts.labels[labels::WEIGHTS], "acme/minimal-http-weights");
    assert_eq!(facts.labels[labels::PROFILES], "default");
    assert_eq!(facts.labels[labels::CODE_SHA256], code_sha256);
    assert_eq!(facts.user, "1000:1000");
    // The provisional tag stays on the engine's own build (the layer cache's anchor); what
    // ships is its normalised twin, another id.
    let raw = client
        .image("tt-model/minimal-http:build")
        .await
        .unwrap()
        .expect("the engine's build keeps the provisional tag");
    assert_ne!(raw.id, facts.id);

    // code/ beside the manifest is what entered the image, byte for byte.
    assert_eq!(digest_dir(&pkg.join("code")), code_sha256);
    assert!(
        pkg.join("code/models/demos/minimal_http/serve.sh")
            .is_file()
    );
    assert!(
        !pkg.join("code/models/demos/other").exists(),
        "only the allowlist ships"
    );

    // The wire manifest reads back and carries the built block.
    let wire = WireManifest::from_json(
        &std::fs::read_to_string(pkg.join("tt_kernel_manifest.json")).unwrap(),
    )
    .expect("valid wire manifest");
    let wb = wire.container.built.as_ref().unwrap();
    assert_eq!(wb, built, "the block read back is the one package returned");
    assert_eq!(wire.container.image.digest.as_deref(), Some(image_digest));
    assert_eq!(wire.container.runtime["lock"], "requirements.lock");
    assert!(wb.base_images["runtime"].starts_with(&format!("{BASE}@sha256:")));

    // The card.
    let card = std::fs::read_to_string(pkg.join("README.md")).unwrap();
    assert!(card.starts_with("---\n"), "{card}");
    assert!(card.contains("license: apache-2.0"), "{card}");
    assert!(
        card.contains("base_model:\n- acme/minimal-http-weights"),
        "{card}"
    );
    assert!(card.contains("# minimal-http\n"), "{card}");
    assert!(
        card.contains(&code_sha256["sha256:".len().."sha256:".len() + 16]),
        "{card}"
    );
    assert!(card.contains("**not** an OpenAI-compatible"), "{card}");

    // The OCI layout: index → manifest → config (= image id) and layers, all present.
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(pkg.join("image/index.json")).unwrap())
            .unwrap();
    let manifest_digest = index["manifests"][0]["digest"].as_str().unwrap();
    assert_eq!(
        first.manifest_digest, manifest_digest,
        "the layout's manifest"
    );
    let blob = |d: &str| {
        pkg.join("image/blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(blob(manifest_digest)).unwrap()).unwrap();
    assert_eq!(manifest["config"]["digest"], image_digest);
    for layer in manifest["layers"].as_array().unwrap() {
        assert!(blob(layer["digest"].as_str().unwrap()).is_file());
    }
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        built.image.as_str()
    );
    let lock = std::fs::read_to_string(pkg.join("requirements.lock")).unwrap();
    assert!(lock.contains("no Python environment"), "{lock}");

    // Without a device the image's default command explains how to run it.
    let run = client
        .run_to_completion(&tt_model_engine::oneshot::OneShot {
            image: built.image.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(run.exit_code, 1, "{}", run.output);
    assert!(
        run.output.contains("--device /dev/tenstorrent"),
        "{}",
        run.output
    );

    // ── no-op re-package ──
    let t = Instant::now();
    let (second, events) = run_package(
        &client,
        &example.join("tt-model.yaml"),
        &example,
        out.path(),
    )
    .await;
    let elapsed = t.elapsed();
    let second = second.unwrap();
    eprintln!("no-op re-package took {:.2}s", elapsed.as_secs_f64());
    assert_eq!(
        second.built.image_digest, built.image_digest,
        "the layer cache gives the same image"
    );
    assert_eq!(
        second.built.code_sha256, built.code_sha256,
        "code digest stable across runs"
    );
    assert_eq!(
        second.built.context_sha256, built.context_sha256,
        "context tar stable across runs"
    );
    assert!(second.reused_export);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Exported { reused: true, .. }))
    );
    assert!(
        events
            .iter()
            .filter(|e| matches!(e, Event::BuildCached))
            .count()
            > 5,
        "steps came from the cache"
    );
    assert_eq!(digest_dir(&pkg.join("code")), code_sha256);
    assert!(pkg.join("image/index.json").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_false_assertion_fails_the_package_with_its_text() {
    let Some(client) = engine().await else { return };
    ensure_base(&client).await;
    let example = repo_root().join("examples/minimal-http");
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let text = std::fs::read_to_string(example.join("tt-model.yaml"))
        .unwrap()
        .replace("name: minimal-http", "name: minimal-http-bad")
        .replace(
            "  - sh: test \"$(id -u)\" = 1000",
            "  - sh: test \"$(id -u)\" = 1000\n  - sh: cat /opt/tt-metal/models/demos/minimal_http/precision.json",
        );
    let manifest = dir.path().join("tt-model.yaml");
    std::fs::write(&manifest, text).unwrap();
    let out = dir.path().join("out");
    // A previous good output must survive the failed package.
    std::fs::create_dir_all(out.join("minimal-http-bad")).unwrap();
    std::fs::write(out.join("minimal-http-bad/keep"), "previous").unwrap();
    let (result, _) = run_package(&client, &manifest, &example, &out).await;
    match result {
        Err(PackageError::Verify {
            index,
            check,
            status,
            output,
        }) => {
            assert_eq!(index, 7);
            assert_eq!(
                check,
                "cat /opt/tt-metal/models/demos/minimal_http/precision.json"
            );
            assert_ne!(status, 0);
            assert!(output.contains("No such file"), "output: {output:?}");
        }
        other => panic!("expected a verify failure, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(out.join("minimal-http-bad/keep")).unwrap(),
        "previous"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        1,
        "only the old output remains: {leftovers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_holding_tracked_files_is_refused() {
    let Some(client) = engine().await else { return };
    let example = repo_root().join("examples/minimal-http");
    // The example's own folder: its files are tracked by this repository's git.
    let (result, _) =
        run_package(&client, &example.join("tt-model.yaml"), &example, &example).await;
    assert!(
        matches!(result, Err(PackageError::OutInsideGit(_))),
        "{result:?}"
    );
}
