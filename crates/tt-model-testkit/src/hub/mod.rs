//! A Hub-protocol server on 127.0.0.1 for tests (the real Hub cannot be reached here).
//!
//! It speaks the part of the real protocol that `tt-model` uses, in the URL shapes, headers and
//! JSON `huggingface_hub` sends and reads (`hf_api.py`, `_commit_api.py`, `lfs.py`):
//!
//! Download side (`read`):
//! * `GET /api/models/{org}/{name}[/revision/{rev}][?blobs=true]` → `{id, sha, private, tags,
//!   lastModified, siblings[]}`, siblings with `blobId`, `size` and, for LFS files, `lfs
//!   {sha256, size, pointerSize}` when `blobs=true` (only `rfilename` otherwise, as on the Hub);
//!   tags come from the README's frontmatter, as on the Hub;
//! * `GET|HEAD /{org}/{name}/resolve/{rev}/{path}`: regular files answer 200 with `ETag` and
//!   `X-Repo-Commit`; LFS files answer `302` to `/cdn-lfs/...` with `X-Linked-Etag`,
//!   `X-Linked-Size` and `X-Repo-Commit`; both honour `Range: bytes=N-`
//!   ([`HubServer::claim_repo_commit`] makes them name another commit);
//! * `GET /api/models/{org}/{name}/tree/{rev}[/{path}][?recursive=true]`: the tree API
//!   (`[{type, oid, size, path, lfs?}]`);
//! * `GET /api/models?search=&filter=&author=&limit=&sort=&direction=` (`list_models`, in the
//!   Hub's orders), `GET /api/whoami-v2`.
//!
//! Upload side (`write`, `lfs`):
//! * `POST /api/validate-yaml` (`{content, repoType}` → `{errors, warnings}`, 400 on errors:
//!   the README check `upload_folder` makes first);
//! * `POST /api/repos/create` (`{name, organization, private, type}`; 409 when it exists), which
//!   makes the initial commit (`.gitattributes`) as the Hub does;
//! * `PUT /api/models/{org}/{name}/settings` (`{private}`);
//! * `POST /api/models/{org}/{name}/preupload/{rev}` (`{files: [{path, sample, size}]}` →
//!   `{files: [{path, uploadMode, shouldIgnore, oid?}]}`, `oid` being the remote file's
//!   sha256 for LFS and git blob sha1 for regular files, which lets the client skip unchanged
//!   files);
//! * `POST /{org}/{name}.git/info/lfs/objects/batch` (git-lfs batch API, `basic` transfer):
//!   objects the repo already has come back without `actions`; the others get an `upload`
//!   href (a `PUT` of the bytes, hashed while streamed to disk and refused on a mismatch) and a
//!   `verify` href;
//! * `POST /api/models/{org}/{name}/commit/{rev}` (NDJSON: `header` with an optional
//!   `parentCommit`, `file` (base64), `lfsFile`, `deletedFile`, `deletedFolder`), atomic.
//!
//! Writes need a token of a user the server knows ([`HubUser`]) whose name or org is the
//! repo's namespace; a private repo is visible only to such a token (an anonymous request gets
//! 401 `RepoNotFound`, another user's 404, as on the Hub).
//!
//!
//! [`registry`](crate::registry) is its OCI counterpart: the pull side of the distribution API.

// The handlers' helpers fail with the HTTP answer itself (a `Response`): test support where
// the size of an error path does not matter.
#![allow(clippy::result_large_err)]

mod access;
mod duplicate;
mod lfs;
mod read;
mod seed;
mod state;
mod write;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};

use access::{Caller, Shared};
pub use seed::{FakeFile, FakeRepo, HubUser, SeenRequest, StoredFile, TEST_TOKEN};
use state::{Commit, Entry, Repo, Store, entry_for};

/// `{"error": msg}` with the Hub's `X-Error-Code` / `X-Error-Message` headers.
pub(crate) fn error(status: StatusCode, code: Option<&'static str>, msg: &str) -> Response {
    let mut r = (status, axum::Json(serde_json::json!({ "error": msg }))).into_response();
    if let Some(code) = code {
        r.headers_mut()
            .insert("x-error-code", HeaderValue::from_static(code));
    }
    if let Ok(v) = HeaderValue::from_str(msg) {
        r.headers_mut().insert("x-error-message", v);
    }
    r
}

