//! Snapshot download into the hub cache: plan (one API call), space preflight, resumable
//! per-file download with sha256 verification of LFS files, snapshot links and refs.

use std::io::{Read, Write};
use std::path::PathBuf;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::api::{self, RepoInfo};
use crate::cache::{self, HubCache, RepoCache};
use crate::env::HubEnv;
use crate::error::HubError;
use crate::patterns;

/// Progress events of a download. All methods default to no-ops.
pub trait DownloadReporter: Send + Sync {
    /// The plan is known: `total` bytes selected, `to_fetch` still missing.
    fn planned(&self, _plan: &DownloadPlan) {}
    /// A file starts; `resumed_from` bytes were already on disk.
    fn file_started(&self, _file: &str, _size: Option<u64>, _resumed_from: u64) {}
    /// `n` more bytes arrived.
    fn bytes(&self, _n: u64) {}
    fn file_done(&self, _file: &str) {}
}

/// A reporter that reports nothing.
pub struct NoProgress;
impl DownloadReporter for NoProgress {}

/// One selected file of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub name: String,
    pub size: Option<u64>,
    pub etag: String,
    /// The sha256 the Hub publishes for LFS files; verified after download.
    pub lfs_sha256: Option<String>,
    /// The blob is already complete in the cache.
    pub present: bool,
    /// Bytes of a `.incomplete` blob that a resume will keep.
    pub partial: u64,
}

/// What a snapshot download of `repo@revision` will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadPlan {
    pub repo_id: String,
    pub revision: String,
    pub commit: String,
    pub files: Vec<PlannedFile>,
}

impl DownloadPlan {
    /// Bytes of every selected file.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().filter_map(|f| f.size).sum()
    }
    /// Bytes that still have to come over the network.
    pub fn bytes_to_fetch(&self) -> u64 {
        self.files
            .iter()
            .filter(|f| !f.present)
            .map(|f| f.size.unwrap_or(0).saturating_sub(f.partial))
            .sum()
    }
}

/// State of a repo revision in the local cache, without the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalStatus {
    /// A snapshot for the revision exists and no partial blobs remain.
    Complete {
        commit: String,
        snapshot: PathBuf,
    },
    /// Partial blobs are on disk (resumable).
    Partial {
        bytes: u64,
    },
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

/// Downloads snapshots from one Hub endpoint into one hub cache.
pub struct Downloader {
    http: reqwest::Client,
    env: HubEnv,
    cache: HubCache,
}

