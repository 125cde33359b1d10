//! The download side: repo info, resolve + CDN, tree listing, model search, whoami.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::state::{Commit, iso8601};
use super::{Caller, Shared, base_url, error};
use tt_model_hub::card_tags;

/// The tags the Hub derives from a commit's README frontmatter.
fn tags_of(s: &Shared, c: &Commit) -> Vec<String> {
    c.tree
        .get("README.md")
        .and_then(|e| s.store.read(&e.sha256).ok())
        .map(|b| card_tags::tags(&String::from_utf8_lossy(&b)))
        .unwrap_or_default()
}

pub(super) fn head_tags(s: &Shared, id: &str) -> Vec<String> {
    s.commit(id, "main")
        .map(|c| tags_of(s, &c))
        .unwrap_or_default()
}

fn private_of(s: &Shared, id: &str) -> bool {
    s.repos.lock().unwrap().get(id).is_some_and(|r| r.private)
}

/// The repo-info JSON (`HfApi.model_info` / `repo_info`).
fn info_json(s: &Shared, id: &str, c: &Commit, blobs: bool) -> Value {
    let siblings: Vec<Value> = c
        .tree
        .iter()
        .map(|(p, e)| {
            if !blobs {
                return json!({ "rfilename": p });
            }
            let mut v = json!({ "rfilename": p, "size": e.size, "blobId": e.blob_id() });
            if e.lfs {
                v["lfs"] = json!({
                    "sha256": e.sha256,
                    "size": e.size,
                    "pointerSize": e.lfs_pointer().len(),
                });
            }
            v
        })
        .collect();
    json!({
        "_id": id,
        "id": id,
        "modelId": id,
        "sha": c.id,
        "private": private_of(s, id),
        "disabled": false,
        "gated": false,
        "downloads": 0,
        "likes": 0,
        "tags": tags_of(s, c),
        "lastModified": iso8601(c.at),
        "siblings": siblings,
    })
}

