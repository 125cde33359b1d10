//! The community catalog (reference §5.6), through the `tt-model-catalog` tag of a package's
//! README frontmatter: `publish` lists a package, `unpublish` removes it, `search` finds
//! packages by tag.
//!
//! `publish` fails closed: the published manifest must be read and parsed (a missing manifest,
//! or one that is not a container package, is exempt from the card gate, as in the original),
//! the card must have `performance` and `limitations`, and only then is a private repo made
//! public (announced) and the tag written. `unpublish` removes the tag and never changes
//! visibility.

use tt_model_hub::card_tags::{self, CATALOG_TAG};
use tt_model_hub::hub::{HubClient, ModelRow, RepoMeta};
use tt_model_manifest::{WireError, WireManifest};

use crate::event::Event;
use crate::hub_access::{check_repo_id, consequence, meta_of, readme_of, write_readme};
use crate::progress::Progress;
use crate::state::WIRE_MANIFEST;
use crate::{Local, LocalError, publish};

const NOTHING: &str = "nothing was made public and the listing is unchanged";

/// Writes the README with the catalog tag `on`/off as one commit on the head read; `false`
/// when it already was so.
async fn set_listed(client: &HubClient, meta: &RepoMeta, on: bool) -> Result<bool, LocalError> {
    let readme = readme_of(client, meta, NOTHING).await?;
    let next = card_tags::with_tag(&readme, CATALOG_TAG, on);
    if next == readme {
        return Ok(false);
    }
    let summary = if on {
        "List the package in the community catalog"
    } else {
        "Remove the package from the community catalog"
    };
    write_readme(client, meta, summary, next, NOTHING).await?;
    Ok(true)
}

/// Lists package `id` in the community catalog (its card complete; a private repo made
/// public, said as a warning).
pub async fn list(local: &Local, id: &str, progress: &dyn Progress) -> Result<(), LocalError> {
    check_repo_id(id)?;
    let client = local.hub_client(true)?;
    let meta = meta_of(&client, id, NOTHING).await?;
    // The manifest, failing closed.
    if meta.siblings.iter().any(|s| s.rfilename == WIRE_MANIFEST) {
        let read_failed = format!("could not read the published manifest of {id}: {NOTHING}");
        let bytes = client
            .read_file(id, &meta.sha, WIRE_MANIFEST)
            .await
            .map_err(consequence(&read_failed))?;
        match WireManifest::from_json(&String::from_utf8_lossy(&bytes)) {
            Ok(wire) => {
                let gaps = publish::card_gaps(&wire);
                if !gaps.is_empty() {
                    return Err(LocalError::refused(
                        "card",
                        publish::gate_message(id, &gaps),
                    ));
                }
            }
            Err(WireError::NotAContainer) => {}
            Err(e) => {
                return Err(LocalError::refused(
                    "manifest",
                    format!(
                        "could not read the published manifest of {id} ({e}); it may have been pushed by a newer version of tt-model: {NOTHING}"
                    ),
                ));
            }
        }
    }
    if meta.private {
        client
            .set_private(id, false)
            .await
            .map_err(consequence(NOTHING))?;
        progress.emit(Event::Warning(format!(
            "{id} was private; made it public (a catalog listing is public)"
        )));
    }
    if set_listed(&client, &meta, true).await? {
        progress.emit(Event::done(
            format!("listed {id} in the community catalog"),
            None,
        ));
    } else {
        progress.emit(Event::skipped(format!("{id} is already listed"), None));
    }
    Ok(())
}

/// Removes package `id` from the community catalog; its visibility is unchanged.
pub async fn delist(local: &Local, id: &str, progress: &dyn Progress) -> Result<(), LocalError> {
    check_repo_id(id)?;
    let client = local.hub_client(true)?;
    let meta = meta_of(&client, id, NOTHING).await?;
    if set_listed(&client, &meta, false).await? {
        progress.emit(Event::done(
            format!("delisted {id}"),
            Some("its visibility is unchanged".into()),
        ));
    } else {
        progress.emit(Event::skipped(format!("{id} is not listed"), None));
    }
    Ok(())
}

/// The packages on the Hub carrying every tag of `tags` (and matching `query`), newest first,
/// at most `limit`.
pub async fn search(
    local: &Local,
    tags: &[&str],
    query: Option<&str>,
    limit: usize,
) -> Result<Vec<ModelRow>, LocalError> {
    let client = local.hub_client(false)?;
    client
        .list_models(tags, query, limit)
        .await
        .map_err(consequence("nothing was searched"))
}
