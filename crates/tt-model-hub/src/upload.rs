//! Uploading a folder's worth of files to a Hub repo as one commit, sending only what the Hub
//! lacks, as `huggingface_hub.create_commit` does:
//!
//! 1. read the repo's head commit and its tree;
//! 2. `preupload`: the Hub says, per file, whether it goes to LFS and what the remote file's
//!    oid is; a file whose oid equals the local one is unchanged and is not sent;
//! 3. LFS batch for the changed LFS files: objects the repo already holds (from an earlier push,
//!    or from one interrupted after its upload) come back without an upload action and are not
//!    sent; the others are `PUT` (streamed from disk) and verified;
//! 4. one commit, parented on the head read in 1: the changed regular files inline, the LFS
//!    pointers, and the deletions of stale files under the prune prefixes, so the repo goes
//!    from the old complete state to the new complete state in one step (never pruned first,
//!    never half-updated). No commit when nothing changed.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt as _;
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

use crate::error::HubError;
use crate::hub::{CommitOp, HubClient, PreuploadFile};
use crate::verify::hex;

/// Where a file's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    /// A file on disk, read again when it is sent.
    Disk(PathBuf),
    /// Content held in memory (e.g. a generated file).
    Bytes(Vec<u8>),
}

/// A file to upload, with the ids the Hub compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalFile {
    /// Its path in the repo (`/`-separated).
    pub path: String,
    /// Where the bytes are read from when the file is sent.
    pub source: FileSource,
    /// Content length in bytes.
    pub size: u64,
    /// sha256 of the content, lowercase hex: the LFS object id, and what the Hub compares for LFS
    /// files.
    pub sha256: String,
    /// The git blob sha1 (`blob <len>\0` + content).
    pub git_sha1: String,
    /// The first 512 bytes (the Hub sniffs binary files from them).
    pub sample: Vec<u8>,
}

const SAMPLE: usize = 512;

impl LocalFile {
    /// An in-memory file at repo path `path`, hashed now.
    pub fn bytes(path: &str, bytes: Vec<u8>) -> Self {
        let mut s1 = Sha1::new();
        s1.update(format!("blob {}\0", bytes.len()).as_bytes());
        s1.update(&bytes);
        LocalFile {
            path: path.into(),
            size: bytes.len() as u64,
            sha256: hex(&Sha256::digest(&bytes)),
            git_sha1: hex(&s1.finalize()),
            sample: bytes[..bytes.len().min(SAMPLE)].to_vec(),
            source: FileSource::Bytes(bytes),
        }
    }

    /// A file on disk, hashed once (sha256 and git sha1 in the same pass).
    pub fn disk(path: &str, file: &Path) -> Result<Self, HubError> {
        let size = std::fs::metadata(file)
            .map_err(HubError::io("inspect", file))?
            .len();
        let mut f = std::fs::File::open(file).map_err(HubError::io("open", file))?;
        let (mut s256, mut s1) = (Sha256::new(), Sha1::new());
        s1.update(format!("blob {size}\0").as_bytes());
        let mut sample = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut read = 0u64;
        loop {
            let n = f.read(&mut buf).map_err(HubError::io("read", file))?;
            if n == 0 {
                break;
            }
            if sample.len() < SAMPLE {
                let take = (SAMPLE - sample.len()).min(n);
                sample.extend_from_slice(&buf[..take]);
            }
            s256.update(&buf[..n]);
            s1.update(&buf[..n]);
            read += n as u64;
        }
        if read != size {
            return Err(HubError::SizeMismatch {
                file: file.display().to_string(),
                expected: size,
                actual: read,
            });
        }
        Ok(LocalFile {
            path: path.into(),
            source: FileSource::Disk(file.into()),
            size,
            sha256: hex(&s256.finalize()),
            git_sha1: hex(&s1.finalize()),
            sample,
        })
    }

    fn read_all(&self) -> Result<Vec<u8>, HubError> {
        match &self.source {
            FileSource::Bytes(b) => Ok(b.clone()),
            FileSource::Disk(p) => std::fs::read(p).map_err(HubError::io("read", p)),
        }
    }
}