impl Downloader {
    pub fn new(env: HubEnv) -> Self {
        let cache = HubCache::new(env.hub_cache.clone());
        let http = reqwest::Client::builder()
            .user_agent(concat!("tt-model/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .expect("reqwest client with static settings");
        Downloader { http, env, cache }
    }

    pub fn cache(&self) -> &HubCache {
        &self.cache
    }

    /// Ask the Hub which files the revision has and compare with the cache.
    pub async fn plan(
        &self,
        repo_id: &str,
        revision: &str,
        allow: &[String],
        ignore: &[String],
    ) -> Result<DownloadPlan, HubError> {
        cache::validate_revision(revision)?;
        let rc = self.cache.repo(repo_id)?;
        let info = api::repo_info(&self.http, &self.env, repo_id, revision).await?;
        plan_from_info(&rc, revision, &info, allow, ignore)
    }

    /// Refuse before downloading when the cache filesystem cannot hold the missing bytes.
    pub fn check_space(&self, plan: &DownloadPlan) -> Result<(), HubError> {
        let needed = plan.bytes_to_fetch();
        let free = cache::free_space(&self.cache.root)?;
        if needed > free {
            return Err(HubError::NoSpace {
                repo: plan.repo_id.clone(),
                needed: needed - free,
                free,
                cache: self.cache.root.clone(),
            });
        }
        Ok(())
    }

    /// Plan, preflight, download, link and record refs. Returns the snapshot directory.
    pub async fn snapshot(
        &self,
        repo_id: &str,
        revision: &str,
        allow: &[String],
        ignore: &[String],
        reporter: &dyn DownloadReporter,
    ) -> Result<PathBuf, HubError> {
        let plan = self.plan(repo_id, revision, allow, ignore).await?;
        self.check_space(&plan)?;
        self.download(&plan, reporter).await
    }

    /// Fetch every missing file of the plan (resuming partial blobs), then write refs.
    pub async fn download(
        &self,
        plan: &DownloadPlan,
        reporter: &dyn DownloadReporter,
    ) -> Result<PathBuf, HubError> {
        let rc = self.cache.repo(&plan.repo_id)?;
        reporter.planned(plan);
        std::fs::create_dir_all(rc.blobs_dir()).map_err(HubError::io("create", rc.blobs_dir()))?;
        for f in &plan.files {
            if !rc.blob_path(&f.etag).is_file() {
                self.fetch_blob(&rc, plan, f, reporter).await?;
            }
            rc.link_snapshot_file(&plan.commit, &f.name, &f.etag)?;
        }
        std::fs::create_dir_all(rc.snapshot_dir(&plan.commit))
            .map_err(HubError::io("create", rc.snapshot_dir(&plan.commit)))?;
        if cache::is_commit_sha(&plan.revision) {
            // A sha-pinned snapshot gets refs/main so an offline `snapshot_download(id)` in the
            // container resolves; an existing refs/main (a real branch) is left alone.
            if rc.read_ref("main").is_none() {
                rc.write_ref("main", &plan.commit)?;
            }
        } else {
            rc.write_ref(&plan.revision, &plan.commit)?;
        }
        Ok(rc.snapshot_dir(&plan.commit))
    }

    async fn fetch_blob(
        &self,
        rc: &RepoCache,
        plan: &DownloadPlan,
        f: &PlannedFile,
        reporter: &dyn DownloadReporter,
    ) -> Result<(), HubError> {
        let part = rc.incomplete_path(&f.etag);
        let mut have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        if f.size.is_some_and(|s| have > s) {
            have = 0;
        }
        if have > 0 && f.size == Some(have) {
            // Fully downloaded before an interruption between the last byte and the rename.
            return self.finish_blob(rc, f, &part, None, have, reporter);
        }
        let url = api::resolve_url(&self.env, &plan.repo_id, &plan.commit, &f.name);
        let mut req = self.http.get(&url);
        if let Some(t) = &self.env.token {
            req = req.bearer_auth(t);
        }
        if have > 0 {
            req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
        }
        let resp = req.send().await.map_err(|source| HubError::Network {
            url: url.clone(),
            source,
        })?;
        if let Some(c) = resp
            .headers()
            .get("x-repo-commit")
            .and_then(|v| v.to_str().ok())
            && c != plan.commit
        {
            return Err(HubError::CommitMismatch {
                file: f.name.clone(),
                expected: plan.commit.clone(),
                got: c.to_string(),
            });
        }
        let status = resp.status().as_u16();
        let mut hasher = Sha256::new();
        let mut out = if status == 206 && have > 0 {
            // Resume: the hash must cover the bytes already on disk.
            let mut old = std::fs::File::open(&part).map_err(HubError::io("open", &part))?;
            let mut buf = vec![0u8; 1 << 20];
            let mut left = have;
            while left > 0 {
                let want = left.min(buf.len() as u64) as usize;
                let n = old
                    .read(&mut buf[..want])
                    .map_err(HubError::io("read", &part))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                left -= n as u64;
            }
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&part)
                .map_err(HubError::io("open", &part))?;
            file.set_len(have)
                .map_err(HubError::io("truncate", &part))?;
            let mut file = file;
            std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))
                .map_err(HubError::io("seek", &part))?;
            file
        } else {
            api::check_status(&resp, &url, &self.env, &plan.repo_id, &plan.revision)?;
            have = 0;
            std::fs::File::create(&part).map_err(HubError::io("create", &part))?
        };
        reporter.file_started(&f.name, f.size, have);
        let mut got = have;
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|source| HubError::Network {
                url: url.clone(),
                source,
            })?;
            out.write_all(&chunk)
                .map_err(HubError::io("write", &part))?;
            hasher.update(&chunk);
            got += chunk.len() as u64;
            reporter.bytes(chunk.len() as u64);
        }
        out.sync_all().map_err(HubError::io("sync", &part))?;
        drop(out);
        self.finish_blob(rc, f, &part, Some(hasher), got, reporter)
    }

    /// Check size and sha256 of a finished `.incomplete` and move it to its blob name.
    fn finish_blob(
        &self,
        rc: &RepoCache,
        f: &PlannedFile,
        part: &std::path::Path,
        hasher: Option<Sha256>,
        got: u64,
        reporter: &dyn DownloadReporter,
    ) -> Result<(), HubError> {
        if let Some(size) = f.size
            && got != size
        {
            // A short body is kept as .incomplete for the next resume; a long one is garbage.
            if got > size {
                let _ = std::fs::remove_file(part);
            }
            return Err(HubError::SizeMismatch {
                file: f.name.clone(),
                expected: size,
                actual: got,
            });
        }
        if let Some(expected) = &f.lfs_sha256 {
            let digest = match hasher {
                Some(h) => h.finalize(),
                None => hash_file(part)?,
            };
            let actual = hex(&digest);
            if &actual != expected {
                let _ = std::fs::remove_file(part);
                return Err(HubError::ShaMismatch {
                    file: f.name.clone(),
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        let blob = rc.blob_path(&f.etag);
        std::fs::rename(part, &blob).map_err(HubError::io("rename", &blob))?;
        reporter.file_done(&f.name);
        Ok(())
    }
}

fn hash_file(path: &std::path::Path) -> Result<sha2::digest::Output<Sha256>, HubError> {
    let mut h = Sha256::new();
    let mut file = std::fs::File::open(path).map_err(HubError::io("open", path))?;
    std::io::copy(&mut file, &mut h).map_err(HubError::io("read", path))?;
    Ok(h.finalize())
}

/// Pure: the plan from a listing and the cache state.
pub fn plan_from_info(
    rc: &RepoCache,
    revision: &str,
    info: &RepoInfo,
    allow: &[String],
    ignore: &[String],
) -> Result<DownloadPlan, HubError> {
    if !cache::is_commit_sha(&info.sha) {
        return Err(HubError::BadResponse {
            url: format!("/api/models/{}/revision/{revision}", rc.repo_id),
            detail: format!("'sha' is not a 40-hex commit: {:?}", info.sha),
        });
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
        let etag = s.etag().ok_or_else(|| HubError::BadResponse {
            url: format!("/api/models/{}/revision/{revision}", rc.repo_id),
            detail: format!("{} has neither blobId nor lfs", s.rfilename),
        })?;
        if etag.is_empty() || etag.contains('/') || etag.contains("..") {
            return Err(HubError::BadFileName(etag.to_string()));
        }
        let present = rc.blob_path(etag).is_file();
        let partial = if present {
            0
        } else {
            std::fs::metadata(rc.incomplete_path(etag))
                .map(|m| m.len())
                .unwrap_or(0)
        };
        files.push(PlannedFile {
            name: s.rfilename.clone(),
            size: s.byte_size(),
            etag: etag.to_string(),
            lfs_sha256: s.lfs.as_ref().map(|l| l.sha256.to_ascii_lowercase()),
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

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
