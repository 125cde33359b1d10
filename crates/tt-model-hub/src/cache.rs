//! The Python-compatible HF hub cache layout.
//!
//! ```text
//! <hub cache>/models--<org>--<name>/
//!     blobs/<etag>                 file content; etag = sha256 for LFS files, git blob sha1 otherwise
//!     blobs/<etag>.incomplete      a partial download, resumed with an HTTP Range request
//!     snapshots/<commit>/<path>    relative symlink to ../../blobs/<etag>
//!     refs/<branch>                the commit a branch resolved to (`refs/main` also for a pinned sha)
//! ```

use std::path::{Component, Path, PathBuf};

use crate::error::HubError;

/// The root of a hub cache (`HF_HUB_CACHE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubCache {
    /// The cache directory itself (the one holding `models--*` folders), not `HF_HOME`.
    pub root: PathBuf,
}

impl HubCache {
    /// A cache rooted at `root`; nothing is created or checked on disk.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HubCache { root: root.into() }
    }

    /// The cache of one model repo. Refuses repo ids that could escape the cache.
    pub fn repo(&self, repo_id: &str) -> Result<RepoCache, HubError> {
        validate_repo_id(repo_id)?;
        Ok(RepoCache {
            dir: self.root.join(repo_folder_name(repo_id)),
            repo_id: repo_id.to_string(),
        })
    }
}

/// `org/name` → `models--org--name`, as Python's `repo_folder_name(repo_type="model")`.
pub fn repo_folder_name(repo_id: &str) -> String {
    format!("models--{}", repo_id.replace('/', "--"))
}

/// `org/name` with the Hub's character set; a single `name` is allowed as on the Hub.
pub fn validate_repo_id(repo_id: &str) -> Result<(), HubError> {
    let parts: Vec<&str> = repo_id.split('/').collect();
    let ok_part = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && !p.contains("--")
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if (1..=2).contains(&parts.len()) && parts.iter().all(|p| ok_part(p)) {
        Ok(())
    } else {
        Err(HubError::BadRepoId(repo_id.to_string()))
    }
}

/// A revision used as a path component (refs/<rev>): no absolute paths, no `..`, not empty.
pub fn validate_revision(rev: &str) -> Result<(), HubError> {
    let p = Path::new(rev);
    let bad = rev.is_empty()
        || rev.contains('\0')
        || p.is_absolute()
        || p.components().any(|c| !matches!(c, Component::Normal(_)));
    if bad {
        Err(HubError::BadRevision(rev.to_string()))
    } else {
        Ok(())
    }
}

/// A repo file path written under a snapshot: relative, no `..`.
pub fn validate_file_name(name: &str) -> Result<(), HubError> {
    let p = Path::new(name);
    let bad = name.is_empty()
        || p.is_absolute()
        || p.components().any(|c| !matches!(c, Component::Normal(_)));
    if bad {
        Err(HubError::BadFileName(name.to_string()))
    } else {
        Ok(())
    }
}

/// A 40-hex commit sha.
pub fn is_commit_sha(rev: &str) -> bool {
    rev.len() == 40
        && rev
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// One repo's directory in the hub cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoCache {
    /// `<hub cache>/models--<org>--<name>`.
    pub dir: PathBuf,
    /// The repo id (`org/name`) this directory holds, already validated.
    pub repo_id: String,
}

impl RepoCache {
    /// `<repo dir>/blobs`: content files named by etag.
    pub fn blobs_dir(&self) -> PathBuf {
        self.dir.join("blobs")
    }
    /// `blobs/<etag>`: a complete, verified file.
    pub fn blob_path(&self, etag: &str) -> PathBuf {
        self.blobs_dir().join(etag)
    }
    /// `blobs/<etag>.incomplete`: a partial download, resumed from its length.
    pub fn incomplete_path(&self, etag: &str) -> PathBuf {
        self.blobs_dir().join(format!("{etag}.incomplete"))
    }
    /// `snapshots/<commit>`: the repo's file tree at that commit, as symlinks into `blobs/`.
    pub fn snapshot_dir(&self, commit: &str) -> PathBuf {
        self.dir.join("snapshots").join(commit)
    }
    /// `refs/<name>`: a text file holding the commit a branch or tag resolved to.
    pub fn ref_path(&self, name: &str) -> PathBuf {
        self.dir.join("refs").join(name)
    }

    /// The commit a ref points to, if recorded.
    pub fn read_ref(&self, name: &str) -> Option<String> {
        let t = std::fs::read_to_string(self.ref_path(name)).ok()?;
        let t = t.trim();
        is_commit_sha(t).then(|| t.to_string())
    }

