//! `POST /api/models/{org}/{name}/duplicate` (`HfApi.duplicate_repo`): a server-side copy of a
//! repo, its commits, branches and LFS objects, under `{"repository": "<ns>/<name>"}`; 409 when
//! the target exists. The copy keeps the source's visibility, as the Hub's does by default.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::state::Repo;
use super::{Shared, bad_request, base_url, error};

#[derive(Deserialize)]
pub(super) struct DuplicateBody {
    repository: String,
}

pub(super) async fn duplicate(
    State(s): State<Shared>,
    Path((org, name)): Path<(String, String)>,
    h: HeaderMap,
    axum::Json(b): axum::Json<DuplicateBody>,
) -> Response {
    let from = format!("{org}/{name}");
    if let Err(r) = s.readable(&from, &h) {
        return r;
    }
    let Some((ns, _)) = b.repository.split_once('/') else {
        return bad_request("repository must be <namespace>/<name>");
    };
    if let Err(r) = s.writer(ns, &h) {
        return r;
    }
    let url = format!("{}/{}", base_url(&h), b.repository);
    let mut repos = s.repos.lock().unwrap();
    if repos.contains_key(&b.repository) {
        return (
            StatusCode::CONFLICT,
            axum::Json(json!({ "error": "You already created this model repo", "url": url })),
        )
            .into_response();
    }
    let Some(src) = repos.get(&from) else {
        return error(
            StatusCode::NOT_FOUND,
            Some("RepoNotFound"),
            "Repository not found",
        );
    };
    let copy = Repo {
        id: b.repository.clone(),
        private: src.private,
        commits: src.commits.clone(),
        branches: src.branches.clone(),
        lfs: src.lfs.clone(),
    };
    repos.insert(b.repository.clone(), copy);
    axum::Json(json!({ "url": url })).into_response()
}
