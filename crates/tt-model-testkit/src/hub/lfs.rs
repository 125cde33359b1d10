//! The git-lfs side of an upload: the batch API (`basic` transfer), the upload href (bytes
//! hashed while streamed, kept only when they hash to the oid; an upload can be stalled
//! mid-body to kill a push) and the verify href.

use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::io::AsyncWriteExt as _;

use super::state;
use super::{Shared, bad_request, base_url, error};

#[derive(Deserialize)]
struct BatchObject {
    oid: String,
    size: u64,
}

#[derive(Deserialize)]
pub(super) struct BatchBody {
    operation: String,
    objects: Vec<BatchObject>,
}

fn lfs_json(v: Value) -> Response {
    let mut r = axum::Json(v).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/vnd.git-lfs+json"),
    );
    r
}

/// The git-lfs batch API (`upload`, `basic` transfer): objects the repo has get no `actions`.
pub(super) async fn lfs_batch(
    State(s): State<Shared>,
    Path((org, name_git)): Path<(String, String)>,
    h: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(name) = name_git.strip_suffix(".git") else {
        return error(StatusCode::NOT_FOUND, None, "Not Found");
    };
    let Ok(b) = serde_json::from_slice::<BatchBody>(&body) else {
        return bad_request("malformed LFS batch request");
    };
    let id = format!("{org}/{name}");
    if let Err(r) = s.writable(&id, &org, &h) {
        return r;
    }
    if b.operation != "upload" {
        return bad_request("this test Hub serves LFS downloads through resolve only");
    }
    let have = s
        .repos
        .lock()
        .unwrap()
        .get(&id)
        .map(|r| r.lfs.clone())
        .unwrap_or_default();
    let base = base_url(&h);
    let objects: Vec<Value> = b
        .objects
        .iter()
        .map(|o| {
            let valid = o.oid.len() == 64 && o.oid.bytes().all(|c| c.is_ascii_hexdigit());
            if !valid {
                return json!({ "oid": o.oid, "size": o.size, "error": { "code": 422, "message": "invalid oid" } });
            }
            if have.contains(&o.oid) && s.store.has(&o.oid) {
                return json!({ "oid": o.oid, "size": o.size });
            }
            json!({
                "oid": o.oid,
                "size": o.size,
                "authenticated": true,
                "actions": {
                    "upload": { "href": format!("{base}/lfs-upload/{id}/{}?size={}", o.oid, o.size) },
                    "verify": { "href": format!("{base}/lfs-verify/{id}/{}", o.oid) },
                },
            })
        })
        .collect();
    lfs_json(json!({ "transfer": "basic", "objects": objects, "hash_algo": "sha256" }))
}

/// The upload href (the real Hub hands out a presigned storage URL: no token needed). The bytes
/// are hashed while streamed to a temp file and kept only when they hash to the oid; a body cut
/// short leaves nothing behind.
pub(super) async fn lfs_upload(
    State(s): State<Shared>,
    Path((org, name, oid)): Path<(String, String, String)>,
    body: Body,
) -> Response {
    let id = format!("{org}/{name}");
    if !s.repos.lock().unwrap().contains_key(&id) {
        return error(StatusCode::NOT_FOUND, None, "no such repo");
    }
    let tmp = s.store.temp_path();
    let result = async {
        let mut file = tokio::fs::File::create(&tmp).await?;
        let mut hasher = state::hasher();
        let mut size = 0u64;
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(std::io::Error::other)?;
            // An interrupted push: stall here, mid-body, until the test lifts the cut (by then
            // the client is dead and the rest of the body never comes).
            // The cut counts this upload's own bytes: uploads run side by side, and an object
            // that fits under the cut always completes, whatever the others send meanwhile.
            s.received.fetch_add(chunk.len() as u64, Ordering::SeqCst);
            while size + chunk.len() as u64 >= s.cut_after.load(Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            hasher.update(&chunk);
            size += chunk.len() as u64;
            file.write_all(&chunk).await?;
        }
        file.flush().await?;
        file.sync_all().await?;
        Ok::<_, std::io::Error>((hex::encode(hasher.finalize()), size))
    }
    .await;
    let (sha, size) = match result {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return bad_request(&format!("upload interrupted: {e}"));
        }
    };
    if sha != oid {
        let _ = std::fs::remove_file(&tmp);
        return bad_request(&format!(
            "the uploaded bytes hash to {sha}, not {oid} ({size} bytes)"
        ));
    }
    if let Err(e) = std::fs::rename(&tmp, s.store.object(&oid)) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string());
    }
    if let Some(r) = s.repos.lock().unwrap().get_mut(&id) {
        r.lfs.insert(oid);
    }
    StatusCode::OK.into_response()
}

#[derive(Deserialize)]
pub(super) struct VerifyBody {
    oid: String,
    size: u64,
}

/// The verify href: 200 when the repo holds the object with that size.
pub(super) async fn lfs_verify(
    State(s): State<Shared>,
    Path((org, name, oid)): Path<(String, String, String)>,
    h: HeaderMap,
    axum::Json(b): axum::Json<VerifyBody>,
) -> Response {
    let id = format!("{org}/{name}");
    if let Err(r) = s.writer(&org, &h) {
        return r;
    }
    let held = s
        .repos
        .lock()
        .unwrap()
        .get(&id)
        .is_some_and(|r| r.lfs.contains(&oid));
    let size = std::fs::metadata(s.store.object(&oid))
        .map(|m| m.len())
        .ok();
    if b.oid != oid || !held || size != Some(b.size) {
        return error(
            StatusCode::NOT_FOUND,
            None,
            &format!("object {oid} of {} bytes not found", b.size),
        );
    }
    lfs_json(json!({ "message": "ok" }))
}
