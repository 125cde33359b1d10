//! Lint of the seed manifest (GR00T N1.6, ~25 KB), in process: parse + decode + every rule.

use std::hint::black_box;

const SEED: &str = include_str!("../../../examples/gr00t-n1.6-3b-p150/tt-model.yaml");

fn main() {
    divan::main();
}

#[divan::bench]
fn lint_seed() -> usize {
    let report = tt_model_manifest::check_str(black_box(SEED), &Default::default());
    report.diagnostics.len()
}

#[divan::bench]
fn render_schema() -> usize {
    tt_model_manifest::schema::json_schema_string().len()
}
