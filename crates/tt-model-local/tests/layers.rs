//! Where this crate sits (issue 42): the local use cases read the wire manifest and its
//! launcher (`tt-model-manifest`), never the build pipeline, so serving a published package
//! does not link `package`'s templates, staging and build.

/// The crates a `[dependencies]`-like table of `Cargo.toml` names, by their key.
fn dependencies(manifest: &str, table: &str) -> Vec<String> {
    let header = format!("[{table}]");
    let Some(start) = manifest.lines().position(|l| l.trim() == header) else {
        return Vec::new();
    };
    manifest
        .lines()
        .skip(start + 1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(key, _)| key.trim().to_string())
        .filter(|key| !key.starts_with('#'))
        .collect()
}

#[test]
fn the_local_use_cases_do_not_depend_on_the_build_pipeline() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("the crate's Cargo.toml");
    let deps = dependencies(&manifest, "dependencies");
    assert!(
        deps.iter().any(|d| d == "tt-model-manifest"),
        "read the dependencies: {deps:?}"
    );
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let deps = dependencies(&manifest, table);
        assert!(
            !deps.iter().any(|d| d == "tt-model-package"),
            "[{table}] names tt-model-package: the launcher is tt-model-manifest's \
             (`launch`); {deps:?}"
        );
    }
}
