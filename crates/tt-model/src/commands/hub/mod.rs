//! What the Hub commands (`push`, `publish`, `unpublish`, `login`, `logout`, `info`, `search`)
//! share: the client for `HF_ENDPOINT` and the token (`tt_model_local::hub_access`), and the
//! README read and written by the commands that list, delist or review a package.

use tt_model_hub::hub::{CommitOp, HubClient, RepoMeta};

/// Wraps a Hub error with what it means for the repo (the diagnosis card's consequence), as
/// the library's use cases do ([`tt_model_local::hub_access::consequence`]).
pub(crate) fn consequence(what: &str) -> impl FnOnce(tt_model_hub::HubError) -> anyhow::Error + '_ {
    move |e| anyhow::Error::new(tt_model_local::hub_access::consequence(what)(e))
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
            consequence(nothing)(tt_model_hub::HubError::NotFound {
                repo: id.to_string(),
                revision: "main".into(),
                endpoint: client.env.endpoint.clone(),
                status: 404,
            })
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
