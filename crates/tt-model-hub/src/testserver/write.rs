//! The upload side: repo create / settings, preupload, LFS batch + upload + verify, commit.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::io::AsyncWriteExt as _;

use super::state::{self, Commit, Entry, Op, Repo, apply, commit_id, entry_for, next_seq};
use super::{Shared, error, now};
use crate::verify::hex;

/// The base URL the client reached us at (for the hrefs and urls we hand back).
fn base(h: &HeaderMap) -> String {
    let host = h
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

fn bad_request(msg: &str) -> Response {
    error(StatusCode::BAD_REQUEST, Some("BadRequest"), msg)
}

/// A repo path the Hub accepts: relative, no `..`, no empty segment.
fn valid_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
}

#[derive(Deserialize)]
pub(super) struct CreateBody {
    name: String,
    #[serde(default)]
    organization: Option<String>,
    #[serde(default)]
    private: Option<bool>,
    #[serde(default, rename = "type")]
    repo_type: Option<String>,
}

const GITATTRIBUTES: &str = "*.bin filter=lfs diff=lfs merge=lfs -text\n*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.tar filter=lfs diff=lfs merge=lfs -text\n*.gz filter=lfs diff=lfs merge=lfs -text\n";

/// `create_repo`: 200 `{url, name, id}`, or 409 when it exists (the client's `exist_ok`).
pub(super) async fn create(
    State(s): State<Shared>,
    h: HeaderMap,
    axum::Json(b): axum::Json<CreateBody>,
) -> Response {
    if b.repo_type.as_deref().is_some_and(|t| t != "model") {
        return bad_request("this test Hub holds model repos only");
    }
    let user = match s.caller(&h) {
        super::Caller::User(u) => u.clone(),
        _ => {
            return error(
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid username or password.",
            );
        }
    };
    let ns = b.organization.clone().unwrap_or_else(|| user.name.clone());
    if let Err(r) = s.writer(&ns, &h) {
        return r;
    }
    let id = format!("{ns}/{}", b.name);
    if crate::cache::validate_repo_id(&id).is_err() {
        return bad_request(&format!("invalid repo name {id}"));
    }
    let url = format!("{}/{id}", base(&h));
    let entry = match entry_for(&s.store, GITATTRIBUTES.as_bytes(), false) {
        Ok(e) => e,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string()),
    };
    let mut repos = s.repos.lock().unwrap();
    if repos.contains_key(&id) {
        return (
            StatusCode::CONFLICT,
            axum::Json(json!({ "error": "You already created this model repo", "url": url })),
        )
            .into_response();
    }
    let tree = BTreeMap::from([(".gitattributes".to_string(), entry)]);
    let at = now();
    let cid = commit_id(None, &tree, "initial commit", at);
    repos.insert(
        id.clone(),
        Repo {
            id: id.clone(),
            private: b.private.unwrap_or(false),
            commits: HashMap::from([(
                cid.clone(),
                Arc::new(Commit {
                    id: cid.clone(),
                    tree,
                    at,
                    seq: next_seq(),
                }),
            )]),
            branches: HashMap::from([("main".to_string(), cid)]),
            lfs: HashSet::new(),
        },
    );
    axum::Json(json!({ "url": url, "name": id, "id": id })).into_response()
}

#[derive(Deserialize)]
pub(super) struct SettingsBody {
    #[serde(default)]
    private: Option<bool>,
}

/// `update_repo_settings(private=…)`.
pub(super) async fn settings(
    State(s): State<Shared>,
    Path((org, name)): Path<(String, String)>,
    h: HeaderMap,
    axum::Json(b): axum::Json<SettingsBody>,
) -> Response {
    let id = format!("{org}/{name}");
    if let Err(r) = s
        .readable(&id, &h)
        .and_then(|()| s.writer(&org, &h).map(|_| ()))
    {
        return r;
    }
    let mut repos = s.repos.lock().unwrap();
    let r = repos.get_mut(&id).expect("checked readable");
    if let Some(p) = b.private {
        r.private = p;
    }
    axum::Json(json!({ "private": r.private })).into_response()
}

#[derive(Deserialize)]
struct PreuploadFile {
    path: String,
    sample: String,
    size: u64,
}

