//! The crate's integration tests, one test binary: each file under `tests/` is a module here.
//! One binary links the dependency graph once instead of once per file (CI builds in a
//! fraction of the time); run one file's tests with `cargo test --test integration <module>::`.

// Tests and their helpers print what they measured and why they skipped (the print lints
// are for library and binary code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod buildkit_cache;
mod busybox;
mod card;
mod cargo_bin;
mod common;
mod e2e_docker;
mod e2e_openmpi;
mod lint_agreement;
mod one_model;
mod openmpi;
mod out_root;
mod reproducible;
mod stage_containment;
mod templates;
mod throughput;
