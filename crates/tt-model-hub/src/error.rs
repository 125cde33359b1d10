//! Typed errors of the Hub client.

use std::path::PathBuf;

use crate::verify::HashKind;

/// Everything the Hub client can fail with: bad input, Hub refusals, integrity failures, local I/O.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The repo id is not `<org>/<name>` (or uses characters the Hub does not allow).
    #[error(
        "invalid repo id '{0}': expected <org>/<name> made of letters, digits, '-', '_' and '.'"
    )]
    BadRepoId(String),
    /// The revision is empty, absolute or contains `..`, so it cannot name a directory under
    /// `snapshots/`.
    #[error("unsafe revision '{0}': a revision may not be empty, absolute, or contain '..'")]
    BadRevision(String),
    /// A file name (from a listing, or a path being statted) would escape the snapshot or is not
    /// valid there.
    #[error("unsafe file name '{0}' in the Hub listing: refusing to write outside the snapshot")]
    BadFileName(String),
    /// The request never got an HTTP answer (DNS, connect, TLS, or a broken stream).
    #[error("could not reach the Hub at {url}")]
    Network {
        /// The URL that was being fetched.
        url: String,
        /// The transport error from the HTTP client.
        #[source]
        source: reqwest::Error,
    },
    /// A 404, or any refusal the Hub tags `RepoNotFound` (its answer to an anonymous request
    /// for a private repo and for one that does not exist alike).
    #[error(
        "{repo}@{revision} was not found on {endpoint} ({status}): no such repo, or no access to it; check the repo id and revision (a private repo needs HF_TOKEN set to a token that can read it)"
    )]
    NotFound {
        /// The repo id as requested (`org/name`).
        repo: String,
        /// The revision as requested (branch, tag or commit).
        revision: String,
        /// The Hub endpoint asked (`HF_ENDPOINT` or the default), so a mirror mix-up shows.
        endpoint: String,
        /// The HTTP status (404, or 401 with `X-Error-Code: RepoNotFound`).
        status: u16,
    },
    /// The repo is gated (`X-Error-Code: GatedRepo`) and this account has not been granted access.
    #[error(
        "{repo} is gated and you do not have access ({status}): request access on its Hub page, with HF_TOKEN set to that account's token"
    )]
    Gated {
        /// The repo id as requested.
        repo: String,
        /// The HTTP status of the refusal (401 or 403).
        status: u16,
    },
    /// A 401 although a token was sent: the Hub does not accept `HF_TOKEN`.
    #[error("the Hub rejected HF_TOKEN for {repo} (401): the token is invalid or expired")]
    TokenRejected {
        /// The repo id as requested.
        repo: String,
    },
    /// A 401 or 403 with no more specific error code (typically: no token sent for a private repo).
    #[error("access to {repo} was refused ({status}): set HF_TOKEN to a token that can read it")]
    Unauthorized {
        /// The repo id as requested.
        repo: String,
        /// The HTTP status (401 or 403).
        status: u16,
    },
    /// Any other non-success status on a read.
    #[error("the Hub answered {status} for {url}")]
    Http {
        /// The URL that was fetched.
        url: String,
        /// The HTTP status the Hub answered.
        status: u16,
    },
    /// A write the Hub refused, with its own words (`X-Error-Message` or the JSON `error`).
    #[error("the Hub refused {url} ({status}): {message}")]
    Refused {
        /// The URL the write went to.
        url: String,
        /// The HTTP status of the refusal.
        status: u16,
        /// The Hub's message, or the start of the body when it gave none.
        message: String,
    },
    /// A success status whose body is not what the protocol says (bad JSON, missing field, bad
    /// header).
    #[error("the Hub's answer for {url} could not be read: {detail}")]
    BadResponse {
        /// The URL whose answer could not be used.
        url: String,
        /// What was wrong with it.
        detail: String,
    },
    /// The downloaded bytes do not hash to the id the Hub published for the file: the LFS
    /// sha256 for LFS files, the git blob sha1 for regular files.
    #[error(
        "{kind} mismatch for {file}: the Hub's {} is {expected}, the downloaded bytes hash to {actual}; the partial file was deleted",
        .kind.published_as()
    )]
    ShaMismatch {
        /// The file's name in the repo.
        file: String,
        /// Which id was checked: sha256 (LFS) or git blob sha1 (regular file).
        kind: HashKind,
        /// The hex digest the Hub published.
        expected: String,
        /// The hex digest of the bytes actually downloaded.
        actual: String,
    },
    /// The downloaded file has another byte count than the Hub's listing gives for it.
    #[error("size mismatch for {file}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        /// The file's name in the repo.
        file: String,
        /// Size in bytes according to the Hub.
        expected: u64,
        /// Size in bytes actually written.
        actual: u64,
    },
    /// A resolve answered with an `X-Repo-Commit` other than the commit the plan pinned (the branch
    /// moved mid-download).
    #[error("the Hub served {file} from commit {got}, but {expected} was requested")]
    CommitMismatch {
        /// The file's name in the repo.
        file: String,
        /// The commit the download plan resolved and pinned.
        expected: String,
        /// The commit the Hub said it served the file from.
        got: String,
    },
    /// The HF cache filesystem has too little free space for what is left to download; checked
    /// before any byte is fetched.
    #[error(
        "not enough disk space for the weights {repo}: needs {needed} bytes more, {free} bytes free on the HF cache filesystem ({cache})"
    )]
    NoSpace {
        /// The repo id being downloaded.
        repo: String,
        /// Bytes missing: what remains to download minus what is free.
        needed: u64,
        /// Bytes free on the cache filesystem (for an unprivileged user).
        free: u64,
        /// The HF cache root whose filesystem was checked.
        cache: PathBuf,
    },
    /// A local file operation failed.
    #[error("{op} {path}")]
    Io {
        /// What was being done, e.g. `"create"` or `"write"`: it prefixes the path in the message.
        op: &'static str,
        /// The file or directory operated on.
        path: PathBuf,
        /// The underlying I/O error (ENOSPC here also counts as [`HubError::is_no_space`]).
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