#[derive(Deserialize)]
pub(super) struct PreuploadBody {
    files: Vec<PreuploadFile>,
}

/// `preupload`: how each file must be sent, and the remote file's oid at `rev` when there is one.
pub(super) async fn preupload(
    State(s): State<Shared>,
    Path((org, name, rev)): Path<(String, String, String)>,
    h: HeaderMap,
    axum::Json(b): axum::Json<PreuploadBody>,
) -> Response {
    let id = format!("{org}/{name}");
    if let Err(r) = s
        .readable(&id, &h)
        .and_then(|()| s.writer(&org, &h).map(|_| ()))
    {
        return r;
    }
    let Some(c) = s.commit(&id, &rev) else {
        return error(
            StatusCode::NOT_FOUND,
            Some("RevisionNotFound"),
            &format!("Invalid rev id: {rev}"),
        );
    };
    let mut files = Vec::new();
    for f in b.files {
        let Ok(sample) = base64::engine::general_purpose::STANDARD.decode(&f.sample) else {
            return bad_request(&format!("{}: sample is not base64", f.path));
        };
        let lfs = state::upload_mode_is_lfs(f.size, &sample);
        let oid = c.tree.get(&f.path).map(|e| {
            if e.lfs {
                e.sha256.clone()
            } else {
                e.git_sha1.clone()
            }
        });
        files.push(json!({
            "path": f.path,
            "uploadMode": if lfs { "lfs" } else { "regular" },
            "shouldIgnore": false,
            "oid": oid,
        }));
    }
    axum::Json(json!({ "files": files, "commitOid": c.id })).into_response()
}

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
    if let Err(r) = s
        .readable(&id, &h)
        .and_then(|()| s.writer(&org, &h).map(|_| ()))
    {
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
    let base = base(&h);
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
        Ok::<_, std::io::Error>((hex(&hasher.finalize()), size))
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

/// One NDJSON line of a commit payload.
#[derive(Deserialize)]
struct Line {
    key: String,
    value: Value,
}

/// Decodes and checks a commit payload (the bytes of regular files go to the store now; a
/// rejected commit leaves only unreferenced objects).
fn decode(s: &Shared, id: &str, text: &str) -> Result<(Value, Vec<Op>), Response> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Line = lines
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .filter(|l: &Line| l.key == "header")
        .ok_or_else(|| bad_request("the first line must be the header"))?;
    let lfs = s
        .repos
        .lock()
        .unwrap()
        .get(id)
        .map(|r| r.lfs.clone())
        .unwrap_or_default();
    let mut ops = Vec::new();
    for l in lines {
        let l: Line =
            serde_json::from_str(l).map_err(|e| bad_request(&format!("bad line: {e}")))?;
        let path = l.value["path"].as_str().unwrap_or_default().to_string();
        if !valid_path(&path) {
            return Err(bad_request(&format!("invalid path {path:?}")));
        }
        match l.key.as_str() {
            "file" => {
                if l.value["encoding"].as_str() != Some("base64") {
                    return Err(bad_request("file content must be base64"));
                }
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(l.value["content"].as_str().unwrap_or_default())
                    .map_err(|_| bad_request(&format!("{path}: content is not base64")))?;
                let entry = entry_for(&s.store, &bytes, false)
                    .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string()))?;
                ops.push(Op::Put { path, entry });
            }
            "lfsFile" => {
                let oid = l.value["oid"].as_str().unwrap_or_default().to_string();
                if l.value["algo"].as_str() != Some("sha256") {
                    return Err(bad_request("lfsFile algo must be sha256"));
                }
                let size = std::fs::metadata(s.store.object(&oid))
                    .map(|m| m.len())
                    .ok();
                if !lfs.contains(&oid) || size.is_none() {
                    return Err(error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        Some("LfsObjectNotFound"),
                        &format!("{path}: LFS object {oid} was never uploaded to {id}"),
                    ));
                }
                if let Some(want) = l.value["size"].as_u64()
                    && Some(want) != size
                {
                    return Err(bad_request(&format!(
                        "{path}: size {want} does not match the object"
                    )));
                }
                let entry = Entry {
                    size: size.unwrap_or(0),
                    sha256: oid,
                    lfs: true,
                    served: None,
                    git_sha1: String::new(),
                };
                ops.push(Op::Put { path, entry });
            }
            "deletedFile" => ops.push(Op::Delete { path }),
            "deletedFolder" => ops.push(Op::DeleteFolder { path }),
            other => return Err(bad_request(&format!("unknown operation {other}"))),
        }
    }
    Ok((header.value, ops))
}

