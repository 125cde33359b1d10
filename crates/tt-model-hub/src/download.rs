//! Snapshot download into the hub cache: plan (one API call), space preflight, resumable
//! per-blob download verified against the Hub's content id (LFS sha256 or git blob sha1),
//! snapshot links and refs. With no patterns it is Python's whole-repo `snapshot_download`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;

use crate::api;
use crate::cache::{self, HubCache, RepoCache};
use crate::env::HubEnv;
use crate::error::HubError;
pub use crate::plan::{DownloadPlan, LocalStatus, PlannedFile, local_status, plan_from_info};
use crate::verify::{self, ContentHasher};

/// Blobs fetched at once, as Python `snapshot_download`'s default `max_workers=8`: a package
/// repo has many small files, where one request at a time would be latency-bound.
pub const PARALLEL_DOWNLOADS: usize = 8;

/// A download reports its bytes as every transfer does, through the workspace's one
/// [`Transfer`]: the plan's missing bytes as the total, each file as it starts, bytes as they
/// arrive.
pub use tt_model_events::Transfer;

/// A snapshot in the cache after a download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `snapshots/<commit>`: every selected file under its repo path (symlinks into `blobs/`).
    pub dir: PathBuf,
    /// The commit the revision resolved to.
    pub commit: String,
    /// What was planned (files, bytes that had to be fetched).
    pub plan: DownloadPlan,
}

/// Downloads snapshots from one Hub endpoint into one hub cache.
pub struct Downloader {
    http: reqwest::Client,
    env: HubEnv,
    cache: HubCache,
}

