//! `tt-model publish <id>` / `unpublish <id>` (reference §5.6): list a package in the community
//! catalog, or remove it, through the `tt-model-catalog` tag of its README frontmatter.
//!
//! `publish` fails closed: the published manifest must be read and parsed (a missing manifest,
//! or one that is not a container package, is exempt from the card gate, as in the original),
//! the card must have `performance` and `limitations`, and only then is a private repo made
//! public (announced) and the tag written. `unpublish` removes the tag and never changes
//! visibility.

use tt_model_hub::card_tags::{self, CATALOG_TAG};
use tt_model_hub::hub::{HubClient, RepoMeta};
use tt_model_local::Local;
use tt_model_local::publish;
use tt_model_manifest::{WireError, WireManifest};

use super::hub;
use crate::args::{PublishArgs, UnpublishArgs};
use crate::printer::Printer;
use crate::{ExitStatus, UserError};
use tt_model_local::state::WIRE_MANIFEST;

const NOTHING: &str = "nothing was made public and the listing is unchanged";

/// Writes the README with the catalog tag `on`/off as one commit on the head read; `false`
/// when it already was so.
async fn set_listed(client: &HubClient, meta: &RepoMeta, on: bool) -> anyhow::Result<bool> {
    let readme = hub::readme_of(client, meta, NOTHING).await?;
    let next = card_tags::with_tag(&readme, CATALOG_TAG, on);
    if next == readme {
        return Ok(false);
    }
    let summary = if on {
        "List the package in the community catalog"
    } else {
        "Remove the package from the community catalog"
    };
    hub::write_readme(client, meta, summary, next, NOTHING).await?;
    Ok(true)
}

/// Runs `tt-model publish`.
pub fn publish(args: &PublishArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let id = &args.id;
    tt_model_local::hub_access::check_repo_id(id)?;
    let client = local.hub_client(true)?;
    let rt = crate::runtime()?;
    rt.block_on(async {
        let meta = hub::meta_of(&client, id, NOTHING).await?;
        // The manifest, failing closed.
        if meta.siblings.iter().any(|s| s.rfilename == WIRE_MANIFEST) {
            let bytes = client.read_file(id, &meta.sha, WIRE_MANIFEST).await.map_err(|e| {
                anyhow::Error::new(e).context(UserError(format!(
                    "could not read the published manifest of {id}: {NOTHING}"
                )))
            })?;
            match WireManifest::from_json(&String::from_utf8_lossy(&bytes)) {
                Ok(wire) => {
                    let gaps = publish::card_gaps(&wire);
                    if !gaps.is_empty() {
                        return Err(UserError(publish::gate_message(id, &gaps)).into());
                    }
                }
                Err(WireError::NotAContainer) => {}
                Err(e) => {
                    return Err(UserError(format!(
                        "could not read the published manifest of {id} ({e}); it may have been pushed by a newer version of tt-model: {NOTHING}"
                    ))
                    .into());
                }
            }
        }
        if meta.private {
            client
                .set_private(id, false)
                .await
                .map_err(hub::consequence(NOTHING))?;
            printer.warn(&format!("{id} was private; made it public (a catalog listing is public)"));
        }
        if set_listed(&client, &meta, true).await? {
            printer.done(&format!("listed {id} in the community catalog"), None);
        } else {
            printer.skipped(&format!("{id} is already listed"), None);
        }
        Ok(ExitStatus::Success)
    })
}

/// Runs `tt-model unpublish`.
pub fn unpublish(
    args: &UnpublishArgs,
    printer: &Printer,
    local: &Local,
) -> anyhow::Result<ExitStatus> {
    let id = &args.id;
    tt_model_local::hub_access::check_repo_id(id)?;
    let client = local.hub_client(true)?;
    let rt = crate::runtime()?;
    rt.block_on(async {
        let meta = hub::meta_of(&client, id, NOTHING).await?;
        if set_listed(&client, &meta, false).await? {
            printer.done(
                &format!("delisted {id}"),
                Some("its visibility is unchanged"),
            );
        } else {
            printer.skipped(&format!("{id} is not listed"), None);
        }
        Ok(ExitStatus::Success)
    })
}
