//! `tt-model weights TARGET [--check]`: put every weights repository of a package (the
//! primary, then each of `auxiliary_weights`) into this environment's HF cache at the revision
//! the package pins, or, with `--check`, say whether the cache already holds them.
//!
//! A fleet runs it twice (docs/serving.md, "Weights at the pinned revision"): a Job fills the
//! weights claim with it, and each server pod's init container checks the claim with
//! `--check`, so a pod starts only on weights at the right revision. The download is serve's
//! own prefetch ([`crate::weights`]): the same pin checks (a commit pin must be the commit the
//! Hub lists for it), `allow_patterns`/`ignore_patterns`, every file verified. Unlike serve,
//! nothing falls back to a download inside a container: a revision that cannot be fetched is a
//! refusal naming the repository and the revision.

use tt_model_hub::HubCache;
use tt_model_hub::download::{LocalStatus, local_status};

use crate::event::Event;
use crate::package::{Package, WeightsRef};
use crate::progress::{Progress, human_bytes};
use crate::{Local, LocalError, target, weights};

/// One repository in the cache after [`fill`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filled {
    /// `org/name`.
    pub repo_id: String,
    /// The revision the package pins.
    pub revision: String,
    /// The commit the cache holds for it.
    pub commit: String,
}

/// Fill the HF cache with the weights of the package `target` names (anything serve takes: a
/// staged `tt_kernel_manifest.json` or its directory, a pulled `org/name`), or with `check`
/// only look (no network): an error names every repository not complete at its pinned
/// revision.
pub async fn fill(
    local: &Local,
    target: &str,
    check: bool,
    printer: &dyn Progress,
) -> Result<Vec<Filled>, LocalError> {
    let pkg = target::resolve(local, target)?;
    if check {
        check_all(local, &pkg, target, printer)
    } else {
        fetch_all(local, &pkg, printer).await
    }
}

fn short(revision: &str) -> &str {
    &revision[..revision.len().min(8)]
}

async fn fetch_all(
    local: &Local,
    pkg: &Package,
    printer: &dyn Progress,
) -> Result<Vec<Filled>, LocalError> {
    let mut out = Vec::new();
    for w in pkg.all_weights() {
        let plan = weights::fetch(local, w, printer)
            .await
            .map_err(|e| refusal(local, w, &e))?;
        out.push(Filled {
            repo_id: w.repo_id.clone(),
            revision: w.revision.clone(),
            commit: plan.commit,
        });
    }
    if out.is_empty() {
        printer.emit(Event::Note(format!("{} serves no weights", pkg.name)));
    }
    Ok(out)
}

/// Why `w` could not be fetched, naming the repository, the pinned revision and the Hub asked:
/// every failure is a refusal here (exit 1), as a fleet's Job must fail rather than leave a
/// claim the pods cannot start on.
fn refusal(local: &Local, w: &WeightsRef, e: &tt_model_hub::HubError) -> LocalError {
    let what = if e.is_no_space() {
        "ran out of disk space fetching"
    } else {
        "cannot fetch"
    };
    LocalError::refused(
        "weights",
        format!(
            "{what} the weights {}@{} from {} into {}: {e}",
            w.repo_id,
            w.revision,
            local.hub().endpoint,
            local.hub().hub_cache.display()
        ),
    )
}

fn check_all(
    local: &Local,
    pkg: &Package,
    target: &str,
    printer: &dyn Progress,
) -> Result<Vec<Filled>, LocalError> {
    let cache_dir = local.hub().hub_cache.clone();
    let cache = HubCache::new(cache_dir.clone());
    let (mut out, mut missing) = (Vec::new(), Vec::new());
    for w in pkg.all_weights() {
        match local_status(&cache, &w.repo_id, &w.revision)? {
            LocalStatus::Complete { commit, .. } => {
                printer.emit(Event::step_done(
                    "weights",
                    format!("weights {}@{}", w.repo_id, short(&commit)),
                    Some("complete in the HF cache".into()),
                ));
                out.push(Filled {
                    repo_id: w.repo_id.clone(),
                    revision: w.revision.clone(),
                    commit,
                });
            }
            LocalStatus::Partial { bytes } => missing.push(format!(
                "{}@{} (partly fetched: {} on disk)",
                w.repo_id,
                w.revision,
                human_bytes(bytes)
            )),
            LocalStatus::Missing => missing.push(format!("{}@{}", w.repo_id, w.revision)),
        }
    }
    if missing.is_empty() {
        if out.is_empty() {
            printer.emit(Event::Note(format!("{} serves no weights", pkg.name)));
        }
        return Ok(out);
    }
    Err(LocalError::refused(
        "weights",
        format!(
            "not complete in the HF cache {}: {}\n  → tt-model weights {target}",
            cache_dir.display(),
            missing.join(", ")
        ),
    ))
}
