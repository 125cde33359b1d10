//! What the test Hub holds: a content-addressed object store on disk and, per repo, its commits.
//!
//! Every file's bytes live once in `objects/<sha256>`, whatever repo or commit names them. A
//! commit is an immutable tree (`path → Entry`) behind an `Arc`; a branch is a commit id. A
//! commit is applied by building the whole new tree first and then swapping the branch under
//! the lock, so a reader sees the old tree or the new one, never half of one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha1::{Digest as _, Sha1};
use sha2::Sha256;

use tt_model_hub::verify::{git_blob_id, sha256_hex};

/// One file of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub size: u64,
    /// The sha256 of the content (the object's name in the store; the LFS oid).
    pub sha256: String,
    /// Stored in LFS: the git tree holds a pointer file, the bytes come from the CDN.
    pub lfs: bool,
    /// Serve this object instead while advertising `sha256`'s ids (a corrupted blob).
    pub served: Option<String>,
    /// The git blob sha1 of the content (regular files; for LFS files see [`Entry::blob_id`]).
    pub git_sha1: String,
}

impl Entry {
    /// The LFS pointer file git stores in place of an LFS file's content.
    pub fn lfs_pointer(&self) -> String {
        lfs_pointer(&self.sha256, self.size)
    }
    /// The git object id in the tree (`blobId`, the tree API's `oid`): of the pointer for LFS.
    pub fn blob_id(&self) -> String {
        if self.lfs {
            git_blob_id(self.lfs_pointer().as_bytes())
        } else {
            self.git_sha1.clone()
        }
    }
    /// The object whose bytes are served.
    pub fn served_object(&self) -> &str {
        self.served.as_deref().unwrap_or(&self.sha256)
    }
}

/// The LFS pointer file of content with this sha256 and size.
pub(crate) fn lfs_pointer(sha256: &str, size: u64) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n")
}

/// An immutable commit.
#[derive(Debug)]
pub(crate) struct Commit {
    pub id: String,
    pub tree: BTreeMap<String, Entry>,
    /// Seconds since the epoch.
    pub at: u64,
    /// Commits in the order they were made ([`next_seq`]): what orders two commits of the
    /// same second, as the real Hub's millisecond timestamps do.
    pub seq: u64,
}

impl Commit {
    /// A new commit `id` of `tree` made at `at`, the latest so far ([`next_seq`]).
    pub fn new(id: String, tree: BTreeMap<String, Entry>, at: u64) -> Arc<Commit> {
        Arc::new(Commit {
            id,
            tree,
            at,
            seq: next_seq(),
        })
    }
}

/// The next commit sequence number (process-wide, increasing).
pub(crate) fn next_seq() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(1);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// A repo: its visibility, its commits, its branches and the LFS objects uploaded to it
/// (uploaded objects stay, committed or not: a push interrupted after an upload resumes).
#[derive(Debug)]
pub(crate) struct Repo {
    pub id: String,
    pub private: bool,
    pub commits: HashMap<String, Arc<Commit>>,
    pub branches: HashMap<String, String>,
    pub lfs: HashSet<String>,
}

impl Repo {
    /// The commit a revision (a branch or a full commit id) names.
    pub fn resolve(&self, rev: &str) -> Option<Arc<Commit>> {
        let id = self.branches.get(rev).map(String::as_str).unwrap_or(rev);
        self.commits.get(id).cloned()
    }
    pub fn head(&self) -> Option<Arc<Commit>> {
        self.resolve("main")
    }
}

/// One operation of a commit, decoded and checked.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Put { path: String, entry: Entry },
    Delete { path: String },
    DeleteFolder { path: String },
}

/// The content-addressed store.
#[derive(Debug)]
pub(crate) struct Store {
    pub dir: PathBuf,
}

impl Store {
    pub fn object(&self, sha256: &str) -> PathBuf {
        self.dir.join("objects").join(sha256)
    }
    pub fn has(&self, sha256: &str) -> bool {
        self.object(sha256).is_file()
    }
    /// Stores `bytes` (temp file + rename; idempotent) and returns its sha256.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<String> {
        let sha = sha256_hex(bytes);
        if !self.has(&sha) {
            let tmp = self.temp_path();
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, self.object(&sha))?;
        }
        Ok(sha)
    }
    /// A fresh temp path beside the objects (same filesystem, so a rename is atomic).
    pub fn temp_path(&self) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        self.dir.join("tmp").join(format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
    }
    pub fn read(&self, sha256: &str) -> std::io::Result<Vec<u8>> {
        std::fs::read(self.object(sha256))
    }
    pub fn create(dir: &Path) -> std::io::Result<Store> {
        std::fs::create_dir_all(dir.join("objects"))?;
        std::fs::create_dir_all(dir.join("tmp"))?;
        Ok(Store { dir: dir.into() })
    }
}

