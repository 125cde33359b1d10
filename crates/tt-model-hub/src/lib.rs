//! tt-model-hub: model repos (weights, packages) from a Hugging Face-compatible Hub into the
//! host HF cache.
//!
//! The cache is the Python `huggingface_hub` layout (`models--org--name/{blobs,snapshots,refs}`,
//! `.incomplete` partial blobs) so the served container can open the same snapshot offline.
//! Downloads resume from `.incomplete`, and every file is checked against the content id the Hub
//! publishes for it before it becomes visible in a snapshot: the sha256 (`lfs.sha256`) of an LFS
//! file, the git blob sha1 (`blobId`, the resolve `ETag`) of a regular one ([`verify`]).
//! [`Downloader::snapshot`] with no patterns downloads a whole repo (a package: manifest, code,
//! OCI image layout) the same way.
//!
//! The tests' Hub-protocol server (and OCI registry) is the dev-only crate `tt-model-testkit`'s.
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod api;
pub mod cache;
pub mod card_tags;
pub mod download;
pub mod env;
pub mod error;
pub mod hub;
pub mod patterns;
pub mod plan;
pub mod registry;
pub mod review;
pub mod upload;
pub mod verify;

pub use cache::{HubCache, RepoCache};
pub use download::{DownloadPlan, Downloader, LocalStatus, PlannedFile, Snapshot, Transfer};
pub use error::HubError;
pub use verify::HashKind;
