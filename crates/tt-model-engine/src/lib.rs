//! tt-model-engine: the only crate that talks to the container engine (through bollard).
//!
//! Nothing here exposes bollard types: callers get our own [`Client`], [`EngineError`],
//! build events and image facts, so the engine library can change without touching the
//! packaging or CLI crates.
//!
//! Module ownership while the crate is being built: `client`, `error`, `build`, `images`,
//! `export`, `oneshot` (packaging); `oci_load` (the inverse of `export`), `localdb` (the
//! installed-packages database); `run`, `containers`, `logs`, `devices` (serving) are added beside them.
// A library reports through its return values and its callers' printers, never the terminal.
#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::print_stderr))]
#![warn(missing_docs)]

pub mod archive;
pub mod build;
pub mod client;
pub mod error;
pub mod export;
pub mod images;
pub mod localdb;
pub mod oci_load;
pub mod oneshot;
#[cfg(feature = "testing")]
pub mod testing;
// serving
pub mod bootlog;
pub mod containers;
pub mod devices;
pub mod diagnose;
pub mod labels;
pub mod logs;
pub mod run_spec;
pub mod wait;

pub use client::Client;
pub use error::EngineError;