    /// Record `refs/<name>` = commit (written to a temp file and renamed).
    pub fn write_ref(&self, name: &str, commit: &str) -> Result<(), HubError> {
        validate_revision(name)?;
        let path = self.ref_path(name);
        let parent = path.parent().expect("ref path has a parent");
        std::fs::create_dir_all(parent).map_err(HubError::io("create", parent))?;
        let tmp = parent.join(format!(
            ".{}.tmp",
            path.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&tmp, commit).map_err(HubError::io("write", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(HubError::io("rename", &path))
    }

    /// Resolve a revision to a commit using only the cache: a sha is itself, a branch via refs/.
    pub fn resolve_local(&self, revision: &str) -> Option<String> {
        if is_commit_sha(revision) {
            Some(revision.to_string())
        } else {
            self.read_ref(revision)
        }
    }

    /// Make `snapshots/<commit>/<file>` a relative symlink to `blobs/<etag>`, replacing an old link.
    pub fn link_snapshot_file(
        &self,
        commit: &str,
        file: &str,
        etag: &str,
    ) -> Result<PathBuf, HubError> {
        validate_file_name(file)?;
        let link = self.snapshot_dir(commit).join(file);
        let parent = link.parent().expect("snapshot file has a parent");
        std::fs::create_dir_all(parent).map_err(HubError::io("create", parent))?;
        // snapshots/<commit>/<a/b/file> → ../../(../..)blobs/<etag>
        let depth = file.split('/').count() + 1;
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(etag);
        match std::fs::symlink_metadata(&link) {
            Ok(_) => std::fs::remove_file(&link).map_err(HubError::io("replace", &link))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(HubError::io("inspect", &link)(e)),
        }
        std::os::unix::fs::symlink(&target, &link).map_err(HubError::io("symlink", &link))?;
        Ok(link)
    }

    /// Whether `snapshots/<commit>/<file>` resolves to a complete blob.
    pub fn has_file(&self, commit: &str, file: &str) -> bool {
        std::fs::metadata(self.snapshot_dir(commit).join(file))
            .map(|m| m.is_file())
            .unwrap_or(false)
    }

    /// Total bytes of `blobs/*.incomplete` (a partial, resumable download).
    pub fn incomplete_bytes(&self) -> u64 {
        let Ok(rd) = std::fs::read_dir(self.blobs_dir()) else {
            return 0;
        };
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".incomplete"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// Total bytes of all complete blobs (what `rm --include-weights` frees).
    pub fn size_on_disk(&self) -> u64 {
        let Ok(rd) = std::fs::read_dir(self.blobs_dir()) else {
            return 0;
        };
        rd.flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    }
}

/// Free bytes on the filesystem holding `path` (walks up to the nearest existing ancestor).
pub fn free_space(path: &Path) -> Result<u64, HubError> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        if !p.pop() {
            break;
        }
    }
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| HubError::BadFileName(p.display().to_string()))?;
    // SAFETY: `statvfs` is a plain C struct of integers, for which all-zero bytes are valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(HubError::io("statvfs", &p)(std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_paths_match_python() {
        let c = HubCache::new("/c").repo("org/My.Model-1").unwrap();
        assert_eq!(c.dir, PathBuf::from("/c/models--org--My.Model-1"));
        assert_eq!(
            c.blob_path("abc"),
            PathBuf::from("/c/models--org--My.Model-1/blobs/abc")
        );
        assert_eq!(
            c.incomplete_path("abc"),
            PathBuf::from("/c/models--org--My.Model-1/blobs/abc.incomplete")
        );
        assert_eq!(
            c.ref_path("main"),
            PathBuf::from("/c/models--org--My.Model-1/refs/main")
        );
    }

    #[test]
    fn unsafe_ids_and_revisions_are_refused() {
        let h = HubCache::new("/c");
        for bad in ["../x", "a/b/c", "", "a/..", "a b/c", "a--b/c"] {
            assert!(h.repo(bad).is_err(), "{bad}");
        }
        for bad in ["", "/etc", "../main", "a/../../b"] {
            assert!(validate_revision(bad).is_err(), "{bad}");
        }
        assert!(validate_revision("refs/pr/1").is_ok());
        assert!(validate_file_name("a/../../x").is_err());
    }

    #[test]
    fn snapshot_links_are_relative_and_resolve() {
        let tmp = tempfile::tempdir().unwrap();
        let c = HubCache::new(tmp.path()).repo("o/n").unwrap();
        std::fs::create_dir_all(c.blobs_dir()).unwrap();
        std::fs::write(c.blob_path("e1"), b"hi").unwrap();
        let sha = "a".repeat(40);
        let link = c.link_snapshot_file(&sha, "sub/dir/f.txt", "e1").unwrap();
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from("../../../../blobs/e1")
        );
        assert_eq!(std::fs::read(&link).unwrap(), b"hi");
        assert!(c.has_file(&sha, "sub/dir/f.txt"));
        c.write_ref("main", &sha).unwrap();
        assert_eq!(c.resolve_local("main"), Some(sha.clone()));
        assert_eq!(c.resolve_local(&sha), Some(sha));
    }
}