impl Downloader {
    /// A downloader for `env`'s endpoint and hub cache, with a 10 s connect timeout; no request is
    /// made yet.
    pub fn new(env: HubEnv) -> Self {
        let cache = HubCache::new(env.hub_cache.clone());
        let http = reqwest::Client::builder()
            .user_agent(concat!("tt-model/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .expect("reqwest client with static settings");
        Downloader { http, env, cache }
    }

    /// The hub cache files are written to (`env.hub_cache`).
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

    /// The commit `revision` of `repo_id` resolves to on the Hub now (`serve --refresh` asks
    /// this before deciding whether to re-pull).
    pub async fn resolve_revision(
        &self,
        repo_id: &str,
        revision: &str,
    ) -> Result<String, HubError> {
        cache::validate_revision(revision)?;
        Ok(api::repo_info(&self.http, &self.env, repo_id, revision)
            .await?
            .sha)
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

    /// `snapshot_download`: plan, preflight, download, link and record refs. Empty `allow` and
    /// `ignore` select every file of the repo (what `pull` needs for a package repo); patterns
    /// follow [`crate::patterns`].
    pub async fn snapshot(
        &self,
        repo_id: &str,
        revision: &str,
        allow: &[String],
        ignore: &[String],
        transfer: &dyn Transfer,
    ) -> Result<Snapshot, HubError> {
        let plan = self.plan(repo_id, revision, allow, ignore).await?;
        self.check_space(&plan)?;
        let dir = self.download(&plan, transfer).await?;
        Ok(Snapshot {
            dir,
            commit: plan.commit.clone(),
            plan,
        })
    }

    /// Fetch every missing blob of the plan (resuming partial ones), link the snapshot, write
    /// refs. Returns the snapshot directory.
    ///
    /// After a failure no new blob is started, but the ones in flight run to the end, so every
    /// blob is either complete, verified-and-deleted, or a resumable `.incomplete`. The first
    /// error in listing order is returned.
    pub async fn download(
        &self,
        plan: &DownloadPlan,
        transfer: &dyn Transfer,
    ) -> Result<PathBuf, HubError> {
        let rc = self.cache.repo(&plan.repo_id)?;
        transfer.total(plan.bytes_to_fetch());
        std::fs::create_dir_all(rc.blobs_dir()).map_err(HubError::io("create", rc.blobs_dir()))?;
        let failed = AtomicBool::new(false);
        let (rc, failed) = (&rc, &failed);
        let mut results: Vec<(usize, Result<(), HubError>)> =
            // Every distinct blob, not only the planned-missing ones: the cache may have
            // changed since the plan was made, and a present blob costs one stat.
            futures_util::stream::iter(plan.blobs().enumerate())
                .map(|(i, f)| async move {
                    if failed.load(Ordering::Relaxed) || rc.blob_path(&f.etag).is_file() {
                        return (i, Ok(()));
                    }
                    let r = self.fetch_blob(rc, plan, f, transfer).await;
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    (i, r)
                })
                .buffer_unordered(PARALLEL_DOWNLOADS)
                .collect()
                .await;
        results.sort_by_key(|(i, _)| *i);
        if let Some(e) = results.into_iter().find_map(|(_, r)| r.err()) {
            return Err(e);
        }
        for f in &plan.files {
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
        transfer: &dyn Transfer,
    ) -> Result<(), HubError> {
        let part = rc.incomplete_path(&f.etag);
        let mut have = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
        if have > f.size {
            have = 0;
        }
        if have > 0 && have == f.size {
            // Fully downloaded before an interruption between the last byte and the rename.
            return self.finish_blob(rc, f, &part, None, have);
        }
        let url = api::resolve_url(&self.env, &plan.repo_id, &plan.commit, &f.name);
        // `identity`: the bytes on disk must be the bytes the Hub hashed (Python does the same).
        let mut req = self
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT_ENCODING, "identity");
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
        let mut hasher = ContentHasher::new(f.kind, f.size);
        let mut out = if status == 206 && have > 0 {
            reopen_for_resume(&part, have, &mut hasher)?
        } else {
            api::check_status(&resp, &url, &self.env, &plan.repo_id, &plan.revision)?;
            have = 0;
            std::fs::File::create(&part).map_err(HubError::io("create", &part))?
        };
        transfer.file(&f.name);
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
            transfer.bytes(chunk.len() as u64);
        }
        out.sync_all().map_err(HubError::io("sync", &part))?;
        drop(out);
        self.finish_blob(rc, f, &part, Some(hasher), got)
    }

    /// Check size and content id of a finished `.incomplete` and move it to its blob name.
    fn finish_blob(
        &self,
        rc: &RepoCache,
        f: &PlannedFile,
        part: &Path,
        hasher: Option<ContentHasher>,
        got: u64,
    ) -> Result<(), HubError> {
        if got != f.size {
            // A short body is kept as .incomplete for the next resume; a long one is garbage.
            if got > f.size {
                let _ = std::fs::remove_file(part);
            }
            return Err(HubError::SizeMismatch {
                file: f.name.clone(),
                expected: f.size,
                actual: got,
            });
        }
        let actual = match hasher {
            Some(h) => h.finish(),
            None => verify::hash_file(f.kind, part)?,
        };
        if actual != f.etag {
            let _ = std::fs::remove_file(part);
            return Err(HubError::ShaMismatch {
                file: f.name.clone(),
                kind: f.kind,
                expected: f.etag.clone(),
                actual,
            });
        }
        let blob = rc.blob_path(&f.etag);
        std::fs::rename(part, &blob).map_err(HubError::io("rename", &blob))?;
        Ok(())
    }
}

/// Open a partial blob for appending after a 206, feeding its bytes to `hasher` first so the
/// digest covers the whole file (the only re-read: the part that is already on disk).
fn reopen_for_resume(
    part: &Path,
    have: u64,
    hasher: &mut ContentHasher,
) -> Result<std::fs::File, HubError> {
    let mut old = std::fs::File::open(part).map_err(HubError::io("open", part))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = have;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = old
            .read(&mut buf[..want])
            .map_err(HubError::io("read", part))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(part)
        .map_err(HubError::io("open", part))?;
    file.set_len(have).map_err(HubError::io("truncate", part))?;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))
        .map_err(HubError::io("seek", part))?;
    Ok(file)
}
