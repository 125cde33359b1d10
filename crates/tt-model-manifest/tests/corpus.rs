//! The malformed-manifest corpus (`tests/fixtures/manifests/bad/`), generated pathological
//! inputs, and a property test: every input is refused with a located message, never a panic.

use crate::common;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tt_model_manifest::{CheckOptions, check_bytes};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/manifests/bad")
}

/// `# expect: <code> <line>:<col>` on the fixture's first line, when it has one.
fn expectation(bytes: &[u8]) -> Option<(String, u32, u32)> {
    let first = bytes.split(|b| *b == b'\n').next()?;
    let text = std::str::from_utf8(first)
        .ok()?
        .strip_prefix("# expect: ")?;
    let (code, at) = text.trim().split_once(' ')?;
    let (line, col) = at.split_once(':')?;
    Some((code.to_owned(), line.parse().ok()?, col.parse().ok()?))
}

#[test]
fn every_bad_fixture_is_refused_with_a_location() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("corpus exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "the corpus has {} fixtures", files.len());
    let mut checked_expectations = 0;
    for file in &files {
        let bytes = std::fs::read(file).expect("readable");
        let report = check_bytes(&bytes, &CheckOptions::default());
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(
            report.has_errors(),
            "{name}: accepted: {:#?}",
            report.diagnostics
        );
        assert!(report.manifest.is_none(), "{name}");
        for d in &report.diagnostics {
            assert!(d.pos.line >= 1 && d.pos.col >= 1, "{name}: unlocated {d:?}");
            assert!(!d.message.is_empty(), "{name}");
        }
        if let Some((code, line, col)) = expectation(&bytes) {
            checked_expectations += 1;
            assert!(
                report.diagnostics.iter().any(|d| d.is_error()
                    && d.code == code
                    && d.pos.line == line
                    && d.pos.col == col),
                "{name}: expected {code} at {line}:{col}, got {:#?}",
                report.diagnostics
            );
        }
    }
    assert!(
        checked_expectations >= 30,
        "only {checked_expectations} fixtures state what they expect"
    );
}

fn refused(src: &[u8]) -> tt_model_manifest::Diagnostic {
    let report = check_bytes(src, &CheckOptions::default());
    assert!(report.has_errors(), "accepted");
    report
        .diagnostics
        .into_iter()
        .find(|d| d.is_error())
        .expect("an error")
}

#[test]
fn a_ten_megabyte_string_is_refused() {
    let big = "x".repeat(10 * 1024 * 1024);
    let src = format!("{}card:\n  description: {big}\n", common::BASE);
    let d = refused(src.as_bytes());
    assert_eq!(d.code, "too-large");
    assert_eq!((d.pos.line, d.pos.col), (1, 1));
    // Under the file limit, one scalar over the scalar limit is refused where it is.
    let long = "y".repeat(tt_model_manifest::decode::MAX_SCALAR_BYTES + 1);
    let d = refused(format!("{}card:\n  description: {long}\n", common::BASE).as_bytes());
    assert_eq!((d.code, d.pos.line, d.pos.col), ("too-long", 10, 16));
}

#[test]
fn deep_nesting_is_refused() {
    let src = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let d = refused(src.as_bytes());
    assert!(d.pos.line >= 1);
}

#[test]
fn many_documents_are_refused() {
    let src = format!("{}---\n{}", common::BASE, common::BASE);
    let d = refused(src.as_bytes());
    assert!(d.message.starts_with("invalid YAML"), "{}", d.message);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let report = check_bytes(&bytes, &CheckOptions::default());
        for d in &report.diagnostics {
            prop_assert!(d.pos.line >= 1);
        }
    }

    #[test]
    fn yaml_like_text_never_panics(text in "[a-z_:{}\\[\\],\\-'\"&*!|>#\\n\\t 0-9.]{0,300}") {
        let _ = check_bytes(text.as_bytes(), &CheckOptions::default());
    }

    #[test]
    fn mutated_base_manifest_never_panics(pos in 0usize..400, byte in any::<u8>()) {
        let mut bytes = common::BASE.as_bytes().to_vec();
        let at = pos % bytes.len();
        bytes[at] = byte;
        let report = check_bytes(&bytes, &CheckOptions::default());
        for d in &report.diagnostics {
            let rendered = d.render("m.yaml", &String::from_utf8_lossy(&bytes), false);
            prop_assert!(rendered.contains("m.yaml:"));
        }
    }
}
