//! `--builder buildkit` on the real engine (issue 27, item 3): the tt-metal build step's cache
//! mount outlives the package that filled it, `--no-cache` reruns the step without emptying
//! it, and the image is the same bit for bit.
//!
//! The tt-metal tree is a copy of the fixture whose `build_metal.sh` also appends a line to a
//! file in `$CCACHE_DIR` (the mount, as `build_tt_metal.sh` sets it) and prints the count: a
//! count that grows from one package to the next is a cache that survived. On
//! `local/cc:tt-model` (a compiler and ccache) the copy's `build_metal.sh` also compiles C
//! units through ccache when `build_tt_metal.sh` passes `--enable-ccache`: a warm rebuild hits
//! for every unit, as ccache's own statistics in the build log say.
//!
//! Needs a Docker engine on its local socket: without one the test prints why and passes,
//! unless `TT_MODEL_REQUIRE_DOCKER=1` (CI sets it). Image builds: the `--ignored` pass.

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
    package_on(work, out_root, crate::busybox::BASE).await
}

async fn package_on(work: &Path, out_root: &Path, base: &str) -> (Packaged, Vec<Event>) {
    let manifest = repo_root().join("examples/minimal-http/tt-model.yaml");
    let options = PackageOptions {
        no_cache: true,
        builder: Builder::BuildKit,
        base_image: Some(base.into()),
        ..options(out_root, work)
    };
    let recorder = Recorder::default();
    let started = std::time::Instant::now();
    let packaged = package_manifest(&manifest, &options, &recorder)
        .await
        .unwrap_or_else(|e| panic!("package failed: {e}\n{e:?}"));
    // Informational (docs/benchmarks.md), never asserted.
    eprintln!(
        "buildkit package (--no-cache) took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    (packaged, recorder.into_events())
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

/// The compiler base `scripts/make-base-images.sh` makes.
const CC_BASE: &str = "local/cc:tt-model";
/// C units the tree compiles.
const UNITS: usize = 12;

/// Adds `UNITS` C files (unique to this run, so the first build is cold) and their compile,
/// through ccache when `build_metal.sh` gets `--enable-ccache`, to the counting tree's copy.
fn compiling_tree(root: &Path) -> PathBuf {
    let work = counting_tree(root);
    let tree = root.join("tests/fixtures/tt-metal-tree");
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::fs::create_dir_all(tree.join("src")).unwrap();
    for unit in 0..UNITS {
        // Enough optimised code that a compile takes a measurable time.
        // Code, not a comment: the preprocessor drops comments, and ccache would find the
        // preprocessed unit of an earlier run.
        let mut c = format!("const unsigned long long run_{unit} = {run}ULL;\n");
        for f in 0..150 {
            c.push_str(&format!(
                "double u{unit}_f{f}(const double *x, int n) {{ double s = {f}; \
                 for (int i = 0; i < n; ++i) {{ s += x[i] * (i % 7) - s / (i + {f} + 1); \
                 if (s > 1e9) s = 0; }} return s; }}\n"
            ));
        }
        std::fs::write(tree.join(format!("src/unit{unit}.c")), c).unwrap();
    }
    let script = tree.join("build_metal.sh");
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str(concat!(
        "case \" $* \" in *\" --enable-ccache \"*) cc=\"ccache gcc\" ;; *) cc=gcc ;; esac\n",
        "t0=$(date +%s%N)\n",
        "for f in src/*.c; do $cc -O2 -c \"$f\" -o \"build_Release/obj/$(basename \"$f\" .c).o\"; done\n",
        "echo \"fixture: compile took $(( ($(date +%s%N) - t0) / 1000000 )) ms\"\n",
    ));
    std::fs::write(&script, text).unwrap();
    work
}

/// The build log's line that starts with `prefix`, the rest of it.
fn build_line<'a>(events: &'a [Event], prefix: &str) -> Option<&'a str> {
    events.iter().find_map(|e| match e {
        Event::BuildLine(l) => l.trim().strip_prefix(prefix),
        _ => None,
    })
}

/// ccache's `Hits:` and `Misses:` counts from the build log's `ccache --show-stats`.
fn ccache_stats(events: &[Event]) -> (usize, usize) {
    let count = |what: &str| {
        build_line(events, what)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("ccache printed `{what}`: {events:?}"))
    };
    (count("Hits:"), count("Misses:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: two image builds on a Debian base (the --ignored pass runs it)"]
async fn a_warm_rebuild_compiles_nothing_ccache_already_holds() {
    let Some(client) = tt_model_testkit::engine::engine_or_skip().await else {
        return;
    };
    if client.image(CC_BASE).await.unwrap().is_none() {
        let why = format!("{CC_BASE} is missing: scripts/make-base-images.sh makes it");
        assert!(
            std::env::var_os("TT_MODEL_REQUIRE_DOCKER").is_none(),
            "{why}"
        );
        eprintln!("skipped: {why}");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let work = compiling_tree(root.path());
    let out = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (first, events) = package_on(&work, out.path(), CC_BASE).await;
    let cold = started.elapsed();
    let (cold_hits, cold_misses) = ccache_stats(&events);
    let cold_compile = build_line(&events, "fixture: compile took ")
        .unwrap_or("?")
        .to_string();
    let started = std::time::Instant::now();
    let (second, events) = package_on(&work, out.path(), CC_BASE).await;
    let warm = started.elapsed();
    let (warm_hits, warm_misses) = ccache_stats(&events);
    let warm_compile = build_line(&events, "fixture: compile took ")
        .unwrap_or("?")
        .to_string();
    // Informational (docs/benchmarks.md), never asserted.
    eprintln!(
        "ccache through the build cache, {UNITS} units: cold package {:.1} s, compile \
         {cold_compile} ({cold_hits} hits, {cold_misses} misses); warm package {:.1} s, compile \
         {warm_compile} ({warm_hits} hits, {warm_misses} misses)",
        cold.as_secs_f64(),
        warm.as_secs_f64()
    );
    assert_eq!(
        (cold_hits, cold_misses),
        (0, UNITS),
        "the first build compiled every unit"
    );
    assert_eq!(
        (warm_hits, warm_misses),
        (UNITS, 0),
        "the rebuild compiled none"
    );
    assert_eq!(second.built.image_digest, first.built.image_digest);
}
