//! The upload side: repo create / settings, preupload, commit, the README check (the LFS
//! transfers between preupload and commit are `lfs`'s).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::state::{self, Commit, Entry, Op, Repo, apply, commit_id, entry_for};
use super::{Shared, bad_request, base_url, error, now};

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
    if tt_model_hub::cache::validate_repo_id(&id).is_err() {
        return bad_request(&format!("invalid repo name {id}"));
    }
    let url = format!("{}/{id}", base_url(&h));
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
            commits: HashMap::from([(cid.clone(), Commit::new(cid.clone(), tree, at))]),
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
    if let Err(r) = s.writable(&id, &org, &h) {
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
    let c = match s
        .writable(&id, &org, &h)
        .and_then(|()| s.readable_commit(&id, &rev, &h, &format!("Invalid rev id: {rev}")))
    {
        Ok(c) => c,
        Err(r) => return r,
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
    if let Err(r) = s.writable(&id, &org, &h) {
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
    r.commits
        .insert(cid.clone(), Commit::new(cid.clone(), tree, at));
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
