//! What a snapshot download will do, decided from one Hub listing and the cache, without
//! downloading anything: which files, under which blob names, how many bytes are missing.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::api::{RepoInfo, Sibling};
use crate::cache::{self, HubCache, RepoCache};
use crate::error::HubError;
use crate::patterns;
use crate::verify::HashKind;

/// One selected file of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Path in the repo (and under the snapshot directory).
    pub name: String,
    /// Content length in bytes (the LFS size for LFS files).
    pub size: u64,
    /// The blob name in the cache and the expected content hash, lowercase hex: the sha256 for
    /// LFS files, the git blob id for regular files (as Python `huggingface_hub` names blobs).
    pub etag: String,
    /// Which hash `etag` is; the download is verified against it.
    pub kind: HashKind,
    /// The blob is already complete in the cache.
    pub present: bool,
    /// Bytes of a `.incomplete` blob that a resume will keep.
    pub partial: u64,
}

/// What a snapshot download of `repo@revision` will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadPlan {
    /// The repo id (`org/name`).
    pub repo_id: String,
    /// The revision as requested (branch, tag or commit).
    pub revision: String,
    /// The full commit sha the Hub resolved the revision to; every file is fetched at this commit.
    pub commit: String,
    /// The files selected by the allow/ignore patterns, in the Hub's listing order.
    pub files: Vec<PlannedFile>,
}

impl DownloadPlan {
    /// Bytes of every selected file.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Bytes that still have to come over the network. Files with the same content share one
    /// blob (e.g. empty `__init__.py` files), so each blob counts once.
    pub fn bytes_to_fetch(&self) -> u64 {
        self.missing_blobs()
            .map(|f| f.size.saturating_sub(f.partial))
            .sum()
    }

    /// One file per distinct blob, in listing order.
    pub fn blobs(&self) -> impl Iterator<Item = &PlannedFile> {
        let mut seen = HashSet::new();
        self.files
            .iter()
            .filter(move |f| seen.insert(f.etag.as_str()))
    }

    /// One file per blob that was not complete in the cache when the plan was made.
    pub fn missing_blobs(&self) -> impl Iterator<Item = &PlannedFile> {
        self.blobs().filter(|f| !f.present)
    }
}

/// State of a repo revision in the local cache, without the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalStatus {
    /// A snapshot for the revision exists and no partial blobs remain.
    Complete {
        /// The commit the revision resolves to locally (from `refs/`, or the revision itself).
        commit: String,
        /// `snapshots/<commit>` in the repo's cache directory.
        snapshot: PathBuf,
    },
    /// Partial blobs are on disk (resumable).
    Partial {
        /// Total bytes of the `.incomplete` blobs.
        bytes: u64,
    },
    /// No snapshot for the revision and nothing partial: a download starts from scratch.
    Missing,
}

/// Offline probe, like `snapshot_download(local_files_only=True)` plus the `.incomplete` check.
pub fn local_status(
    cache: &HubCache,
    repo_id: &str,
    revision: &str,
) -> Result<LocalStatus, HubError> {
    cache::validate_revision(revision)?;
    let rc = cache.repo(repo_id)?;
    let partial = rc.incomplete_bytes();
    if partial > 0 {
        return Ok(LocalStatus::Partial { bytes: partial });
    }
    match rc.resolve_local(revision) {
        Some(commit) if rc.snapshot_dir(&commit).is_dir() => Ok(LocalStatus::Complete {
            snapshot: rc.snapshot_dir(&commit),
            commit,
        }),
        _ => Ok(LocalStatus::Missing),
    }
}

/// Pure: the plan from a listing and the cache state.
pub fn plan_from_info(
    rc: &RepoCache,
    revision: &str,
    info: &RepoInfo,
    allow: &[String],
    ignore: &[String],
) -> Result<DownloadPlan, HubError> {
    let bad = |detail: String| HubError::BadResponse {
        url: format!("/api/models/{}/revision/{revision}", rc.repo_id),
        detail,
    };
    if !cache::is_commit_sha(&info.sha) {
        return Err(bad(format!("'sha' is not a 40-hex commit: {:?}", info.sha)));
    }
    if cache::is_commit_sha(revision) && revision != info.sha {
        return Err(HubError::CommitMismatch {
            file: "(listing)".into(),
            expected: revision.into(),
            got: info.sha.clone(),
        });
    }
    let mut files = Vec::new();
    for s in &info.siblings {
        if !patterns::is_selected(&s.rfilename, allow, ignore) {
            continue;
        }
        cache::validate_file_name(&s.rfilename)?;
        let (kind, etag, size) = content_id(s).map_err(|e| bad(e.to_string()))?;
        let present = rc.blob_path(&etag).is_file();
        let partial = if present {
            0
        } else {
            std::fs::metadata(rc.incomplete_path(&etag))
                .map(|m| m.len())
                .unwrap_or(0)
        };
        files.push(PlannedFile {
            name: s.rfilename.clone(),
            size,
            etag,
            kind,
            present,
            partial,
        });
    }
    Ok(DownloadPlan {
        repo_id: rc.repo_id.clone(),
        revision: revision.to_string(),
        commit: info.sha.clone(),
        files,
    })
}

