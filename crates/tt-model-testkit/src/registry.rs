//! An OCI distribution registry on 127.0.0.1 for tests: the pull side of the distribution
//! API, anonymous, with no Docker and no `docker-registry` needed.
//!
//! * `GET /v2/` → 200 (no challenge: anonymous access, as a registry without auth answers);
//! * `GET|HEAD /v2/{name}/manifests/{digest}` → the manifest with its `Content-Type` and
//!   `Docker-Content-Digest`;
//! * `GET|HEAD /v2/{name}/blobs/{digest}` → the blob with `Docker-Content-Digest`;
//! * anything unknown → 404 with the API's `{"errors":[{"code","message"}]}` body
//!   (`NAME_UNKNOWN`, `MANIFEST_UNKNOWN`, `BLOB_UNKNOWN`).
//!
//! Content is stored under the sha256 of its bytes, as a registry does; [`RegistryServer::corrupt`]
//! makes one digest answer with other bytes (bit rot in the registry's storage, or a lying
//! mirror), which is what a client's digest check is there to catch.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use tt_model_hub::verify::sha256_hex;

/// One stored object: its bytes and, for a manifest, its media type.
#[derive(Clone)]
struct Object {
    bytes: Vec<u8>,
    media_type: Option<String>,
}

#[derive(Clone, Default)]
struct Shared {
    /// The one repository served (`namespace/name`).
    repository: String,
    /// Manifests and blobs by digest (`sha256:<hex>`).
    objects: Arc<Mutex<HashMap<String, Object>>>,
    /// Digests that answer with other bytes than the ones they name.
    corrupted: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    /// `METHOD /path` of every content request, in order.
    seen: Arc<Mutex<Vec<String>>>,
}

/// A running registry; it stops when dropped.
pub struct RegistryServer {
    /// The address it listens on (127.0.0.1, a free port).
    pub addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

/// `sha256:<hex>` of `bytes`.
fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

fn unknown(code: &'static str, message: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(serde_json::json!({ "errors": [{ "code": code, "message": message }] })),
    )
        .into_response()
}

async fn ping() -> Response {
    let mut r = StatusCode::OK.into_response();
    r.headers_mut().insert(
        "docker-distribution-api-version",
        HeaderValue::from_static("registry/2.0"),
    );
    r
}

/// `{name}/manifests/{reference}` or `{name}/blobs/{digest}`, `name` having any number of
/// path components.
async fn content(State(s): State<Shared>, method: Method, Path(rest): Path<String>) -> Response {
    s.seen.lock().unwrap().push(format!("{method} /v2/{rest}"));
    let Some((name, kind, reference)) = rest.rsplit_once('/').and_then(|(head, reference)| {
        let (name, kind) = head.rsplit_once('/')?;
        Some((name, kind, reference))
    }) else {
        return unknown("NAME_UNKNOWN", "no repository in the path");
    };
    if name != s.repository {
        return unknown("NAME_UNKNOWN", "repository name not known to registry");
    }
    let (code, manifest) = match kind {
        "manifests" => ("MANIFEST_UNKNOWN", true),
        "blobs" => ("BLOB_UNKNOWN", false),
        _ => return unknown("UNSUPPORTED", "not a pull route"),
    };
    let Some(object) = s.objects.lock().unwrap().get(reference).cloned() else {
        return unknown(code, &format!("{reference} is not in {name}"));
    };
    if object.media_type.is_some() != manifest {
        return unknown(code, &format!("{reference} is not in {name}"));
    }
    let body = s
        .corrupted
        .lock()
        .unwrap()
        .get(reference)
        .cloned()
        .unwrap_or(object.bytes);
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(
            object
                .media_type
                .as_deref()
                .unwrap_or("application/octet-stream"),
        )
        .unwrap(),
    );
    h.insert(
        "docker-content-digest",
        HeaderValue::from_str(reference).unwrap(),
    );
    r
}

impl RegistryServer {
    /// Binds 127.0.0.1 on a free port and serves `repository` (`namespace/name`), empty.
    pub async fn start(repository: &str) -> std::io::Result<RegistryServer> {
        let shared = Shared {
            repository: repository.to_string(),
            ..Shared::default()
        };
        let app = Router::new()
            .route("/v2/", get(ping))
            .route("/v2/{*rest}", get(content))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(RegistryServer { addr, shared, task })
    }

    /// `127.0.0.1:<port>`: the host part of `image.registry`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// `METHOD /v2/...` of every manifest and blob request so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Stores a blob; returns its digest.
    pub fn put_blob(&self, bytes: &[u8]) -> String {
        self.put(bytes, None)
    }

    /// Stores a manifest of `media_type`; returns its digest.
    pub fn put_manifest(&self, bytes: &[u8], media_type: &str) -> String {
        self.put(bytes, Some(media_type.to_string()))
    }

    fn put(&self, bytes: &[u8], media_type: Option<String>) -> String {
        let digest = digest_of(bytes);
        self.shared.objects.lock().unwrap().insert(
            digest.clone(),
            Object {
                bytes: bytes.to_vec(),
                media_type,
            },
        );
        digest
    }

    /// From now on `digest` (a stored manifest or blob) answers with `bytes` instead of its
    /// own, under the same digest and headers.
    pub fn corrupt(&self, digest: &str, bytes: &[u8]) {
        self.shared
            .corrupted
            .lock()
            .unwrap()
            .insert(digest.to_string(), bytes.to_vec());
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
