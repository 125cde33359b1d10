//! The crate's integration tests, one test binary: each file under `tests/` is a module here.
//! One binary links the dependency graph once instead of once per file (CI builds in a
//! fraction of the time); run one file's tests with `cargo test --test integration <module>::`.

mod common;
mod download;
mod git_blob_verify;
mod package_snapshot;
mod registry_pull;
mod upload;
