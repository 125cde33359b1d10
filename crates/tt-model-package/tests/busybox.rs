//! What the end-to-end tests on the real engine share: the repository root, the busybox base
//! (made when the engine lacks it) and the options of a package built on it.

use std::path::{Path, PathBuf};

use tt_model_engine::Client;
use tt_model_package::PackageOptions;

/// The local base `scripts/make-base-images.sh` makes.
pub const BASE: &str = "local/busybox:tt-model";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The engine with [`BASE`] in it (made now if missing); `None` (the test passes) without an
/// engine, unless `TT_MODEL_REQUIRE_DOCKER=1`.
pub async fn engine_with_base() -> Option<Client> {
    let client = tt_model_testkit::engine::engine_or_skip().await?;
    if client.image(BASE).await.unwrap().is_none() {
        let out = std::process::Command::new(repo_root().join("scripts/make-base-images.sh"))
            .env("TT_MODEL_SKIP_PYTHON_BASE", "1")
            .output()
            .expect("run scripts/make-base-images.sh");
        assert!(out.status.success(), "{out:?}");
    }
    Some(client)
}

/// A package on [`BASE`] with no network in its build, relative paths resolved against
/// `sources_base`, logs in the temporary directory.
pub fn options(out_root: &Path, sources_base: &Path) -> PackageOptions {
    PackageOptions {
        out_root: out_root.to_path_buf(),
        base_image: Some(BASE.into()),
        log_dir: std::env::temp_dir().join("tt-model-test-logs"),
        sources_base: sources_base.to_path_buf(),
        tool_version: "0.0.0-test".into(),
        build_network: Some("none".into()),
        no_cache: false,
        pull: Default::default(),
        credentials: Default::default(),
        builder: Default::default(),
    }
}
