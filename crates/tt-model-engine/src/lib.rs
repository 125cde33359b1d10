//! tt-model-engine: the only crate that talks to the container engine (through bollard), and
//! nothing else: every module here makes or reads engine calls. What this machine holds beyond
//! the engine (the installed-packages database, devices and their locks, boot-log reading,
//! diagnosis) lives in `tt-model-local`, which builds on this crate.
//!
//! Callers get our own [`Client`], [`EngineError`], build events, image and container facts,
//! so the engine library can change without touching the other crates. bollard types appear in
//! two places only: the container create bodies ([`run_spec::RunSpec::to_create_body`],
//! [`oneshot::OneShot::create_body`]), public so tests can check what the engine is asked for
//! (isolation, mounts, devices) without starting a container; [`error::Cause`] names bollard's
//! error as the source of an [`EngineError`].
//!
//! Modules: `client`, `error` (the connection and its failures); `build`, `images`, `export`,
//! `oneshot`, `pull` (packaging: build, judge, export, verify and freeze containers, base
//! images pulled); `oci_load` (the inverse of `export`); `reproducible` (a build's image
//! exported and normalised so the same inputs give the same id); `run_spec`, `containers`,
//! `logs` (serving: compose, create/inspect/stop, log streams). The formats those calls read
//! and write (OCI layouts, docker-archives, the layer and config normalisation, our label keys)
//! are `tt-model-oci`'s, which makes no engine call. Readiness (the log and the health probe
//! together) is `tt-model-local`'s boot watch, built on `logs` and `containers`.
//! `buildkit` runs `build`'s builds through BuildKit instead, for `RUN --mount=type=cache`.
//! `torn_line_end` is the decoder quirk every streamed answer lets pass (also for callers that
//! stream through bollard themselves).
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod build;
pub mod buildkit;
pub mod client;
pub mod error;
pub mod export;
pub mod images;
pub mod oci_load;
pub mod oneshot;
pub mod pull;
pub mod reproducible;
pub mod torn_line_end;
// serving
pub mod containers;
pub mod logs;
pub mod run_spec;

pub use client::Client;
pub use error::EngineError;
