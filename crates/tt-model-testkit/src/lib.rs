//! tt-model-testkit: the test support of the tt-model crates, in one crate that is only ever a
//! dev-dependency (`publish = false`), so no library ships test code or a test feature.
//!
//! * [`hub`]: a Hugging Face Hub-protocol server on 127.0.0.1 (download and upload sides, in
//!   the URL shapes `huggingface_hub` uses), seeded with [`hub::FakeRepo`]s;
//! * [`registry`]: an OCI distribution registry on 127.0.0.1 (the pull side);
//! * [`engine`]: the container engine or a visible skip ([`engine::engine_or_skip`]), and the
//!   images tests derive and push through it;
//! * [`k8s`]: a `serve --print k8s` rendering checked by `kubernetes-validate`.
//!
//! It builds on the libraries' public APIs only (`tt-model-hub`'s hashes and card tags,
//! `tt-model-engine`'s client), so a library's integration tests can use it; a library's own
//! `#[cfg(test)]` unit tests cannot (they would see a second copy of the library's types).
#![warn(missing_docs)]
// Test support says on stderr why a test was skipped (no engine, no validator): that line is
// how a skip stays visible in the test output.
#![allow(clippy::print_stderr)]

pub mod engine;
pub mod hub;
pub mod k8s;
pub mod registry;