/// `create_commit`: all operations or none, then the branch moves (under the lock, so readers
/// see the old tree or the new one). A stale `parentCommit` is refused (412), as on the Hub.
pub(super) async fn commit(
    State(s): State<Shared>,
    Path((org, name, rev)): Path<(String, String, String)>,
    h: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let id = format!("{org}/{name}");
    if let Err(r) = s
        .readable(&id, &h)
        .and_then(|()| s.writer(&org, &h).map(|_| ()))
    {
        return r;
    }
    s.received.fetch_add(body.len() as u64, Ordering::SeqCst);
    let Ok(text) = std::str::from_utf8(&body) else {
        return bad_request("the payload is not UTF-8 NDJSON");
    };
    let (header, ops) = match decode(&s, &id, text) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let summary = header["summary"].as_str().unwrap_or("").to_string();
    let mut repos = s.repos.lock().unwrap();
    let r = repos.get_mut(&id).expect("checked readable");
    if r.commits.contains_key(&rev) && !r.branches.contains_key(&rev) {
        return bad_request("commits go to a branch, not to a commit id");
    }
    let parent = r.resolve(&rev);
    if let (Some(want), Some(p)) = (header["parentCommit"].as_str(), &parent)
        && want != p.id
    {
        return error(
            StatusCode::PRECONDITION_FAILED,
            None,
            "A commit has happened since. Please refresh and try again.",
        );
    }
    let base = parent.as_ref().map(|p| p.tree.clone()).unwrap_or_default();
    let tree = match apply(&base, &ops) {
        Ok(t) => t,
        Err(e) => return error(StatusCode::NOT_FOUND, Some("EntryNotFound"), &e),
    };
    let at = now();
    let cid = commit_id(parent.as_ref().map(|p| p.id.as_str()), &tree, &summary, at);
    r.commits.insert(
        cid.clone(),
        Arc::new(Commit {
            id: cid.clone(),
            tree,
            at,
            seq: next_seq(),
        }),
    );
    r.branches.insert(rev.clone(), cid.clone());
    axum::Json(json!({
        "success": true,
        "commitOid": cid,
        "commitUrl": format!("{}/{id}/commit/{cid}", base_url(&h)),
        "commitMessage": summary,
        "hookOutput": "",
        "pullRequestUrl": Value::Null,
    }))
    .into_response()
}

fn base_url(h: &HeaderMap) -> String {
    base(h)
}

#[derive(Deserialize)]
pub(super) struct ValidateBody {
    content: String,
}

/// `validate-yaml`: the README's frontmatter must be closed and every top-level line a
/// `key:` or a list item (the Hub parses it as YAML; this is the shape check tt-model's cards
/// and `huggingface_hub`'s need).
pub(super) async fn validate_yaml(axum::Json(b): axum::Json<ValidateBody>) -> Response {
    let lines: Vec<&str> = b.content.lines().collect();
    let mut errors = Vec::new();
    if lines.first().map(|l| l.trim_end()) == Some("---") {
        match lines.iter().skip(1).position(|l| l.trim_end() == "---") {
            None => errors.push(json!({ "message": "the metadata block is not closed by ---" })),
            Some(end) => {
                for l in &lines[1..=end] {
                    let ok = l.trim().is_empty()
                        || l.starts_with(' ')
                        || l.starts_with('-')
                        || l.starts_with('#')
                        || l.split_once(':').is_some_and(|(k, _)| !k.trim().is_empty());
                    if !ok {
                        errors.push(json!({ "message": format!("not YAML metadata: {l}") }));
                    }
                }
            }
        }
    }
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    (
        status,
        axum::Json(json!({ "errors": errors, "warnings": [] })),
    )
        .into_response()
}
