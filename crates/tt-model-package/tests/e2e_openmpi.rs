//! OpenMPI ULFM end to end on the real engine: `examples/minimal-http` packaged on a base that
//! carries a stand-in `/opt/openmpi-v5.0.7-ulfm/lib/libmpi.so.40` (the busybox test base plus
//! that one file) ships it in the runtime image, on `LD_LIBRARY_PATH`, and verify runs the
//! check; packaged on the plain test base it says `○` (skipped) and ships nothing.
//!
//! Needs a Docker engine. Without one the test prints why and passes, unless
//! `TT_MODEL_REQUIRE_DOCKER=1` (CI sets it) turns that into a failure.

use std::path::{Path, PathBuf};

use tt_model_engine::Client;
use tt_model_engine::oneshot::OneShot;
use tt_model_package::pipeline::{OPENMPI_DIR, RUNTIME_USER};
use tt_model_package::report::{Event, Recorder};
use tt_model_package::{PackageError, PackageOptions, Packaged, package_manifest};
use tt_model_testkit::engine::{derive_image, engine_or_skip};

const BASE: &str = "local/busybox:tt-model";
const OMPI_BASE: &str = "tt-model-test/busybox-openmpi:latest";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The example as package `name`, with its tree given as an absolute path.
fn example_as(dir: &Path, name: &str) -> PathBuf {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("examples/minimal-http/tt-model.yaml"))
        .unwrap()
        .replace("name: minimal-http", &format!("name: {name}"))
        .replace(
            "tt_metal: ../../tests/fixtures/tt-metal-tree",
            &format!(
                "tt_metal: {}",
                root.join("tests/fixtures/tt-metal-tree").display()
            ),
        );
    let path = dir.join("tt-model.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

async fn package_on(
    base: &str,
    manifest: &Path,
    out: &Path,
) -> (Result<Packaged, PackageError>, Vec<Event>) {
    let options = PackageOptions {
        out_root: out.to_path_buf(),
        base_image: Some(base.into()),
        log_dir: std::env::temp_dir().join("tt-model-test-logs"),
        sources_base: manifest.parent().unwrap().to_path_buf(),
        tool_version: "0.0.0-test".into(),
        build_network: Some("none".into()),
        no_cache: false,
        pull: tt_model_package::PullPolicy::Never,
        credentials: Default::default(),
        builder: Default::default(),
    };
    let recorder = Recorder::default();
    let result = package_manifest(manifest, &options, &recorder).await;
    (result, recorder.into_events())
}

async fn image_env(client: &Client, image: &str) -> Vec<String> {
    client.image(image).await.unwrap().expect("image").env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow end to end: two image builds (~35 s); CI runs it with --ignored"]
async fn openmpi_from_the_base_reaches_the_runtime_image_and_verify() {
    let Some(client) = engine_or_skip().await else {
        return;
    };
    if client.image(BASE).await.unwrap().is_none() {
        let out = std::process::Command::new(repo_root().join("scripts/make-base-images.sh"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    // A real shared library (zlib) stands in for libmpi.so.40.
    let stand_in = [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file())
    .expect("zlib is installed");
    let libmpi = format!("{OPENMPI_DIR}/lib/libmpi.so.40");
    derive_image(
        &client,
        BASE,
        OMPI_BASE,
        &[(libmpi.as_str(), std::fs::read(stand_in).unwrap())],
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();

    // ── with OpenMPI in the base ──
    let manifest = example_as(dir.path(), "openmpi-http");
    let (done, events) = package_on(OMPI_BASE, &manifest, &dir.path().join("out")).await;
    let done = done.unwrap_or_else(|e| panic!("package failed: {e}\n{e:?}"));
    assert!(
        events.iter().any(
            |e| matches!(e, Event::Note(n) if n.contains("OpenMPI ULFM: /opt/openmpi-v5.0.7-ulfm"))
        ),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, Event::Skipped { .. })));
    // Kind checks (build/lib, the code entry, the server program), OpenMPI, 3 authored.
    assert_eq!(done.verify_checks, 3 + 1 + 3);
    let env = image_env(&client, &done.built.image).await;
    assert!(
        env.contains(&format!(
            "LD_LIBRARY_PATH=/opt/tt-metal/build/lib:{OPENMPI_DIR}/lib"
        )),
        "{env:?}"
    );
    let probe = client
        .run_to_completion(&OneShot {
            image: done.built.image.clone(),
            entrypoint: Some(vec![]),
            cmd: vec!["test".into(), "-r".into(), libmpi.clone()],
            user: Some(RUNTIME_USER.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        probe.exit_code, 0,
        "the runtime user reads {libmpi}: {probe:?}"
    );

    // ── the plain test base: skipped, nothing shipped ──
    let plain_dir = tempfile::tempdir().unwrap();
    let manifest = example_as(plain_dir.path(), "openmpi-none-http");
    let (done, events) = package_on(BASE, &manifest, &plain_dir.path().join("out")).await;
    let done = done.unwrap_or_else(|e| panic!("package failed: {e}\n{e:?}"));
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::Skipped { what: s, .. } if s.contains("has no /opt/openmpi-v5.0.7-ulfm")
        )),
        "{events:?}"
    );
    assert_eq!(done.verify_checks, 3 + 3);
    let env = image_env(&client, &done.built.image).await;
    assert!(
        env.contains(&"LD_LIBRARY_PATH=/opt/tt-metal/build/lib".to_string()),
        "{env:?}"
    );
}
