//! A Hub-protocol server on 127.0.0.1 for tests (the real Hub cannot be reached here).
//!
//! It speaks the subset of the real protocol that the downloader uses, with the real URL shapes
//! and headers:
//! * `GET /api/models/{org}/{name}/revision/{rev}?blobs=true` → `{id, sha, siblings[]}` with
//!   `blobId`, `size` and, for LFS files, `lfs {sha256, size, pointerSize}`; without
//!   `blobs=true` the siblings carry only `rfilename`, as on the Hub;
//! * `GET|HEAD /{org}/{name}/resolve/{rev}/{path}`: regular files answer 200 with `ETag` and
//!   `X-Repo-Commit`; LFS files answer `302` to `/cdn-lfs/...` with `X-Linked-Etag`,
//!   `X-Linked-Size` and `X-Repo-Commit`, as the Hub does; both honour `Range: bytes=N-`.
//!
//! Ids are the real ones, computed from the bytes: `blobId` is the git blob sha1 of the file (of
//! its LFS pointer file for an LFS file), a regular file's `ETag` is its git blob sha1, an LFS
//! file's `lfs.sha256` and `X-Linked-Etag` the sha256 of its content.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::api::{LfsInfo, RepoInfo, Sibling};
use crate::verify::{git_blob_id, hex, sha256_hex};

/// A file of a fake repo.
#[derive(Debug, Clone)]
pub struct FakeFile {
    pub path: String,
    pub content: Vec<u8>,
    /// Stored in LFS (gets an `lfs.sha256` in the listing and a CDN redirect).
    pub lfs: bool,
    /// Serve these bytes instead of `content` while the listing and headers still advertise
    /// `content`'s ids: simulates a corrupted transfer.
    pub corrupt_with: Option<Vec<u8>>,
}

impl FakeFile {
    pub fn regular(path: &str, content: impl Into<Vec<u8>>) -> Self {
        FakeFile {
            path: path.into(),
            content: content.into(),
            lfs: false,
            corrupt_with: None,
        }
    }
    pub fn lfs(path: &str, content: impl Into<Vec<u8>>) -> Self {
        FakeFile {
            path: path.into(),
            content: content.into(),
            lfs: true,
            corrupt_with: None,
        }
    }
    fn served(&self) -> &[u8] {
        self.corrupt_with.as_deref().unwrap_or(&self.content)
    }
    fn sha256(&self) -> String {
        sha256_hex(&self.content)
    }
    /// The LFS pointer file git stores in place of an LFS file's content.
    fn lfs_pointer(&self) -> String {
        format!(
            "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
            self.sha256(),
            self.content.len()
        )
    }
    /// The git object id of the file in the repo tree (`blobId`): of the pointer for LFS files.
    pub fn blob_id(&self) -> String {
        if self.lfs {
            git_blob_id(self.lfs_pointer().as_bytes())
        } else {
            git_blob_id(&self.content)
        }
    }
}

/// A fake model repo at one commit, reachable by the commit sha and by its branches.
#[derive(Debug, Clone)]
pub struct FakeRepo {
    pub id: String,
    pub commit: String,
    pub branches: Vec<String>,
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
            commit: hex(&h.finalize())[..40].to_string(),
            branches: vec!["main".into()],
            files,
        }
    }
}

/// One request the server saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
}

#[derive(Clone)]
struct Shared {
    repos: Arc<HashMap<String, FakeRepo>>,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

/// A running server; it stops when dropped.
pub struct HubServer {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HubServer {
    /// Bind 127.0.0.1 on a free port and serve `repos`.
    pub async fn start(repos: Vec<FakeRepo>) -> std::io::Result<HubServer> {
        let shared = Shared {
            repos: Arc::new(repos.into_iter().map(|r| (r.id.clone(), r)).collect()),
            seen: Arc::new(Mutex::new(Vec::new())),
        };
        let app = Router::new()
            .route("/api/models/{org}/{name}/revision/{rev}", get(revision))
            .route("/{org}/{name}/resolve/{rev}/{*file}", get(resolve))
            .route("/cdn-lfs/{org}/{name}/{oid}", get(cdn))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(HubServer {
            addr,
            seen: shared.seen,
            task,
        })
    }

    /// The value for `HF_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(s: &Shared, method: &str, path: String, h: &HeaderMap) {
    let get = |k: header::HeaderName| h.get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
    s.seen.lock().unwrap().push(SeenRequest {
        method: method.into(),
        path,
        range: get(header::RANGE),
        authorization: get(header::AUTHORIZATION),
    });
}

fn find<'a>(s: &'a Shared, org: &str, name: &str, rev: &str) -> Option<&'a FakeRepo> {
    let r = s.repos.get(&format!("{org}/{name}"))?;
    (r.commit == rev || r.branches.iter().any(|b| b == rev)).then_some(r)
}