/// Every regular file under `dir`, as repo paths under `prefix` (sorted). A symlink or other
/// special file is refused: a package ships what it names, not what a link points at.
pub fn collect_dir(dir: &Path, prefix: &str) -> Result<Vec<LocalFile>, HubError> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), prefix.trim_end_matches('/').to_string())];
    while let Some((d, rel)) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .map_err(HubError::io("list", &d))?
            .collect::<Result<_, _>>()
            .map_err(HubError::io("list", &d))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ft = e.file_type().map_err(HubError::io("inspect", e.path()))?;
            if ft.is_dir() {
                stack.push((e.path(), path));
            } else if ft.is_file() {
                out.push(LocalFile::disk(&path, &e.path())?);
            } else {
                return Err(HubError::BadFileName(format!(
                    "{path} (a symlink or special file; a package ships regular files only)"
                )));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// An upload reports its bytes through the workspace's one [`Transfer`]: the bytes to send
/// (after the Hub said what it has) as the total, each path (an LFS object, a blob to a
/// registry) as it starts, bytes as they go.
pub use tt_model_events::Transfer;

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushOutcome {
    /// The repo's head after the push (the new commit, or the unchanged head).
    pub commit: String,
    /// Whether a commit was made (nothing changed: none).
    pub committed: bool,
    /// File bytes sent: LFS objects uploaded plus regular files committed inline.
    pub bytes_sent: u64,
    /// Paths whose bytes were sent.
    pub sent: Vec<String>,
    /// Files identical to the remote ones (not sent, not committed).
    pub unchanged: usize,
    /// Changed LFS files whose object the Hub already held (committed, not sent).
    pub already_on_hub: usize,
    /// Stale remote files deleted in the commit.
    pub deleted: Vec<String>,
}

/// The remote files under `prefixes` that no local file replaces (pure).
pub fn stale<'a>(
    remote: impl IntoIterator<Item = &'a str>,
    local: &HashSet<&str>,
    prefixes: &[&str],
) -> Vec<String> {
    let set: BTreeSet<String> = remote
        .into_iter()
        .filter(|p| prefixes.iter().any(|pre| p.starts_with(pre)) && !local.contains(p))
        .map(str::to_string)
        .collect();
    set.into_iter().collect()
}

/// Uploads `files` to `repo` (branch `main`) as one commit; remote files under `prune` that
/// are not in `files` are deleted in the same commit.
pub async fn upload(
    client: &HubClient,
    repo: &str,
    files: &[LocalFile],
    prune: &[&str],
    summary: &str,
    transfer: Arc<dyn Transfer>,
) -> Result<PushOutcome, HubError> {
    // 1. The head and its tree (the tree read at the head's id: one consistent state).
    let meta = client
        .repo_meta(repo)
        .await?
        .ok_or_else(|| HubError::NotFound {
            repo: repo.to_string(),
            revision: "main".into(),
            endpoint: client.env.endpoint.clone(),
            status: 404,
        })?;
    let tree = client.tree(repo, &meta.sha).await?;

    // 2. Upload modes and remote oids.
    let pre: Vec<PreuploadFile<'_>> = files
        .iter()
        .map(|f| PreuploadFile {
            path: &f.path,
            size: f.size,
            sample: &f.sample,
        })
        .collect();
    let modes: HashMap<String, crate::hub::UploadMode> = client
        .preupload(repo, &meta.sha, &pre)
        .await?
        .into_iter()
        .map(|m| (m.path.clone(), m))
        .collect();
    let mut unchanged = 0;
    let mut regular = Vec::new();
    let mut lfs = Vec::new();
    for f in files {
        let Some(m) = modes.get(&f.path) else {
            return Err(HubError::BadResponse {
                url: format!("{}/api/models/{repo}/preupload", client.env.endpoint),
                detail: format!("no upload mode for {}", f.path),
            });
        };
        if m.should_ignore {
            continue;
        }
        let is_lfs = m.upload_mode == "lfs" && f.size > 0;
        let local_oid = if is_lfs { &f.sha256 } else { &f.git_sha1 };
        if m.oid.as_deref() == Some(local_oid.as_str()) {
            unchanged += 1;
        } else if is_lfs {
            lfs.push(f);
        } else {
            regular.push(f);
        }
    }

    // 3. LFS objects the repo lacks.
    let objects: Vec<(String, u64)> = lfs.iter().map(|f| (f.sha256.clone(), f.size)).collect();
    let answers = client.lfs_batch(repo, &meta.sha, &objects).await?;
    let by_oid: HashMap<&str, &LocalFile> = lfs.iter().map(|f| (f.sha256.as_str(), *f)).collect();
    let mut to_send = Vec::new();
    let mut already_on_hub = 0;
    for a in &answers {
        if let Some(err) = &a.error {
            return Err(HubError::Refused {
                url: format!("{}/{repo}.git/info/lfs/objects/batch", client.env.endpoint),
                status: err["code"].as_u64().unwrap_or(0) as u16,
                message: format!("{}: {}", a.oid, err["message"].as_str().unwrap_or("")),
            });
        }
        match a.actions.as_ref().and_then(|x| x.upload.clone()) {
            Some(up) => {
                let f =
                    by_oid
                        .get(a.oid.as_str())
                        .copied()
                        .ok_or_else(|| HubError::BadResponse {
                            url: format!(
                                "{}/{repo}.git/info/lfs/objects/batch",
                                client.env.endpoint
                            ),
                            detail: format!("an action for an object not asked about: {}", a.oid),
                        })?;
                to_send.push((f, up, a.actions.as_ref().and_then(|x| x.verify.clone())));
            }
            None => already_on_hub += 1,
        }
    }
    let planned: u64 = to_send.iter().map(|(f, _, _)| f.size).sum::<u64>()
        + regular.iter().map(|f| f.size).sum::<u64>();
    transfer.total(planned);
    let mut sent: Vec<String> = Vec::new();
    // Four objects at a time, as `upload_large_folder` does with its workers.
    let mut uploads = futures_util::stream::iter(to_send.into_iter().map(|(f, up, verify)| {
        let transfer = transfer.clone();
        async move {
            transfer.file(&f.path);
            client
                .lfs_put(repo, &up, f.size, body_of(f, transfer)?)
                .await?;
            if let Some(v) = verify {
                client.lfs_verify(repo, &v, &f.sha256, f.size).await?;
            }
            Ok::<_, HubError>(f.path.clone())
        }
    }))
    .buffer_unordered(4);
    while let Some(done) = uploads.next().await {
        sent.push(done?);
    }
    drop(uploads);

    // 4. One commit: changed files, LFS pointers, stale deletions.
    let local: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let deleted = stale(tree.iter().map(|e| e.path.as_str()), &local, prune);
    let mut ops = Vec::new();
    let mut bytes_sent: u64 = lfs
        .iter()
        .filter(|f| sent.contains(&f.path))
        .map(|f| f.size)
        .sum();
    for f in &regular {
        transfer.file(&f.path);
        let content = f.read_all()?;
        transfer.bytes(f.size);
        bytes_sent += f.size;
        sent.push(f.path.clone());
        ops.push(CommitOp::File {
            path: f.path.clone(),
            content,
        });
    }
    for f in &lfs {
        ops.push(CommitOp::LfsFile {
            path: f.path.clone(),
            oid: f.sha256.clone(),
            size: f.size,
        });
    }
    for p in &deleted {
        ops.push(CommitOp::Delete { path: p.clone() });
    }
    sent.sort();
    if ops.is_empty() {
        return Ok(PushOutcome {
            commit: meta.sha,
            committed: false,
            bytes_sent,
            sent,
            unchanged,
            already_on_hub,
            deleted,
        });
    }
    let commit = client
        .commit(repo, "main", summary, Some(&meta.sha), &ops)
        .await?;
    Ok(PushOutcome {
        commit,
        committed: true,
        bytes_sent,
        sent,
        unchanged,
        already_on_hub,
        deleted,
    })
}

