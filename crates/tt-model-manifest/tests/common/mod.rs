//! Shared helpers for the manifest tests.
#![allow(dead_code)]

use tt_model_manifest::{CheckOptions, Diagnostic, Report, check_str};

/// A valid vllm-plugin manifest; tests edit one line of it.
pub const BASE: &str = r#"schema: "5.1"
repo: acme/m
name: m
weights: {repo: acme/w, revision: 0123456789abcdef0123456789abcdef01234567}
arch: blackhole
source: {tt_metal: tt, code: [models/m], ubuntu: "22.04", python: "3.12"}
runtime: {vllm: {version: "0.10.1"}, plugin: {path: p}}
serve: {hardware: p150, mesh_device: P150, max_num_seqs: 32, block_size: 64}
"#;

/// `BASE` with `from` replaced by `to` (which must occur).
pub fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "BASE has no {from:?}");
    BASE.replacen(from, to, 1)
}

/// Checks `src` without file-system checks.
pub fn check(src: &str) -> Report {
    check_str(src, &CheckOptions::default())
}

/// The errors as `code line:col message`.
pub fn errors(src: &str) -> Vec<String> {
    check(src)
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(short)
        .collect()
}

/// The warnings as `code line:col message`.
pub fn warnings(src: &str) -> Vec<String> {
    check(src)
        .diagnostics
        .iter()
        .filter(|d| !d.is_error())
        .map(short)
        .collect()
}

/// `code line:col message`.
pub fn short(d: &Diagnostic) -> String {
    format!("{} {}:{} {}", d.code, d.pos.line, d.pos.col, d.message)
}

/// The single error of `src`, asserting there is exactly one.
pub fn one_error(src: &str) -> Diagnostic {
    let report = check(src);
    let errors: Vec<&Diagnostic> = report.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(
        errors.len(),
        1,
        "expected one error, got {:#?}",
        report.diagnostics
    );
    errors[0].clone()
}
