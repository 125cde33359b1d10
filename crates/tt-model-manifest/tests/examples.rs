//! The shipped examples lint clean, the seed manifest is unchanged, and the checked-in JSON
//! Schema is fresh.

use std::path::{Path, PathBuf};

use tt_model_manifest::{CheckOptions, Kind, check_str, load_path};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn examples() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples/")
        .map(|e| e.expect("entry").path().join("tt-model.yaml"))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn every_example_lints_without_errors() {
    let mut kinds = Vec::new();
    for path in examples() {
        let (manifest, warnings) =
            load_path(&path, &CheckOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        kinds.push(manifest.kind);
        // Our examples are warning-free, except the seed's card (it has no performance or
        // limitations section and must stay byte-identical). `minimal-http` belongs to the
        // packaging tests and is held to "no errors" only.
        if path.ends_with("minimal-http/tt-model.yaml") {
            continue;
        }
        for w in &warnings {
            assert!(
                path.ends_with("gr00t-n1.6-3b-p150/tt-model.yaml") && w.code == "card-gaps",
                "{}: unexpected warning {w:?}",
                path.display()
            );
        }
    }
    for kind in [
        Kind::VllmPlugin,
        Kind::VllmFork,
        Kind::TtDitServer,
        Kind::HttpServer,
    ] {
        assert!(kinds.contains(&kind), "no example of kind {kind}");
    }
}

#[test]
fn the_seed_example_is_the_seed_unchanged() {
    let seed = root().join("../shared/seeds/gr00t-n1.6-3b-p150.tt-model.yaml");
    let Ok(seed) = std::fs::read(&seed) else {
        eprintln!("shared seed not present; skipping the byte comparison");
        return;
    };
    let example = std::fs::read(root().join("examples/gr00t-n1.6-3b-p150/tt-model.yaml")).unwrap();
    assert!(
        seed == example,
        "examples/gr00t-n1.6-3b-p150/tt-model.yaml differs from the seed"
    );
}

#[test]
fn the_seed_decodes_as_expected() {
    let src =
        std::fs::read_to_string(root().join("examples/gr00t-n1.6-3b-p150/tt-model.yaml")).unwrap();
    let report = check_str(&src, &CheckOptions::default());
    let m = report.manifest.expect("valid");
    assert_eq!(m.kind, Kind::TtDitServer);
    assert_eq!(m.source.code.len(), 20);
    assert_eq!(m.source.all_code_paths().count(), 23);
    assert_eq!(m.verify.len(), 22);
    let serve = m.effective_serve(None).unwrap();
    assert_eq!(
        serve.env["TT_WEIGHTS_REVISION"],
        "d0814e7ecb19202e7c8468b46098b0b7ef3a6d61"
    );
    assert_eq!(serve.env["GR00T_NUM_CQS"], "2");
    assert_eq!(serve.port, Some(20000));
    assert_eq!(m.device_count(), 1);
    assert_eq!(
        m.weights.revision(),
        Some("d0814e7ecb19202e7c8468b46098b0b7ef3a6d61")
    );
    assert!(
        m.card
            .as_ref()
            .unwrap()
            .quickstart
            .as_ref()
            .unwrap()
            .contains("### Accuracy and speed")
    );
    assert_eq!(
        report
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect::<Vec<_>>(),
        vec!["card-gaps"],
        "the seed's only finding is the publish gap"
    );
}

#[test]
fn checked_in_schema_is_fresh() {
    let path = root().join(tt_model_manifest::schema::SCHEMA_FILE);
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = tt_model_manifest::schema::json_schema_string();
    assert!(
        on_disk == generated,
        "{} is stale; regenerate it with `cargo run -p tt-model -- schema --out {}`",
        path.display(),
        tt_model_manifest::schema::SCHEMA_FILE
    );
}
