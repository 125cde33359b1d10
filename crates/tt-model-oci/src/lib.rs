//! tt-model-oci: the image formats tt-model reads and writes, with no engine call: the OCI
//! image layout a package ships (its `index.json` written, a layout opened and every blob
//! checked), the docker-archive the engine loads (written on the fly from a layout's blobs),
//! the normalisation that makes a build's layers and config reproducible, and the label keys
//! our images and containers carry. `tt-model-engine` moves these bytes to and from the
//! engine; the Hub crate's registry pull lays down layouts with the same index writer.
//!
//! Modules: `index` (the top of a layout: `index.json`, `oci-layout`), `layout` (a layout
//! opened and checked), `archive` (the docker-archive's `manifest.json`), `convert` (a saved
//! docker-archive as a layout; the one manifest writer), `docker_archive` (a layout written as
//! a docker-archive), `reproducible` (layer tars, image configs and whole layouts normalised
//! for an epoch), `labels` (the label keys).
// A library reports through its return values, never the terminal.
#![warn(missing_docs)]

pub mod archive;
pub mod convert;
pub mod docker_archive;
pub mod index;
pub mod labels;
pub mod layout;
pub mod reproducible;

pub use index::REF_NAME_ANNOTATION;
pub use layout::{Blob, LayoutError, OciLayout};

#[cfg(test)]
mod layout_tests;
