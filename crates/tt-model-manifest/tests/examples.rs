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
        // Every example is warning-free: README's CI line lints them with --deny-warnings.
        assert!(
            warnings.is_empty(),
            "{}: unexpected warnings {warnings:?}",
            path.display()
        );
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

/// The example is the seed byte for byte, followed only by the two card sections the publish
/// gate wants (comments, `card.performance`, `card.limitations`).
#[test]
fn the_seed_example_is_the_seed_plus_its_card_sections() {
    let seed = root().join("../shared/seeds/gr00t-n1.6-3b-p150.tt-model.yaml");
    let Ok(seed) = std::fs::read_to_string(&seed) else {
        eprintln!("shared seed not present; skipping the byte comparison");
        return;
    };
    let example =
        std::fs::read_to_string(root().join("examples/gr00t-n1.6-3b-p150/tt-model.yaml")).unwrap();
    let added = example
        .strip_prefix(seed.as_str())
        .expect("examples/gr00t-n1.6-3b-p150/tt-model.yaml starts with the seed, unchanged");
    let keys: Vec<&str> = added
        .lines()
        .filter(|l| {
            l.starts_with("  ") && !l.starts_with("   ") && !l.trim_start().starts_with('#')
        })
        .collect();
    assert_eq!(keys, ["  performance: |", "  limitations: |"], "{added}");
    assert!(
        added.lines().all(|l| l.is_empty() || l.starts_with("  ")),
        "only card keys are added: {added}"
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
    assert!(
        report.diagnostics.is_empty(),
        "with its card sections the example is clean: {:?}",
        report.diagnostics
    );
    // The seed itself (without them) is refused at publish only.
    let seed = root().join("../shared/seeds/gr00t-n1.6-3b-p150.tt-model.yaml");
    if let Ok(seed) = std::fs::read_to_string(seed) {
        let codes: Vec<_> = check_str(&seed, &CheckOptions::default())
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect();
        assert_eq!(
            codes,
            vec!["card-gaps"],
            "the seed's only finding is the publish gap"
        );
    }
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
