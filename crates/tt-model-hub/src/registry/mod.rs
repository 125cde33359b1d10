//! A client of the OCI distribution API (a registry such as `ghcr.io` or Debian's
//! `docker-registry`): what `push` and `pull` need to move one image by digest.
//!
//! Our own client on the `reqwest` stack the Hub client already uses. `oci-client` was the
//! chosen crate, but its last release on reqwest 0.12 (0.15) buffers a whole blob in memory and
//! cannot ask whether the registry has a blob, and its later releases move to reqwest 0.13 (a
//! second HTTP and TLS stack in every build). The protocol we need is small: ping and
//! authenticate, HEAD/mount/upload blobs, PUT a manifest, GET a manifest and blobs, each checked
//! against its digest.
//!
//! - [`target`]: `image.registry` (`host[:port]/namespace`) + repository → where to talk.
//! - [`credentials`]: the Docker config convention (`auths`, `credHelpers`, `credsStore`).
//! - [`challenge`]: `WWW-Authenticate` (Basic, or Bearer with a token service).
//! - [`client`]: the requests. [`push`] and [`pull`]: one image, blob by blob.

pub mod challenge;
pub mod client;
pub mod credentials;
pub mod error;
pub mod pull;
pub mod push;
pub mod target;

pub use client::Registry;
pub use error::RegistryError;
pub use target::RegistryTarget;

/// The OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The Docker v2 schema 2 manifest media type (what older engines push).
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
