//! The crate's integration tests, one test binary: each file under `tests/` is a module here
//! (one link of the dependency graph instead of one per file); run one file's tests with
//! `cargo test -p tt-model-fleet --test integration <module>::`.

// Tests and their helpers print what they measured and why they skipped (the print lints
// are for library and binary code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod fleet_golden;
mod fleet_weights;
