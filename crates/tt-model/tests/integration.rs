//! The crate's integration tests, one test binary: each file under `tests/` is a module here.
//! One binary links the dependency graph once instead of once per file (CI builds in a
//! fraction of the time); run one file's tests with `cargo test --test integration <module>::`.

// Tests and their helpers print what they measured and why they skipped (the print lints
// are for library and binary code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cli;
mod cli_contract;
mod cli_thin;
mod common;
mod curl_task;
mod exit_codes;
mod gr00t_image;
mod gr00t_n17_example;
mod info_profiles_curl;
mod installed_cli;
mod legacy_names;
mod login_hub;
mod package_cargo;
mod package_located;
mod package_pull;
mod pull_hub;
mod push_hub;
mod push_registry;
mod python_kinds;
mod refresh_aux_rm_all;
mod search_hub;
mod serve_cli;
mod serve_example;
mod serve_ndjson;
mod serve_print_golden;
mod serve_print_k8s;
mod serve_print_k8s_weights;
mod tt_cli_e2e;
mod weights_hub;
mod whitelist_hub;