/// The request body for an LFS object: streamed from disk in 1 MiB chunks, each reported.
fn body_of(f: &LocalFile, transfer: Arc<dyn Transfer>) -> Result<reqwest::Body, HubError> {
    match &f.source {
        FileSource::Bytes(b) => {
            transfer.bytes(b.len() as u64);
            Ok(reqwest::Body::from(b.clone()))
        }
        FileSource::Disk(p) => {
            let file = std::fs::File::open(p).map_err(HubError::io("open", p))?;
            Ok(file_body(file, transfer))
        }
    }
}

/// A request body streamed from `file` in 1 MiB chunks, each reported.
pub(crate) fn file_body(file: std::fs::File, transfer: Arc<dyn Transfer>) -> reqwest::Body {
    let file = tokio::fs::File::from_std(file);
    let stream =
        futures_util::stream::unfold((file, transfer), |(mut file, transfer)| async move {
            use tokio::io::AsyncReadExt as _;
            let mut buf = vec![0u8; 1 << 20];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    transfer.bytes(n as u64);
                    Some((Ok::<_, std::io::Error>(buf), (file, transfer)))
                }
                Err(e) => Some((Err(e), (file, transfer))),
            }
        });
    reqwest::Body::wrap_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_files_are_those_under_the_prefixes_no_local_file_replaces() {
        let remote = [
            "README.md",
            "code/a.py",
            "code/old.py",
            "image/blobs/sha256/x",
            "notes.txt",
        ];
        let local: HashSet<&str> = ["README.md", "code/a.py"].into();
        assert_eq!(
            stale(remote, &local, &["code/", "image/"]),
            ["code/old.py", "image/blobs/sha256/x"]
        );
    }

    #[test]
    fn local_ids_match_git_and_sha256() {
        let f = LocalFile::bytes("a", b"hello\n".to_vec());
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(f.git_sha1, "ce013625030ba8dba906f756967f9e9ca394464a");
        assert_eq!(
            f.sha256,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/a"), b"hello\n").unwrap();
        let files = collect_dir(dir.path(), "code").unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, "code/d/a");
        assert_eq!(
            (files[0].sha256.as_str(), files[0].git_sha1.as_str()),
            (f.sha256.as_str(), f.git_sha1.as_str())
        );
    }
}
