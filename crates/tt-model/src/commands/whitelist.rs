//! `tt-model whitelist <org/name>` / `unwhitelist Tenstorrent/<name>` (reference §5.6): a
//! Tenstorrent reviewer copies a community package into the `Tenstorrent` org and lists the copy;
//! `tt` then shows the copy and hides the source it names. Nothing is kept on this machine: the
//! review lives on the copy's card (`tt_model_hub::review`), so it cannot drift from what it
//! describes, and the source repo is never written.
//!
//! `whitelist` refuses a source that is not listed in the catalog, is private, has no weights
//! (they name the copy), or when no reviewer is logged in. An existing copy that records the
//! same source (case-insensitively) is re-recorded; one that records another source, or none,
//! is refused, naming it. `unwhitelist` removes the catalog tag from a `Tenstorrent/` copy and
//! keeps the repo.

use tt_model_hub::card_tags::{self, CATALOG_TAG};
use tt_model_hub::review::{self, ORG, Review};
use tt_model_local::Local;
use tt_model_local::state::WIRE_MANIFEST;
use tt_model_manifest::WireManifest;

use super::hub;
use crate::args::{UnwhitelistArgs, WhitelistArgs};
use crate::printer::Printer;
use crate::{ExitStatus, UserError};

const NOTHING: &str = "no copy was made or changed";

/// The copy's id: the weights repo's name under `Tenstorrent/`.
pub(crate) fn copy_id(weights_repo: &str) -> String {
    format!(
        "{ORG}/{}",
        weights_repo.rsplit('/').next().unwrap_or(weights_repo)
    )
}

/// Runs `tt-model whitelist`.
pub fn whitelist(
    args: &WhitelistArgs,
    printer: &Printer,
    local: &Local,
) -> anyhow::Result<ExitStatus> {
    let id = args.id.as_str();
    tt_model_local::hub_access::check_repo_id(id)?;
    let client = local.hub_client(true)?;
    crate::block_on(async {
        let reviewer = client
            .whoami()
            .await
            .map_err(hub::consequence(NOTHING))?
            .name;
        let meta = hub::meta_of(&client, id, NOTHING).await?;
        if !meta.tags.iter().any(|t| t == CATALOG_TAG) {
            return Err(UserError(format!(
                "{id} is not in the community catalog: a package is listed by its author (`tt-model publish {id}`) before it is reviewed."
            ))
            .into());
        }
        if meta.private {
            return Err(UserError(format!(
                "{id} is private: only a public package can be reviewed and copied."
            ))
            .into());
        }
        let bytes = client
            .read_file(id, &meta.sha, WIRE_MANIFEST)
            .await
            .map_err(hub::consequence(NOTHING))?;
        let wire = WireManifest::from_json(&String::from_utf8_lossy(&bytes)).map_err(|e| {
            UserError(format!(
                "the published {WIRE_MANIFEST} of {id} cannot be read: {e}"
            ))
        })?;
        let Some(weights) = wire.weights.as_ref().map(|w| w.repo_id.clone()) else {
            return Err(UserError(format!(
                "{id} has no weights repo in its manifest, and the copy is named after it ({ORG}/<weights name>)."
            ))
            .into());
        };
        let target = copy_id(&weights);
        let source = meta.id.clone();
        if client
            .duplicate_repo(&source, &target)
            .await
            .map_err(hub::consequence(NOTHING))?
        {
            printer.done(&format!("copied {source} → {target}"), Some("server-side"));
        } else {
            let existing = hub::meta_of(&client, &target, NOTHING).await?;
            match review::read(&hub::readme_of(&client, &existing, NOTHING).await?) {
                Some(r) if r.source.eq_ignore_ascii_case(&source) => {
                    printer.skipped(
                        &format!("{target} is already the copy of {source}"),
                        Some("re-recording the review"),
                    );
                }
                Some(r) => {
                    return Err(UserError(format!(
                        "{target} already holds the reviewed copy of {}, not {source}: nothing was overwritten.",
                        r.source
                    ))
                    .into());
                }
                None => {
                    return Err(UserError(format!(
                        "{target} exists and records no review: it was not made by `whitelist`, so it is not overwritten."
                    ))
                    .into());
                }
            }
        }
        let copy = hub::meta_of(&client, &target, NOTHING).await?;
        let record = Review {
            source: source.clone(),
            revision: Some(meta.sha.clone()).filter(|s| !s.is_empty()),
            reviewer: reviewer.clone(),
            reviewed_at: tt_model_manifest::timefmt::utc_now(),
        };
        let card = review::annotate(&hub::readme_of(&client, &copy, NOTHING).await?, &record);
        let card = card_tags::with_tag(&card, CATALOG_TAG, true);
        hub::write_readme(
            &client,
            &copy,
            &format!("Review of {source} by {reviewer}"),
            card,
            NOTHING,
        )
        .await?;
        printer.done(
            &format!("whitelisted {source} as {target}, listed in the community catalog"),
            None,
        );
        printer.next(&format!("withdraw it:  tt-model unwhitelist {target}"));
        Ok(ExitStatus::Success)
    })
}

/// Runs `tt-model unwhitelist`.
pub fn unwhitelist(
    args: &UnwhitelistArgs,
    printer: &Printer,
    local: &Local,
) -> anyhow::Result<ExitStatus> {
    let id = args.id.as_str();
    tt_model_local::hub_access::check_repo_id(id)?;
    if !id
        .split('/')
        .next()
        .is_some_and(|org| org.eq_ignore_ascii_case(ORG))
    {
        return Err(UserError(format!(
            "{id} is not a Tenstorrent copy: unwhitelist takes {ORG}/<name> (a community package is delisted by its author with `tt-model unpublish`)."
        ))
        .into());
    }
    let client = local.hub_client(true)?;
    crate::block_on(async {
        let meta = hub::meta_of(&client, id, NOTHING).await?;
        let readme = hub::readme_of(&client, &meta, NOTHING).await?;
        let next = card_tags::with_tag(&readme, CATALOG_TAG, false);
        if next == readme {
            printer.skipped(&format!("{id} is not listed"), Some("nothing to do"));
            return Ok(ExitStatus::Success);
        }
        hub::write_readme(
            &client,
            &meta,
            "Remove the reviewed copy from the community catalog",
            next,
            NOTHING,
        )
        .await?;
        printer.done(
            &format!("delisted {id} from the community catalog"),
            Some("the repo and its review are kept"),
        );
        Ok(ExitStatus::Success)
    })
}
