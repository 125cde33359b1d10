//! Typed errors of the registry client. No message carries a credential.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// `image.registry` is not `host[:port]/namespace`.
    #[error(
        "invalid image.registry '{0}': expected <host>[:<port>]/<namespace> (e.g. ghcr.io/acme or 127.0.0.1:5000/tt)"
    )]
    BadTarget(String),
    /// The repository (`image.repository`, default the package name) is not a registry name.
    #[error(
        "invalid image repository '{0}': a registry name is lowercase letters, digits and '.', '_', '-' between them"
    )]
    BadRepository(String),
    #[error("could not reach the registry at {url}")]
    Network {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// 401 after authenticating (or with no credentials to offer).
    #[error("the registry {host} refused the credentials for {repository} ({status}){hint}")]
    Unauthorized {
        host: String,
        repository: String,
        status: u16,
        /// How to provide credentials, when none were found.
        hint: String,
    },
    /// A Docker credential helper failed (its output is not repeated: it may hold secrets).
    #[error("the credential helper docker-credential-{helper} failed for {host}: {detail}")]
    Helper {
        helper: String,
        host: String,
        detail: String,
    },
    #[error("{what} {reference} is not in {host}/{repository} (404)")]
    NotFound {
        what: &'static str,
        host: String,
        repository: String,
        reference: String,
    },
    /// Any other refusal, with the registry's own error codes.
    #[error("the registry answered {status} to {method} {url}: {message}")]
    Refused {
        method: &'static str,
        url: String,
        status: u16,
        message: String,
    },
    #[error("the registry's answer to {url} could not be read: {detail}")]
    BadResponse { url: String, detail: String },
    /// Bytes that do not hash to the digest that names them.
    #[error("{what} {digest} from {host}/{repository} is corrupt: its bytes hash to {actual}")]
    DigestMismatch {
        what: &'static str,
        host: String,
        repository: String,
        digest: String,
        actual: String,
    },
    #[error(
        "blob {digest} from {host}/{repository} is {actual} bytes; the manifest says {expected}"
    )]
    SizeMismatch {
        host: String,
        repository: String,
        digest: String,
        expected: u64,
        actual: u64,
    },
    /// The registry stored the manifest under another digest than ours (it rewrote it).
    #[error(
        "the registry stored the manifest as {stored}, not as {pushed}: it does not keep manifests byte for byte, so the package could not pin it"
    )]
    ManifestRewritten { pushed: String, stored: String },
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl RegistryError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> RegistryError {
        let path = path.into();
        move |source| RegistryError::Io { op, path, source }
    }

    /// True when the registry could not be reached at all (the other errors are its answers).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, RegistryError::Network { .. })
    }
}
