//! tt-model-package: turn a `tt-model.yaml` into a verified container image, its OCI layout,
//! a model card and the wire manifest.
//!
//! ```text
//! Resolve ── Stage ── Build ── Verify ── Export
//! ```
//! Pure parts (the spec, templates, staging rules, digests, card, verify markers) are plain
//! functions with tests; the engine is reached only through `tt-model-engine`.
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod card;
pub mod cargo_bin;
pub mod context;
pub mod digest;
pub mod entry;
pub mod error;
pub mod from_manifest;
pub mod git;
pub mod launcher;
pub mod lock;
pub mod out_root;
pub mod partials;
pub mod pipeline;
pub mod report;
pub mod shell;
pub mod sources;
pub mod spec;
pub mod stage;
pub mod templates;
pub mod verify;

pub use entry::package_manifest;
pub use error::{ErrorClass, PackageError};
pub use pipeline::{Builder, Built, PackageOptions, Packaged, PullPolicy, package};
pub use report::{Event, Phase, Progress};
pub use spec::PackageSpec;