/// An entry for `bytes` (stored).
pub(crate) fn entry_for(store: &Store, bytes: &[u8], lfs: bool) -> std::io::Result<Entry> {
    let sha256 = store.put(bytes)?;
    Ok(Entry {
        size: bytes.len() as u64,
        sha256,
        lfs,
        served: None,
        git_sha1: git_blob_id(bytes),
    })
}

/// The id of a new commit: a sha1 over its parent, its tree and its message, as git's ids are
/// over the commit object (not git's exact object format; the client never recomputes it).
pub(crate) fn commit_id(
    parent: Option<&str>,
    tree: &BTreeMap<String, Entry>,
    message: &str,
    at: u64,
) -> String {
    let mut h = Sha1::new();
    h.update(parent.unwrap_or("").as_bytes());
    for (path, e) in tree {
        h.update(path.as_bytes());
        h.update(e.blob_id().as_bytes());
    }
    h.update(message.as_bytes());
    h.update(at.to_le_bytes());
    hex::encode(h.finalize())
}

/// The tree `ops` make of `base` (pure). Deleting a path that does not exist is an error, as
/// on the Hub.
pub(crate) fn apply(
    base: &BTreeMap<String, Entry>,
    ops: &[Op],
) -> Result<BTreeMap<String, Entry>, String> {
    let mut tree = base.clone();
    for op in ops {
        match op {
            Op::Put { path, entry } => {
                tree.insert(path.clone(), entry.clone());
            }
            Op::Delete { path } => {
                if tree.remove(path).is_none() {
                    return Err(format!("file {path} does not exist"));
                }
            }
            Op::DeleteFolder { path } => {
                let prefix = format!("{}/", path.trim_end_matches('/'));
                let before = tree.len();
                tree.retain(|p, _| !p.starts_with(&prefix));
                if tree.len() == before {
                    return Err(format!("folder {path} does not exist"));
                }
            }
        }
    }
    Ok(tree)
}

/// Whether the Hub would store a file as LFS: large files and binary ones (the Hub decides
/// from the repo's `.gitattributes`, whose defaults cover binary formats, and a 10 MB limit on
/// regular files; a NUL byte in the first 512 bytes is the binary sniff).
pub(crate) fn upload_mode_is_lfs(size: u64, sample: &[u8]) -> bool {
    size > 10 * 1024 * 1024 || sample.contains(&0)
}

/// A `sha256` hasher for streamed uploads.
pub(crate) fn hasher() -> Sha256 {
    Sha256::default()
}

/// `YYYY-MM-DDTHH:MM:SS.000Z` for seconds since the epoch (the Hub's `lastModified`).
pub(crate) fn iso8601(secs: u64) -> String {
    tt_model_manifest::timefmt::rfc3339(secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(sha: &str) -> Entry {
        Entry {
            size: 1,
            sha256: sha.into(),
            lfs: false,
            served: None,
            git_sha1: sha.into(),
        }
    }

    #[test]
    fn ops_apply_to_a_copy_and_missing_deletions_fail() {
        let base: BTreeMap<_, _> = [("a".to_string(), e("1")), ("d/x".to_string(), e("2"))].into();
        let ops = [
            Op::Put {
                path: "b".into(),
                entry: e("3"),
            },
            Op::DeleteFolder { path: "d".into() },
            Op::Delete { path: "a".into() },
        ];
        let tree = apply(&base, &ops).unwrap();
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(base.len(), 2, "the base tree is untouched");
        assert!(apply(&base, &[Op::Delete { path: "zz".into() }]).is_err());
    }

    #[test]
    fn dates_and_modes() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_764_547_200), "2025-12-01T00:00:00.000Z");
        assert!(upload_mode_is_lfs(5, b"ab\0c"));
        assert!(!upload_mode_is_lfs(5, b"{\"a\":1}"));
        assert!(upload_mode_is_lfs(11 << 20, b"text"));
    }
}
