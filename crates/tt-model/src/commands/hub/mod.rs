//! What the Hub commands (`push`, `publish`, `unpublish`, `login`, `logout`, `info`, `search`)
//! share: the client for `HF_ENDPOINT` and the token, the byte bar of an upload, and the README
//! read and written by the commands that list, delist or review a package.

pub(crate) mod registry;

use indicatif::ProgressBar;
use tt_model_hub::hub::{CommitOp, HubClient, RepoMeta};
use tt_model_hub::upload::UploadReporter;

use tt_model_local::Local;

use crate::{HubConsequence, UserError};

/// The client for this environment; `need_token`: refuse without a token (writes).
pub(crate) fn client(local: &Local, need_token: bool) -> anyhow::Result<HubClient> {
    let env = local.hub().clone();
    if need_token && env.token.is_none() {
        return Err(UserError(format!(
            "this needs a Hub token with write access to the repo: run `tt-model login` (stored in {}), or set HF_TOKEN",
            env.hf_home.join("token").display()
        ))
        .into());
    }
    Ok(HubClient::new(env))
}

/// Wraps a Hub error with what it means for the repo (the diagnosis card's consequence).
pub(crate) fn consequence(what: &str) -> impl FnOnce(tt_model_hub::HubError) -> anyhow::Error + '_ {
    move |e| anyhow::Error::new(e).context(HubConsequence(what.to_string()))
}

/// The repo's metadata; a missing repo is the Hub's not-found error, with what it means for the
/// repo (`nothing`: what did not happen) as the card's consequence.
pub(crate) async fn meta_of(
    client: &HubClient,
    id: &str,
    nothing: &str,
) -> anyhow::Result<tt_model_hub::hub::RepoMeta> {
    client
        .repo_meta(id)
        .await
        .map_err(consequence(nothing))?
        .ok_or_else(|| {
            anyhow::Error::new(tt_model_hub::HubError::NotFound {
                repo: id.to_string(),
                revision: "main".into(),
                endpoint: client.env.endpoint.clone(),
                status: 404,
            })
            .context(HubConsequence(nothing.into()))
        })
}

/// The repo's README.md at the head `meta` was read at; empty when it has none.
/// `nothing`: what did not happen, for the card of a failed read.
pub(crate) async fn readme_of(
    client: &HubClient,
    meta: &RepoMeta,
    nothing: &str,
) -> anyhow::Result<String> {
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
pub(crate) async fn write_readme(
    client: &HubClient,
    meta: &RepoMeta,
    summary: &str,
    text: String,
    nothing: &str,
) -> anyhow::Result<()> {
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

/// A byte progress bar for an upload.
pub(crate) struct UploadBar(ProgressBar);

impl UploadBar {
    pub(crate) fn new(what: &str) -> Self {
        Self(crate::progress::byte_progress_bar(what))
    }
    pub(crate) fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl UploadReporter for UploadBar {
    fn planned(&self, bytes: u64) {
        self.0.set_length(bytes);
    }
    fn file_started(&self, path: &str) {
        self.0.set_message(path.to_string());
    }
    fn bytes(&self, n: u64) {
        self.0.inc(n);
    }
}

/// Whether a repo id has the `ns/name` shape the Hub accepts (both parts required here).
pub(crate) fn check_repo_id(id: &str) -> anyhow::Result<()> {
    if !id.contains('/') || tt_model_hub::cache::validate_repo_id(id).is_err() {
        return Err(UserError(format!(
            "{id} is not a repo id: expected <namespace>/<name> (letters, digits, '-', '_', '.')"
        ))
        .into());
    }
    Ok(())
}