pub(super) async fn info(
    State(s): State<Shared>,
    Path((org, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    revision(State(s), Path((org, name, "main".into())), Query(q), h).await
}

pub(super) async fn revision(
    State(s): State<Shared>,
    Path((org, name, rev)): Path<(String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    let id = format!("{org}/{name}");
    let c = match s.readable_commit(&id, &rev, &h, &format!("Invalid rev id: {rev}")) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let blobs = q
        .get("blobs")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    axum::Json(info_json(&s, &id, &c, blobs)).into_response()
}

pub(super) async fn tree_root(
    State(s): State<Shared>,
    Path((org, name, rev)): Path<(String, String, String)>,
    q: Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    tree(State(s), Path((org, name, rev, String::new())), q, h).await
}

/// `list_repo_tree`: the entries under `path` (one level, or all with `recursive=true`),
/// directories included, as `[{type, oid, size, path, lfs?}]`.
pub(super) async fn tree(
    State(s): State<Shared>,
    Path((org, name, rev, path)): Path<(String, String, String, String)>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Response {
    let id = format!("{org}/{name}");
    let c = match s.readable_commit(&id, &rev, &h, &format!("Invalid rev id: {rev}")) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let recursive = q
        .get("recursive")
        .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    let base = path.trim_matches('/');
    let prefix = if base.is_empty() {
        String::new()
    } else {
        format!("{base}/")
    };
    if !base.is_empty() && !c.tree.keys().any(|p| p.starts_with(&prefix)) {
        return error(
            StatusCode::NOT_FOUND,
            Some("EntryNotFound"),
            &format!("{base} does not exist on \"{rev}\""),
        );
    }
    let mut out = Vec::new();
    let mut dirs = std::collections::BTreeSet::new();
    for (p, e) in &c.tree {
        let Some(rest) = p.strip_prefix(&prefix) else {
            continue;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        // Every directory between `base` and the file (only the first one unless recursive).
        let depth = if recursive {
            parts.len() - 1
        } else {
            parts.len().min(2) - 1
        };
        for d in 1..=depth {
            dirs.insert(format!("{prefix}{}", parts[..d].join("/")));
        }
        if recursive || parts.len() == 1 {
            let mut v = json!({ "type": "file", "oid": e.blob_id(), "size": e.size, "path": p });
            if e.lfs {
                v["lfs"] = json!({ "oid": e.sha256, "size": e.size, "pointerSize": e.lfs_pointer().len() });
            }
            out.push(v);
        }
    }
    for d in dirs {
        out.push(json!({ "type": "directory", "oid": "0000000000000000000000000000000000000000", "size": 0, "path": d }));
    }
    axum::Json(out).into_response()
}

/// `list_models(search=, filter=, author=, limit=, sort=, direction=)`: public repos (and the
/// caller's private ones) whose id contains `search` and whose tags include every `filter`.
/// Ordered as the Hub orders them: by `sort` (`lastModified`, `createdAt`; `downloads` and
/// `likes` are all 0 here), descending unless `direction=1`; without `sort`, in no useful
/// order (here: oldest repo first), so a client that wants the newest first must ask.
pub(super) async fn list_models(
    State(s): State<Shared>,
    Query(q): Query<Vec<(String, String)>>,
    h: HeaderMap,
) -> Response {
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let filters: Vec<String> = q
        .iter()
        .filter(|(n, _)| n == "filter")
        .flat_map(|(_, v)| v.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect();
    let search = get("search").unwrap_or_default().to_lowercase();
    let author = get("author");
    let limit = get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(usize::MAX);
    let caller = s.caller(&h);
    // (id, private, head, the repo's first commit: its creation)
    type Listed = (String, bool, Option<Arc<Commit>>, u64);
    let snapshot: Vec<Listed> = s
        .repos
        .lock()
        .unwrap()
        .values()
        .map(|r| {
            let created = r.commits.values().map(|c| c.seq).min().unwrap_or(0);
            (r.id.clone(), r.private, r.head(), created)
        })
        .collect();
    let mut rows = Vec::new();
    for (id, private, head, created) in snapshot {
        let ns = id.split('/').next().unwrap_or("");
        let visible = !private || matches!(&caller, Caller::User(u) if u.can_write(ns));
        if !visible
            || !id.to_lowercase().contains(&search)
            || author.as_deref().is_some_and(|a| a != ns)
        {
            continue;
        }
        let Some(c) = head else { continue };
        let tags = tags_of(&s, &c);
        if !filters.iter().all(|f| tags.contains(f)) {
            continue;
        }
        let key = match get("sort").as_deref() {
            Some("lastModified") => c.seq,
            Some("createdAt") | None => created,
            // downloads, likes, trendingScore: all 0 here, so creation breaks the tie.
            Some(_) => 0,
        };
        rows.push((
            (key, created),
            json!({
                "_id": id, "id": id, "modelId": id, "private": private, "downloads": 0, "likes": 0,
                "tags": tags, "lastModified": iso8601(c.at), "sha": c.id,
            }),
        ));
    }
    rows.sort_by_key(|r| r.0);
    let descending = get("sort").is_some() && get("direction").as_deref() != Some("1");
    if descending {
        rows.reverse();
    }
    axum::Json(
        rows.into_iter()
            .take(limit)
            .map(|r| r.1)
            .collect::<Vec<_>>(),
    )
    .into_response()
}

/// `whoami` (`/api/whoami-v2`): the token's user and orgs.
pub(super) async fn whoami(State(s): State<Shared>, h: HeaderMap) -> Response {
    match s.caller(&h) {
        Caller::User(u) => axum::Json(json!({
            "type": "user",
            "name": u.name,
            "orgs": u.orgs.iter().map(|o| json!({ "name": o })).collect::<Vec<_>>(),
            "auth": { "type": "access_token", "accessToken": { "role": "write" } },
        }))
        .into_response(),
        _ => error(
            StatusCode::UNAUTHORIZED,
            None,
            "Invalid credentials in Authorization header",
        ),
    }
}

pub(super) async fn resolve(
    State(s): State<Shared>,
    Path((org, name, rev, file)): Path<(String, String, String, String)>,
    h: HeaderMap,
) -> Response {
    let id = format!("{org}/{name}");
    let c = match s.readable_commit(&id, &rev, &h, "Revision not found") {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Some(e) = c.tree.get(&file) else {
        return error(
            StatusCode::NOT_FOUND,
            Some("EntryNotFound"),
            "Entry not found",
        );
    };
    let claimed = s.claimed_commit.lock().unwrap().clone();
    let commit = HeaderValue::from_str(claimed.as_deref().unwrap_or(&c.id)).unwrap();
    let base = base_url(&h);
    if e.lfs {
        let mut resp = StatusCode::FOUND.into_response();
        let hd = resp.headers_mut();
        hd.insert(
            header::LOCATION,
            // Absolute, as the Hub's CDN URLs are (a relative one would be followed by
            // `huggingface_hub`'s HEAD, which must see this answer's headers).
            HeaderValue::from_str(&format!("{base}/cdn-lfs/{org}/{name}/{}", e.sha256)).unwrap(),
        );
        hd.insert(
            "x-linked-etag",
            HeaderValue::from_str(&format!("\"{}\"", e.sha256)).unwrap(),
        );
        hd.insert("x-linked-size", HeaderValue::from(e.size));
        hd.insert("x-repo-commit", commit);
        return resp;
    }
    let Ok(body) = s.store.read(e.served_object()) else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, None, "object missing");
    };
    let mut resp = ranged(&body, &h);
    resp.headers_mut().insert(
        header::ETAG,
        HeaderValue::from_str(&format!("\"{}\"", e.blob_id())).unwrap(),
    );
    resp.headers_mut().insert("x-repo-commit", commit);
    resp
}

/// The CDN: an LFS object of the repo, by sha256 (a corrupted file's substitute bytes when
/// its head entry says so).
pub(super) async fn cdn(
    State(s): State<Shared>,
    Path((org, name, oid)): Path<(String, String, String)>,
    h: HeaderMap,
) -> Response {
    let id = format!("{org}/{name}");
    let served = {
        let repos = s.repos.lock().unwrap();
        let Some(r) = repos.get(&id) else {
            return error(StatusCode::NOT_FOUND, None, "no such repo");
        };
        if !r.lfs.contains(&oid) {
            return error(StatusCode::NOT_FOUND, None, "no such object");
        }
        r.commits
            .values()
            .flat_map(|c| c.tree.values())
            .find(|e| e.sha256 == oid && e.served.is_some())
            .map(|e| e.served_object().to_string())
            .unwrap_or_else(|| oid.clone())
    };
    let Ok(body) = s.store.read(&served) else {
        return error(StatusCode::NOT_FOUND, None, "no such object");
    };
    let mut resp = ranged(&body, &h);
    resp.headers_mut().insert(
        header::ETAG,
        HeaderValue::from_str(&format!("\"{oid}\"")).unwrap(),
    );
    resp
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
