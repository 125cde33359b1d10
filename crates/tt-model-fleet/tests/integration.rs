//! The crate's integration tests, one test binary: each file under `tests/` is a module here
//! (one link of the dependency graph instead of one per file); run one file's tests with
//! `cargo test -p tt-model-fleet --test integration <module>::`.

mod fleet_golden;
