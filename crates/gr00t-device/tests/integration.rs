//! The crate's integration tests, one test binary: each file under `tests/` is a module here.
//! One binary links the dependency graph once instead of once per file (CI builds in a
//! fraction of the time); run one file's tests with `cargo test --test integration <module>::`.

// Tests and their helpers print what they measured and why they skipped (the print lints
// are for library and binary code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod sim_full_forward;
