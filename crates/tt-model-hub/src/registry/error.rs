//! Typed errors of the registry client. No message carries a credential.

use std::path::PathBuf;

/// Everything the OCI registry client can fail with; messages never include a credential.
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
    /// The request never got an HTTP answer (DNS, connect, TLS, or a broken stream).
    #[error("could not reach the registry at {url}")]
    Network {
        /// The URL that was being requested.
        url: String,
        /// The transport error from the HTTP client.
        #[source]
        source: reqwest::Error,
    },
    /// 401 after authenticating (or with no credentials to offer).
    #[error("the registry {host} refused the credentials for {repository} ({status}){hint}")]
    Unauthorized {
        /// The registry `host[:port]`.
        host: String,
        /// The repository path under the host.
        repository: String,
        /// The HTTP status (401, or 403).
        status: u16,
        /// How to provide credentials, when none were found.
        hint: String,
    },
    /// A Docker credential helper failed (its output is not repeated: it may hold secrets).
    #[error("the credential helper docker-credential-{helper} failed for {host}: {detail}")]
    Helper {
        /// The helper's name: the suffix of `docker-credential-<helper>`.
        helper: String,
        /// The registry host credentials were asked for.
        host: String,
        /// What went wrong (could not start, exit status, unreadable answer), never the helper's
        /// output.
        detail: String,
    },
    /// A manifest or blob the registry does not have (404).
    #[error("{what} {reference} is not in {host}/{repository} (404)")]
    NotFound {
        /// What was asked for: `"manifest"` or `"blob"`.
        what: &'static str,
        /// The registry `host[:port]`.
        host: String,
        /// The repository path under the host.
        repository: String,
        /// The tag or digest asked for.
        reference: String,
    },
    /// Any other refusal, with the registry's own error codes.
    #[error("the registry answered {status} to {method} {url}: {message}")]
    Refused {
        /// The HTTP method, as text (`GET`, `HEAD`, `POST`, `PUT`).
        method: &'static str,
        /// The URL requested.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The registry's `errors` as `CODE: message; …`, or the start of the body when it has
        /// none.
        message: String,
    },
    /// A success status whose body or headers are not what the distribution API says.
    #[error("the registry's answer to {url} could not be read: {detail}")]
    BadResponse {
        /// The URL whose answer could not be used.
        url: String,
        /// What was wrong with it.
        detail: String,
    },
    /// Bytes that do not hash to the digest that names them.
    #[error("{what} {digest} from {host}/{repository} is corrupt: its bytes hash to {actual}")]
    DigestMismatch {
        /// What was fetched: `"manifest"` or `"blob"`.
        what: &'static str,
        /// The registry `host[:port]`.
        host: String,
        /// The repository path under the host.
        repository: String,
        /// The digest (`sha256:<hex>`) the content was fetched by.
        digest: String,
        /// The digest its bytes actually hash to.
        actual: String,
    },
    /// A blob's byte count differs from the size the manifest gives for it.
    #[error(
        "blob {digest} from {host}/{repository} is {actual} bytes; the manifest says {expected}"
    )]
    SizeMismatch {
        /// The registry `host[:port]`.
        host: String,
        /// The repository path under the host.
        repository: String,
        /// The blob's digest.
        digest: String,
        /// Size in bytes according to the manifest.
        expected: u64,
        /// Size in bytes actually received.
        actual: u64,
    },
    /// The registry stored the manifest under another digest than ours (it rewrote it).
    #[error(
        "the registry stored the manifest as {stored}, not as {pushed}: it does not keep manifests byte for byte, so the package could not pin it"
    )]
    ManifestRewritten {
        /// The digest of the manifest bytes we pushed (the one the package pins).
        pushed: String,
        /// The digest the registry reported (`Docker-Content-Digest`) for what it stored.
        stored: String,
    },
    /// A local file operation failed.
    #[error("{op} {path}")]
    Io {
        /// What was being done, e.g. `"Cannot create"`: it prefixes the path in the message.
        op: &'static str,
        /// The file or directory operated on.
        path: PathBuf,
        /// The underlying I/O error.
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
