//! tt-model-hub: model weights from a Hugging Face-compatible Hub into the host HF cache.
//!
//! The cache is the Python `huggingface_hub` layout (`models--org--name/{blobs,snapshots,refs}`,
//! `.incomplete` partial blobs) so the served container can open the same snapshot offline.
//! Downloads resume from `.incomplete`, and every LFS file is checked against the sha256 the Hub
//! publishes for it (`lfs.sha256` / `lfs.oid`) before it becomes visible in a snapshot.
//!
//! [`testserver`] is a small Hub-protocol server on 127.0.0.1 used by the tests of this crate and
//! of the CLI: it serves real files in the real URL shapes.

pub mod api;
pub mod cache;
pub mod download;
pub mod env;
pub mod error;
pub mod patterns;
pub mod testserver;

pub use cache::{HubCache, RepoCache};
pub use download::{DownloadPlan, DownloadReporter, Downloader, LocalStatus, NoProgress};
pub use error::HubError;
