//! What a test seeds the Hub with (repos at a commit, their files, the users and their tokens)
//! and what it reads back (the requests seen, the files stored).

use sha2::{Digest, Sha256};
use tt_model_hub::verify::{git_blob_id, sha256_hex};

use super::state::lfs_pointer;

/// A file of a seeded repo.
#[derive(Debug, Clone)]
pub struct FakeFile {
    /// Path in the repo (`/`-separated).
    pub path: String,
    /// The file's real content (what the listing's ids and sizes describe).
    pub content: Vec<u8>,
    /// Stored in LFS (gets an `lfs.sha256` in the listing and a CDN redirect).
    pub lfs: bool,
    /// Serve these bytes instead of `content` while the listing and headers still advertise
    /// `content`'s ids: simulates a corrupted transfer.
    pub corrupt_with: Option<Vec<u8>>,
}

impl FakeFile {
    /// A regular (non-LFS) file.
    pub fn regular(path: &str, content: impl Into<Vec<u8>>) -> Self {
        FakeFile {
            path: path.into(),
            content: content.into(),
            lfs: false,
            corrupt_with: None,
        }
    }
    /// A file stored in LFS.
    pub fn lfs(path: &str, content: impl Into<Vec<u8>>) -> Self {
        FakeFile {
            path: path.into(),
            content: content.into(),
            lfs: true,
            corrupt_with: None,
        }
    }
    /// The git object id of the file in the repo tree (`blobId`): of the pointer for LFS files.
    pub fn blob_id(&self) -> String {
        if self.lfs {
            let pointer = lfs_pointer(&sha256_hex(&self.content), self.content.len() as u64);
            git_blob_id(pointer.as_bytes())
        } else {
            git_blob_id(&self.content)
        }
    }
}

/// A seeded public repo at one commit, reachable by the commit sha and by its branches.
#[derive(Debug, Clone)]
pub struct FakeRepo {
    /// The repo id (`org/name`).
    pub id: String,
    /// The 40-hex commit sha every branch of the repo points to.
    pub commit: String,
    /// Branch names that resolve to `commit` (`["main"]` by default).
    pub branches: Vec<String>,
    /// The repo's files at `commit`.
    pub files: Vec<FakeFile>,
}

impl FakeRepo {
    /// A repo whose commit sha is derived from its id and files (stable across runs).
    pub fn new(id: &str, files: Vec<FakeFile>) -> Self {
        let mut h = Sha256::new();
        h.update(id.as_bytes());
        for f in &files {
            h.update(f.path.as_bytes());
            h.update(&f.content);
        }
        FakeRepo {
            id: id.into(),
            commit: hex::encode(h.finalize())[..40].to_string(),
            branches: vec!["main".into()],
            files,
        }
    }
}

/// An account the server knows: its token, its name, and the orgs it can write to.
#[derive(Debug, Clone)]
pub struct HubUser {
    /// The bearer token that authenticates as this user.
    pub token: String,
    /// The user name, also the namespace it can write to.
    pub name: String,
    /// Organizations whose namespaces it can also write to.
    pub orgs: Vec<String>,
}

impl HubUser {
    /// A user with `token`, named `name`, who can also write to `orgs`.
    pub fn new(token: &str, name: &str, orgs: &[&str]) -> Self {
        HubUser {
            token: token.into(),
            name: name.into(),
            orgs: orgs.iter().map(|o| o.to_string()).collect(),
        }
    }
    /// Whether this user may write to repos under `namespace`.
    pub(crate) fn can_write(&self, namespace: &str) -> bool {
        self.name == namespace || self.orgs.iter().any(|o| o == namespace)
    }
}

/// The token and user [`HubServer::start`](super::HubServer::start) registers (writes to `tester/*` and `acme/*`).
pub const TEST_TOKEN: &str = "hf_test";

/// One request the server saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The HTTP method (`GET`, `HEAD`, …).
    pub method: String,
    /// The URL path, without the query string.
    pub path: String,
    /// The `Range` header, when sent.
    pub range: Option<String>,
    /// The `Authorization` header as sent (`Bearer …`), when sent.
    pub authorization: Option<String>,
}

/// A file of a repo at a revision, as the tests inspect it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Path in the repo.
    pub path: String,
    /// Content length in bytes.
    pub size: u64,
    /// sha256 of the content, lowercase hex.
    pub sha256: String,
    /// Whether the file is stored in LFS.
    pub lfs: bool,
}
