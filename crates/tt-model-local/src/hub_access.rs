//! What every Hub use case shares: the client for `HF_ENDPOINT` and the token, the repo id
//! check, a repo's metadata and its README (read, and written as one commit on the head read),
//! and a Hub or registry failure with what it means for the user's repo
//! ([`LocalError::Consequence`], the diagnosis card's consequence).

use tt_model_hub::HubError;
use tt_model_hub::hub::{CommitOp, HubClient, RepoMeta};

use crate::{Local, LocalError};

impl Local {
    /// A Hub client with this machine's endpoint and token; with `need_token`, refused when
    /// there is no token (a write).
    pub fn hub_client(&self, need_token: bool) -> Result<HubClient, LocalError> {
        let env = self.hub().clone();
        if need_token && env.token.is_none() {
            return Err(LocalError::refused(
                "token",
                format!(
                    "this needs a Hub token with write access to the repo: run `tt-model login` (stored in {}), or set HF_TOKEN",
                    env.hf_home.join("token").display()
                ),
            ));
        }
        Ok(HubClient::new(env))
    }
}

/// Whether a repo id has the `ns/name` shape the Hub accepts (both parts required here).
pub fn check_repo_id(id: &str) -> Result<(), LocalError> {
    if !id.contains('/') || tt_model_hub::cache::validate_repo_id(id).is_err() {
        return Err(LocalError::refused(
            "repo",
            format!(
                "{id} is not a repo id: expected <namespace>/<name> (letters, digits, '-', '_', '.')"
            ),
        ));
    }
    Ok(())
}

/// Wraps a Hub or registry error with what it means (`what`: "nothing was sent; the repo is
/// unchanged").
pub fn consequence<E: std::error::Error + Send + Sync + 'static>(
    what: &str,
) -> impl FnOnce(E) -> LocalError + '_ {
    move |e| LocalError::Consequence {
        consequence: what.to_string(),
        source: Box::new(e),
    }
}

/// The repo's metadata; a missing repo is the Hub's not-found error, with what it means for
/// the repo (`nothing`: what did not happen) as the card's consequence.
pub async fn meta_of(client: &HubClient, id: &str, nothing: &str) -> Result<RepoMeta, LocalError> {
    client
        .repo_meta(id)
        .await
        .map_err(consequence(nothing))?
        .ok_or_else(|| {
            consequence(nothing)(HubError::NotFound {
                repo: id.to_string(),
                revision: "main".into(),
                endpoint: client.env.endpoint.clone(),
                status: 404,
            })
        })
}

/// The repo's README.md at the head `meta` was read at; empty when it has none.
/// `nothing`: what did not happen, for the card of a failed read.
pub async fn readme_of(
    client: &HubClient,
    meta: &RepoMeta,
    nothing: &str,
) -> Result<String, LocalError> {
    if !meta.siblings.iter().any(|s| s.rfilename == "README.md") {
        return Ok(String::new());
    }
    let bytes = client
        .read_file(&meta.id, &meta.sha, "README.md")
        .await
        .map_err(consequence(nothing))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Writes `text` as README.md in one commit on `main`, on top of the head `meta` was read at
/// (a concurrent change fails the commit instead of being overwritten).
pub async fn write_readme(
    client: &HubClient,
    meta: &RepoMeta,
    summary: &str,
    text: String,
    nothing: &str,
) -> Result<(), LocalError> {
    client
        .commit(
            &meta.id,
            "main",
            summary,
            Some(&meta.sha),
            &[CommitOp::File {
                path: "README.md".into(),
                content: text.into_bytes(),
            }],
        )
        .await
        .map_err(consequence(nothing))?;
    Ok(())
}
