//! `lint --check-sources` and `package` judge a manifest's sources with one implementation
//! (`tt_model_manifest::sources`): a missing `source.code` entry is the same finding, at the
//! same place, whether lint finds it before packaging or staging finds it in a tree that
//! changed (or was fetched) after the lint.

use std::path::Path;

use tt_model_manifest::{CheckOptions, check_str};
use tt_model_package::PackageError;
use tt_model_package::from_manifest::spec_from_manifest;
use tt_model_package::stage::stage_code;

/// An http-server manifest whose tree is `tree` and whose code allowlist is `code`.
fn manifest(tree: &Path, code: &str) -> String {
    format!(
        "schema: \"5.1\"\nrepo: acme/agree\nname: agree\nweights: {{repo: acme/w, revision: 0123456789abcdef0123456789abcdef01234567}}\nkind: http-server\narch: blackhole\nsource:\n  tt_metal: {}\n  code: {code}\n  ubuntu: \"22.04\"\n  python: \"3.12\"\nruntime:\n  command: [\"sh\", \"/serve.sh\", \"{{port}}\"]\n  ready_line: up\nserve:\n  hardware: p150\n  mesh_device: P150\n",
        tree.display()
    )
}

#[test]
fn a_missing_code_entry_is_the_same_finding_from_lint_and_from_staging() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("models/ok")).unwrap();
    std::fs::write(tree.join("models/ok/m.py"), "print(1)\n").unwrap();
    let src = manifest(&tree, "[models/ok, models/gone]");
    let with_sources = CheckOptions {
        sources_base: Some(dir.path().to_path_buf()),
    };

    // lint: one located error on the entry.
    let lint = check_str(&src, &with_sources);
    let errors: Vec<_> = lint.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{:#?}", lint.diagnostics);
    let finding = errors[0];
    assert_eq!(finding.path, "source.code[1]");
    assert_eq!((finding.pos.line, finding.pos.col), (9, 21));

    // package: the same manifest, read without the file-system checks (as if the tree lost
    // the entry after lint), fails at staging with the same field, message and place.
    let m = check_str(&src, &CheckOptions::default())
        .manifest
        .expect("valid without the file-system checks");
    let spec = spec_from_manifest(&m, &dir.path().join("tt-model.yaml"), dir.path()).unwrap();
    let err = stage_code(&spec, &tree, &dir.path().join("stage/code")).unwrap_err();
    let PackageError::Field(problem) = &err else {
        panic!("a missing entry is a field error: {err:?}");
    };
    assert_eq!(problem.to_diagnostic(&src), *finding);
    assert_eq!(err.field_error().as_ref(), Some(problem));
    assert_eq!(err.class(), tt_model_package::ErrorClass::Input);
}

#[test]
fn home_relative_trees_resolve_the_same_for_lint_and_package() {
    // `~/` is the home directory for both (lint once joined it to the base unexpanded).
    let home = std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME is set"));
    let src = manifest(Path::new("~/tt-model-no-such-tree"), "[models/x]");
    let base = tempfile::tempdir().unwrap();
    let lint = check_str(
        &src,
        &CheckOptions {
            sources_base: Some(base.path().to_path_buf()),
        },
    );
    let expected = home.join("tt-model-no-such-tree");
    let tree_finding = lint
        .diagnostics
        .iter()
        .find(|d| d.path == "source.tt_metal")
        .expect("the tree is missing");
    assert!(
        tree_finding
            .message
            .ends_with(&format!("(resolved to {})", expected.display())),
        "{}",
        tree_finding.message
    );
    let m = check_str(&src, &CheckOptions::default()).manifest.unwrap();
    let spec = spec_from_manifest(&m, &base.path().join("tt-model.yaml"), base.path()).unwrap();
    let tt_model_package::spec::MetalSource::Local { path } = &spec.metal else {
        panic!("a local tree: {:?}", spec.metal);
    };
    assert_eq!(path, &expected);
}
