//! A package as published on the Hub, read without downloading it (`info`): the repo's
//! listing and its manifest at the revision asked for.

use tt_model_hub::HubError;
use tt_model_hub::hub::RepoMeta;
use tt_model_manifest::WireManifest;

use crate::hub_access::{check_repo_id, consequence};
use crate::state::WIRE_MANIFEST;
use crate::{Local, LocalError, target};

const NOTHING: &str = "nothing was read";

/// A published package.
#[derive(Debug, Clone)]
pub struct Published {
    /// The repo's listing (files, visibility, tags, head commit).
    pub meta: RepoMeta,
    /// Its manifest at the revision asked for (the head when none was).
    pub wire: WireManifest,
}

/// Reads package `id` (`<org>/<name>[@<revision>]`) from the Hub.
pub async fn read(local: &Local, id: &str) -> Result<Published, LocalError> {
    let (repo, rev) = target::split_repo(id).ok_or_else(|| {
        LocalError::refused(
            "id",
            format!("{id} is not a package id: expected <org>/<name>[@<revision>]"),
        )
    })?;
    check_repo_id(&repo)?;
    let client = local.hub_client(false)?;
    let meta = client
        .repo_meta(&repo)
        .await
        .map_err(consequence(NOTHING))?
        .ok_or_else(|| HubError::NotFound {
            repo: repo.clone(),
            revision: rev.clone().unwrap_or_else(|| "main".into()),
            endpoint: client.env.endpoint.clone(),
            status: 404,
        })?;
    let at = rev.unwrap_or_else(|| meta.sha.clone());
    if !meta.siblings.iter().any(|s| s.rfilename == WIRE_MANIFEST) {
        return Err(LocalError::refused(
            "id",
            format!("{repo} is not a tt-model package (no {WIRE_MANIFEST})."),
        ));
    }
    let bytes = client
        .read_file(&repo, &at, WIRE_MANIFEST)
        .await
        .map_err(consequence(NOTHING))?;
    let wire = WireManifest::from_json(&String::from_utf8_lossy(&bytes)).map_err(|e| {
        LocalError::refused(
            "id",
            format!("the published {WIRE_MANIFEST} of {repo} cannot be read: {e}"),
        )
    })?;
    Ok(Published { meta, wire })
}
