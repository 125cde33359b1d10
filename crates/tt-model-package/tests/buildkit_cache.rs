//! `--builder buildkit` on the real engine (issue 27, item 3): the tt-metal build step's cache
//! mount outlives the package that filled it, `--no-cache` reruns the step without emptying
//! it, and the image is the same bit for bit.
//!
//! The tt-metal tree is a copy of the fixture whose `build_metal.sh` also appends a line to a
//! file in `$CCACHE_DIR` (the mount, as `build_tt_metal.sh` sets it) and prints the count: a
//! count that grows from one package to the next is a cache that survived. The busybox base has
//! no compiler, so no ccache figures here: docs/packaging.md has those, measured in a probe.
//!
//! Needs a Docker engine on its local socket: without one the test prints why and passes,
//! unless `TT_MODEL_REQUIRE_DOCKER=1` (CI sets it). Two image builds: the `--ignored` pass.

use std::path::{Path, PathBuf};

use tt_model_package::report::{Event, Recorder};
use tt_model_package::{Builder, PackageOptions, Packaged, package_manifest};

use crate::busybox::{engine_with_base, options, repo_root};

/// `examples/minimal-http` against a copy of the fixture tree that counts its builds in the
/// build cache. Returns the directory to package from (where `source.tt_metal`'s relative
/// path leads to the copy).
fn counting_tree(root: &Path) -> PathBuf {
    let tree = root.join("tests/fixtures/tt-metal-tree");
    std::fs::create_dir_all(tree.parent().unwrap()).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(repo_root().join("tests/fixtures/tt-metal-tree"))
        .arg(&tree)
        .status()
        .unwrap();
    assert!(status.success());
    let script = tree.join("build_metal.sh");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str(concat!(
        "if [ -n \"${CCACHE_DIR:-}\" ]; then\n",
        "  echo build >> \"$CCACHE_DIR/fixture-builds\"\n",
        "  echo \"fixture: build cache builds=$(wc -l < \"$CCACHE_DIR/fixture-builds\")\"\n",
        "fi\n",
    ));
    std::fs::write(&script, text).unwrap();
    let work = root.join("examples/minimal-http");
    std::fs::create_dir_all(&work).unwrap();
    work
}

async fn package(work: &Path, out_root: &Path) -> (Packaged, Vec<Event>) {
    let manifest = repo_root().join("examples/minimal-http/tt-model.yaml");
    let options = PackageOptions {
        no_cache: true,
        builder: Builder::BuildKit,
        ..options(out_root, work)
    };
    let mut recorder = Recorder::default();
    let started = std::time::Instant::now();
    let packaged = package_manifest(&manifest, &options, &mut recorder)
        .await
        .unwrap_or_else(|e| panic!("package failed: {e}\n{e:?}"));
    // Informational (docs/benchmarks.md), never asserted.
    eprintln!(
        "buildkit package (--no-cache) took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    (packaged, recorder.0)
}

/// The count the fixture's build printed (`fixture: build cache builds=N`).
fn builds(events: &[Event]) -> usize {
    events
        .iter()
        .find_map(|e| match e {
            Event::BuildLine(l) => l
                .trim()
                .strip_prefix("fixture: build cache builds=")
                .map(|n| n.trim().parse().unwrap()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the tt-metal build step ran and printed its count: {events:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: two image builds (the --ignored pass runs it)"]
async fn the_build_cache_outlives_a_no_cache_package_and_the_image_is_the_same() {
    if engine_with_base().await.is_none() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let work = counting_tree(root.path());
    let out = tempfile::tempdir().unwrap();
    let (first, events) = package(&work, out.path()).await;
    let before = builds(&events);
    // `--no-cache` again: the step reruns (it prints again) and finds its own earlier line in
    // the mount. The mount is shared by every package on the engine, so other packages may
    // have added lines in between: the count only has to have grown.
    let (second, events) = package(&work, out.path()).await;
    let after = builds(&events);
    assert!(
        after > before,
        "the build cache kept the first package's line: {before} then {after}"
    );
    // The cache is a mount, not a layer: the image is the same bit for bit.
    assert_eq!(second.built.image_digest, first.built.image_digest);
    assert!(first.verify_checks > 0, "verify ran on the BuildKit image");
}