fn bad_request(msg: &str) -> Response {
    error(StatusCode::BAD_REQUEST, Some("BadRequest"), msg)
}

/// The base URL the client reached us at (for the hrefs and urls we hand back).
fn base_url(h: &HeaderMap) -> String {
    let host = h
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// A running server; it stops, and its store is deleted, when dropped.
pub struct HubServer {
    /// The address the server listens on (127.0.0.1, a free port).
    pub addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn record(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let h = req.headers();
    let get = |k: header::HeaderName| h.get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
    let seen = SeenRequest {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        range: get(header::RANGE),
        authorization: get(header::AUTHORIZATION),
    };
    s.seen.lock().unwrap().push(seen);
    next.run(req).await
}

impl HubServer {
    /// Bind 127.0.0.1 on a free port and serve `repos` (public), with one user: token
    /// [`TEST_TOKEN`], name `tester`, member of `acme`.
    pub async fn start(repos: Vec<FakeRepo>) -> std::io::Result<HubServer> {
        Self::start_with(repos, vec![HubUser::new(TEST_TOKEN, "tester", &["acme"])]).await
    }

    /// Bind 127.0.0.1 on a free port and serve `repos` (public) to `users`.
    pub async fn start_with(
        repos: Vec<FakeRepo>,
        users: Vec<HubUser>,
    ) -> std::io::Result<HubServer> {
        let dir = tempfile::Builder::new().prefix("tt-model-hub-").tempdir()?;
        let store = Store::create(dir.path())?;
        let mut map = HashMap::new();
        for r in repos {
            let mut tree = BTreeMap::new();
            for f in &r.files {
                let mut e = entry_for(&store, &f.content, f.lfs)?;
                if let Some(bad) = &f.corrupt_with {
                    e.served = Some(store.put(bad)?);
                }
                tree.insert(f.path.clone(), e);
            }
            let lfs = tree
                .values()
                .filter(|e| e.lfs)
                .map(|e| e.sha256.clone())
                .collect();
            let commit = Commit::new(r.commit.clone(), tree, now());
            map.insert(
                r.id.clone(),
                Repo {
                    id: r.id.clone(),
                    private: false,
                    commits: HashMap::from([(r.commit.clone(), commit)]),
                    branches: r
                        .branches
                        .iter()
                        .map(|b| (b.clone(), r.commit.clone()))
                        .collect(),
                    lfs,
                },
            );
        }
        let shared = Shared {
            repos: Arc::new(Mutex::new(map)),
            store: Arc::new(store),
            users: Arc::new(users),
            seen: Arc::new(Mutex::new(Vec::new())),
            received: Arc::new(AtomicU64::new(0)),
            cut_after: Arc::new(AtomicU64::new(u64::MAX)),
            claimed_commit: Arc::new(Mutex::new(None)),
        };
        let app = Router::new()
            .route("/api/whoami-v2", get(read::whoami))
            .route("/api/models", get(read::list_models))
            .route("/api/models/{org}/{name}", get(read::info))
            .route(
                "/api/models/{org}/{name}/revision/{rev}",
                get(read::revision),
            )
            .route("/api/models/{org}/{name}/tree/{rev}", get(read::tree_root))
            .route(
                "/api/models/{org}/{name}/tree/{rev}/{*path}",
                get(read::tree),
            )
            .route("/{org}/{name}/resolve/{rev}/{*file}", get(read::resolve))
            .route("/cdn-lfs/{org}/{name}/{oid}", get(read::cdn))
            .route("/api/repos/create", post(write::create))
            .route(
                "/api/models/{org}/{name}/duplicate",
                post(duplicate::duplicate),
            )
            .route("/api/validate-yaml", post(write::validate_yaml))
            .route("/api/models/{org}/{name}/settings", put(write::settings))
            .route(
                "/api/models/{org}/{name}/preupload/{rev}",
                post(write::preupload),
            )
            .route("/api/models/{org}/{name}/commit/{rev}", post(write::commit))
            .route("/{org}/{name}/info/lfs/objects/batch", post(lfs::lfs_batch))
            .route("/lfs-upload/{org}/{name}/{oid}", put(lfs::lfs_upload))
            .route("/lfs-verify/{org}/{name}/{oid}", post(lfs::lfs_verify))
            .layer(DefaultBodyLimit::disable())
            .layer(middleware::from_fn_with_state(shared.clone(), record))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(HubServer {
            addr,
            shared,
            task,
            _dir: dir,
        })
    }

    /// The value for `HF_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Request body bytes received by the upload routes so far (LFS objects and commit
    /// payloads, which carry regular files base64-encoded).
    pub fn bytes_received(&self) -> u64 {
        self.shared.received.load(Ordering::SeqCst)
    }

    /// From now on, an LFS upload whose own body reaches `limit` bytes stalls there mid-body,
    /// until the cut is lifted (`u64::MAX`) or the client goes away: a push interrupted
    /// mid-upload. Smaller objects, uploaded beside it, complete.
    pub fn cut_uploads_after(&self, limit: u64) {
        self.shared.cut_after.store(limit, Ordering::SeqCst);
    }

    /// From now on, resolves answer with `X-Repo-Commit: commit` while serving the bytes of the
    /// commit asked for (a Hub whose answer disagrees with the pinned plan); `None` restores
    /// the truth.
    pub fn claim_repo_commit(&self, commit: Option<&str>) {
        *self.shared.claimed_commit.lock().unwrap() = commit.map(str::to_string);
    }

    /// The files of `repo` at `rev` (`None`: no such repo or revision).
    pub fn files(&self, repo: &str, rev: &str) -> Option<Vec<StoredFile>> {
        let c = self.shared.commit(repo, rev)?;
        Some(
            c.tree
                .iter()
                .map(|(p, e)| StoredFile {
                    path: p.clone(),
                    size: e.size,
                    sha256: e.sha256.clone(),
                    lfs: e.lfs,
                })
                .collect(),
        )
    }

    /// The commit `main` of `repo` points at.
    pub fn head(&self, repo: &str) -> Option<String> {
        Some(self.shared.commit(repo, "main")?.id.clone())
    }

    /// Whether `repo` is private (`None`: no such repo).
    pub fn is_private(&self, repo: &str) -> Option<bool> {
        self.shared
            .repos
            .lock()
            .unwrap()
            .get(repo)
            .map(|r| r.private)
    }

    /// The tags the Hub derives from `repo`'s README at `main`.
    pub fn tags(&self, repo: &str) -> Vec<String> {
        read::head_tags(&self.shared, repo)
    }

    /// Whether every file of every commit of `repo` has its bytes in the store (a tree never
    /// names an object the Hub lacks).
    pub fn consistent(&self, repo: &str) -> bool {
        let repos = self.shared.repos.lock().unwrap();
        let Some(r) = repos.get(repo) else {
            return false;
        };
        r.commits
            .values()
            .all(|c| c.tree.values().all(|e| self.shared.store.has(&e.sha256)))
    }

    /// Corrupts `path` of `repo` at `main` on the Hub's side: its bytes become `bytes` while
    /// its listing keeps advertising the original ids (bit rot in the Hub's storage).
    pub fn corrupt(&self, repo: &str, path: &str, bytes: &[u8]) -> std::io::Result<()> {
        let served = self.shared.store.put(bytes)?;
        let mut repos = self.shared.repos.lock().unwrap();
        let r = repos
            .get_mut(repo)
            .ok_or_else(|| std::io::Error::other("no such repo"))?;
        let head = r
            .head()
            .ok_or_else(|| std::io::Error::other("empty repo"))?;
        let mut tree = head.tree.clone();
        let e: &mut Entry = tree
            .get_mut(path)
            .ok_or_else(|| std::io::Error::other("no such file"))?;
        e.served = Some(served);
        // Same commit id: the storage changed, not the history.
        r.commits.insert(
            head.id.clone(),
            Arc::new(Commit {
                id: head.id.clone(),
                tree,
                at: head.at,
                seq: head.seq,
            }),
        );
        Ok(())
    }

    /// The LFS objects `repo` holds (committed or only uploaded).
    pub fn lfs_objects(&self, repo: &str) -> HashSet<String> {
        self.shared
            .repos
            .lock()
            .unwrap()
            .get(repo)
            .map(|r| r.lfs.clone())
            .unwrap_or_default()
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