/// Kind, blob name and size of a listed file. The name doubles as a path component and as the
/// expected hash, so anything but a well-formed hex id of the right kind is refused.
fn content_id(s: &Sibling) -> Result<(HashKind, String, u64), ListingError> {
    let file = || s.rfilename.clone();
    let (kind, id, size) = match (&s.lfs, &s.blob_id) {
        (Some(lfs), _) => (HashKind::LfsSha256, &lfs.sha256, Some(lfs.size)),
        (None, Some(blob)) => (HashKind::GitBlobSha1, blob, s.size),
        (None, None) => return Err(ListingError::NoContentId { file: file() }),
    };
    let id = id.to_ascii_lowercase();
    if !kind.is_valid_id(&id) {
        return Err(ListingError::BadContentId {
            file: file(),
            id,
            hex: kind.hex_len(),
            kind,
        });
    }
    // The git blob header needs the length before the first byte arrives.
    let size = size.ok_or_else(|| ListingError::NoSize { file: file() })?;
    Ok((kind, id, size))
}

/// What is wrong with one file of a listing (it becomes the listing's `BadResponse`).
#[derive(Debug, thiserror::Error)]
enum ListingError {
    #[error("{file} has neither blobId nor lfs")]
    NoContentId { file: String },
    #[error("{file}: {id:?} is not a {hex}-hex {kind} id")]
    BadContentId {
        file: String,
        id: String,
        hex: usize,
        kind: HashKind,
    },
    #[error("{file} has no size")]
    NoSize { file: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LfsInfo;
    use crate::verify::{git_blob_id, sha256_hex};

    fn sib(name: &str, content: &[u8], lfs: bool) -> Sibling {
        Sibling {
            rfilename: name.into(),
            size: Some(content.len() as u64),
            blob_id: Some(git_blob_id(content)),
            lfs: lfs.then(|| LfsInfo {
                sha256: sha256_hex(content),
                size: content.len() as u64,
                pointer_size: None,
            }),
        }
    }

    fn info(siblings: Vec<Sibling>) -> RepoInfo {
        RepoInfo {
            id: "o/n".into(),
            sha: "c".repeat(40),
            siblings,
        }
    }

    #[test]
    fn blob_names_are_sha256_for_lfs_and_git_id_otherwise() {
        let tmp = tempfile::tempdir().unwrap();
        let rc = HubCache::new(tmp.path()).repo("o/n").unwrap();
        let i = info(vec![sib("a.json", b"{}", false), sib("w.bin", b"w", true)]);
        let plan = plan_from_info(&rc, "main", &i, &[], &[]).unwrap();
        assert_eq!(plan.files[0].etag, git_blob_id(b"{}"));
        assert_eq!(plan.files[0].kind, HashKind::GitBlobSha1);
        assert_eq!(plan.files[1].etag, sha256_hex(b"w"));
        assert_eq!(plan.files[1].kind, HashKind::LfsSha256);
    }

    #[test]
    fn identical_contents_are_fetched_and_counted_once() {
        let tmp = tempfile::tempdir().unwrap();
        let rc = HubCache::new(tmp.path()).repo("o/n").unwrap();
        let i = info(vec![
            sib("a/__init__.py", b"", false),
            sib("b/__init__.py", b"", false),
            sib("x.txt", b"hello", false),
            sib("y.txt", b"hello", false),
        ]);
        let plan = plan_from_info(&rc, "main", &i, &[], &[]).unwrap();
        assert_eq!(plan.total_bytes(), 10);
        assert_eq!(plan.bytes_to_fetch(), 5);
        let names: Vec<_> = plan.missing_blobs().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a/__init__.py", "x.txt"]);
    }

    #[test]
    fn malformed_ids_and_missing_sizes_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let rc = HubCache::new(tmp.path()).repo("o/n").unwrap();
        let mut s = sib("a", b"a", false);
        s.blob_id = Some("..".into());
        let err = plan_from_info(&rc, "main", &info(vec![s]), &[], &[]).unwrap_err();
        assert!(matches!(err, HubError::BadResponse { .. }), "{err:?}");
        let mut s = sib("a", b"a", false);
        s.size = None;
        let err = plan_from_info(&rc, "main", &info(vec![s]), &[], &[]).unwrap_err();
        assert!(err.to_string().contains("has no size"), "{err}");
        // Uppercase hex is the same id; the blob name is lowercase.
        let mut s = sib("a", b"a", false);
        s.blob_id = Some(git_blob_id(b"a").to_ascii_uppercase());
        let plan = plan_from_info(&rc, "main", &info(vec![s]), &[], &[]).unwrap();
        assert_eq!(plan.files[0].etag, git_blob_id(b"a"));
    }
}
