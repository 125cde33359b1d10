//! The review copy (reference §5.6): `whitelist` copies a community package into the
//! `Tenstorrent` org and lists the copy; `tt` then shows the copy and hides the source it
//! names. Nothing is kept on this machine: the review lives on the copy's card
//! (`tt_model_hub::review`), so it cannot drift from what it describes, and the source repo is
//! never written.
//!
//! `whitelist` refuses a source that is not listed in the catalog, is private, has no weights
//! (they name the copy), or when no reviewer is logged in. An existing copy that records the
//! same source (case-insensitively) is re-recorded; one that records another source, or none,
//! is refused, naming it. `unwhitelist` removes the catalog tag from a `Tenstorrent/` copy and
//! keeps the repo.

use tt_model_hub::card_tags::{self, CATALOG_TAG};
use tt_model_hub::review::{self, ORG, Review};
use tt_model_manifest::WireManifest;

use crate::event::Event;
use crate::hub_access::{check_repo_id, consequence, meta_of, readme_of, write_readme};
use crate::progress::Progress;
use crate::state::WIRE_MANIFEST;
use crate::{Local, LocalError};

const NOTHING: &str = "no copy was made or changed";

/// The copy's id: the weights repo's name under `Tenstorrent/`.
pub fn copy_id(weights_repo: &str) -> String {
    format!(
        "{ORG}/{}",
        weights_repo.rsplit('/').next().unwrap_or(weights_repo)
    )
}

/// Copies community package `id` into the `Tenstorrent` org, records the review on the
/// copy's card and lists the copy.
pub async fn whitelist(local: &Local, id: &str, progress: &dyn Progress) -> Result<(), LocalError> {
    check_repo_id(id)?;
    let client = local.hub_client(true)?;
    let reviewer = client.whoami().await.map_err(consequence(NOTHING))?.name;
    let meta = meta_of(&client, id, NOTHING).await?;
    if !meta.tags.iter().any(|t| t == CATALOG_TAG) {
        return Err(LocalError::refused(
            "repo",
            format!(
                "{id} is not in the community catalog: a package is listed by its author (`tt-model publish {id}`) before it is reviewed."
            ),
        ));
    }
    if meta.private {
        return Err(LocalError::refused(
            "repo",
            format!("{id} is private: only a public package can be reviewed and copied."),
        ));
    }
    let bytes = client
        .read_file(id, &meta.sha, WIRE_MANIFEST)
        .await
        .map_err(consequence(NOTHING))?;
    let wire = WireManifest::from_json(&String::from_utf8_lossy(&bytes)).map_err(|e| {
        LocalError::refused(
            "manifest",
            format!("the published {WIRE_MANIFEST} of {id} cannot be read: {e}"),
        )
    })?;
    let Some(weights) = wire.weights.as_ref().map(|w| w.repo_id.clone()) else {
        return Err(LocalError::refused(
            "manifest",
            format!(
                "{id} has no weights repo in its manifest, and the copy is named after it ({ORG}/<weights name>)."
            ),
        ));
    };
    let target = copy_id(&weights);
    let source = meta.id.clone();
    if client
        .duplicate_repo(&source, &target)
        .await
        .map_err(consequence(NOTHING))?
    {
        progress.emit(Event::done(
            format!("copied {source} → {target}"),
            Some("server-side".into()),
        ));
    } else {
        let existing = meta_of(&client, &target, NOTHING).await?;
        match review::read(&readme_of(&client, &existing, NOTHING).await?) {
            Some(r) if r.source.eq_ignore_ascii_case(&source) => {
                progress.emit(Event::skipped(
                    format!("{target} is already the copy of {source}"),
                    Some("re-recording the review".into()),
                ));
            }
            Some(r) => {
                return Err(LocalError::refused(
                    "repo",
                    format!(
                        "{target} already holds the reviewed copy of {}, not {source}: nothing was overwritten.",
                        r.source
                    ),
                ));
            }
            None => {
                return Err(LocalError::refused(
                    "repo",
                    format!(
                        "{target} exists and records no review: it was not made by `whitelist`, so it is not overwritten."
                    ),
                ));
            }
        }
    }
    let copy = meta_of(&client, &target, NOTHING).await?;
    let record = Review {
        source: source.clone(),
        revision: Some(meta.sha.clone()).filter(|s| !s.is_empty()),
        reviewer: reviewer.clone(),
        reviewed_at: tt_model_manifest::timefmt::utc_now(),
    };
    let card = review::annotate(&readme_of(&client, &copy, NOTHING).await?, &record);
    let card = card_tags::with_tag(&card, CATALOG_TAG, true);
    write_readme(
        &client,
        &copy,
        &format!("Review of {source} by {reviewer}"),
        card,
        NOTHING,
    )
    .await?;
    progress.emit(Event::done(
        format!("whitelisted {source} as {target}, listed in the community catalog"),
        None,
    ));
    progress.emit(Event::Next(format!(
        "withdraw it:  tt-model unwhitelist {target}"
    )));
    Ok(())
}

/// Removes the reviewed copy `id` (a `Tenstorrent/` repo) from the catalog; the repo and its
/// review are kept.
pub async fn unwhitelist(
    local: &Local,
    id: &str,
    progress: &dyn Progress,
) -> Result<(), LocalError> {
    check_repo_id(id)?;
    if !id
        .split('/')
        .next()
        .is_some_and(|org| org.eq_ignore_ascii_case(ORG))
    {
        return Err(LocalError::refused(
            "repo",
            format!(
                "{id} is not a Tenstorrent copy: unwhitelist takes {ORG}/<name> (a community package is delisted by its author with `tt-model unpublish`)."
            ),
        ));
    }
    let client = local.hub_client(true)?;
    let meta = meta_of(&client, id, NOTHING).await?;
    let readme = readme_of(&client, &meta, NOTHING).await?;
    let next = card_tags::with_tag(&readme, CATALOG_TAG, false);
    if next == readme {
        progress.emit(Event::skipped(
            format!("{id} is not listed"),
            Some("nothing to do".into()),
        ));
        return Ok(());
    }
    write_readme(
        &client,
        &meta,
        "Remove the reviewed copy from the community catalog",
        next,
        NOTHING,
    )
    .await?;
    progress.emit(Event::done(
        format!("delisted {id} from the community catalog"),
        Some("the repo and its review are kept".into()),
    ));
    Ok(())
}
