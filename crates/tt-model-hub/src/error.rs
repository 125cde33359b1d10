//! Typed errors of the Hub client.

use std::path::PathBuf;

use crate::verify::HashKind;

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "invalid repo id '{0}': expected <org>/<name> made of letters, digits, '-', '_' and '.'"
    )]
    BadRepoId(String),
    #[error("unsafe revision '{0}': a revision may not be empty, absolute, or contain '..'")]
    BadRevision(String),
    #[error("unsafe file name '{0}' in the Hub listing: refusing to write outside the snapshot")]
    BadFileName(String),
    #[error("could not reach the Hub at {url}")]
    Network {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// A 404, or any refusal the Hub tags `RepoNotFound` (its answer to an anonymous request
    /// for a private repo and for one that does not exist alike).
    #[error(
        "{repo}@{revision} was not found on {endpoint} ({status}): no such repo, or no access to it; check the repo id and revision (a private repo needs HF_TOKEN set to a token that can read it)"
    )]
    NotFound {
        repo: String,
        revision: String,
        endpoint: String,
        status: u16,
    },
    #[error(
        "{repo} is gated and you do not have access ({status}): request access on its Hub page, with HF_TOKEN set to that account's token"
    )]
    Gated { repo: String, status: u16 },
    #[error("the Hub rejected HF_TOKEN for {repo} (401): the token is invalid or expired")]
    TokenRejected { repo: String },
    #[error("access to {repo} was refused ({status}): set HF_TOKEN to a token that can read it")]
    Unauthorized { repo: String, status: u16 },
    #[error("the Hub answered {status} for {url}")]
    Http { url: String, status: u16 },
    /// A write the Hub refused, with its own words (`X-Error-Message` or the JSON `error`).
    #[error("the Hub refused {url} ({status}): {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[error("the Hub's answer for {url} could not be read: {detail}")]
    BadResponse { url: String, detail: String },
    /// The downloaded bytes do not hash to the id the Hub published for the file: the LFS
    /// sha256 for LFS files, the git blob sha1 for regular files.
    #[error(
        "{kind} mismatch for {file}: the Hub's {} is {expected}, the downloaded bytes hash to {actual}; the partial file was deleted",
        .kind.published_as()
    )]
    ShaMismatch {
        file: String,
        kind: HashKind,
        expected: String,
        actual: String,
    },
    #[error("size mismatch for {file}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        file: String,
        expected: u64,
        actual: u64,
    },
    #[error("the Hub served {file} from commit {got}, but {expected} was requested")]
    CommitMismatch {
        file: String,
        expected: String,
        got: String,
    },
    #[error(
        "not enough disk space for the weights {repo}: needs {needed} bytes more, {free} bytes free on the HF cache filesystem ({cache})"
    )]
    NoSpace {
        repo: String,
        needed: u64,
        free: u64,
        cache: PathBuf,
    },
    #[error("{op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl HubError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> HubError {
        let path = path.into();
        move |source| HubError::Io { op, path, source }
    }

    /// True when the cause is a full disk (ENOSPC): always fatal for serve.
    pub fn is_no_space(&self) -> bool {
        match self {
            HubError::NoSpace { .. } => true,
            HubError::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            _ => false,
        }
    }
}