fn not_found(msg: &str) -> Response {
    let mut r = (StatusCode::NOT_FOUND, format!("{{\"error\":\"{msg}\"}}")).into_response();
    r.headers_mut()
        .insert("x-error-code", HeaderValue::from_static("RepoNotFound"));
    r
}

async fn revision(
    State(s): State<Shared>,
    Path((org, name, rev)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    record(
        &s,
        "GET",
        format!("/api/models/{org}/{name}/revision/{rev}"),
        &h,
    );
    let Some(r) = find(&s, &org, &name, &rev) else {
        if !s.repos.contains_key(&format!("{org}/{name}")) && !h.contains_key(header::AUTHORIZATION)
        {
            // huggingface.co answers an anonymous request for an unknown (or private) repo
            // with 401, not 404; only the error code says what it is.
            let mut r = not_found("Repository not found");
            *r.status_mut() = StatusCode::UNAUTHORIZED;
            return r;
        }
        return not_found("Repository not found");
    };
    let blobs = q.get("blobs").is_some_and(|v| v == "true");
    let siblings = r
        .files
        .iter()
        .map(|f| Sibling {
            rfilename: f.path.clone(),
            size: blobs.then_some(f.content.len() as u64),
            blob_id: blobs.then(|| f.blob_id()),
            lfs: (blobs && f.lfs).then(|| LfsInfo {
                sha256: f.sha256(),
                size: f.content.len() as u64,
                pointer_size: Some(f.lfs_pointer().len() as u64),
            }),
        })
        .collect();
    axum::Json(RepoInfo {
        id: r.id.clone(),
        sha: r.commit.clone(),
        siblings,
    })
    .into_response()
}

async fn resolve(
    State(s): State<Shared>,
    Path((org, name, rev, file)): Path<(String, String, String, String)>,
    h: HeaderMap,
) -> Response {
    record(&s, "GET", format!("/{org}/{name}/resolve/{rev}/{file}"), &h);
    let Some(r) = find(&s, &org, &name, &rev) else {
        return not_found("Revision not found");
    };
    let Some(f) = r.files.iter().find(|f| f.path == file) else {
        let mut resp = not_found("Entry not found");
        resp.headers_mut()
            .insert("x-error-code", HeaderValue::from_static("EntryNotFound"));
        return resp;
    };
    let commit = HeaderValue::from_str(&r.commit).unwrap();
    if f.lfs {
        let mut resp = StatusCode::FOUND.into_response();
        let hd = resp.headers_mut();
        hd.insert(
            header::LOCATION,
            HeaderValue::from_str(&format!("/cdn-lfs/{org}/{name}/{}", f.sha256())).unwrap(),
        );
        hd.insert(
            "x-linked-etag",
            HeaderValue::from_str(&format!("\"{}\"", f.sha256())).unwrap(),
        );
        hd.insert("x-linked-size", HeaderValue::from(f.content.len() as u64));
        hd.insert("x-repo-commit", commit);
        return resp;
    }
    let mut resp = ranged(f.served(), &h);
    resp.headers_mut().insert(
        header::ETAG,
        HeaderValue::from_str(&format!("\"{}\"", f.blob_id())).unwrap(),
    );
    resp.headers_mut().insert("x-repo-commit", commit);
    resp
}

async fn cdn(
    State(s): State<Shared>,
    Path((org, name, oid)): Path<(String, String, String)>,
    h: HeaderMap,
) -> Response {
    record(&s, "GET", format!("/cdn-lfs/{org}/{name}/{oid}"), &h);
    let Some(r) = s.repos.get(&format!("{org}/{name}")) else {
        return not_found("no such repo");
    };
    match r.files.iter().find(|f| f.lfs && f.sha256() == oid) {
        Some(f) => {
            let mut resp = ranged(f.served(), &h);
            resp.headers_mut().insert(
                header::ETAG,
                HeaderValue::from_str(&format!("\"{oid}\"")).unwrap(),
            );
            resp
        }
        None => not_found("no such object"),
    }
}

/// 200 with the body, or 206 for `Range: bytes=N-` (416 past the end).
fn ranged(body: &[u8], h: &HeaderMap) -> Response {
    let len = body.len();
    let start = h
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.strip_suffix('-'))
        .and_then(|v| v.parse::<usize>().ok());
    match start {
        None => {
            let mut r = (StatusCode::OK, body.to_vec()).into_response();
            r.headers_mut()
                .insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            r
        }
        Some(n) if n >= len => {
            let mut r = StatusCode::RANGE_NOT_SATISFIABLE.into_response();
            r.headers_mut().insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes */{len}")).unwrap(),
            );
            r
        }
        Some(n) => {
            let mut r = (StatusCode::PARTIAL_CONTENT, body[n..].to_vec()).into_response();
            r.headers_mut().insert(
                header::CONTENT_RANGE,
                HeaderValue::from_str(&format!("bytes {n}-{}/{len}", len - 1)).unwrap(),
            );
            r
        }
    }
}
