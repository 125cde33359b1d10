//! serve's image step (reference §4.4): is the image the package records loaded, and if not,
//! can the staged OCI layout beside the manifest heal it?
//!
//! "The recorded build" is the manifest's image digest. The installed-packages database may
//! know the id this engine gave that digest (a containerd image store names images by
//! manifest digest), which counts as a match too. A package that records no digest is judged
//! by its tag alone.

use std::path::Path;

use tt_model_engine::Client;
use tt_model_engine::images::{ImageFacts, ImageState, judge};
use tt_model_engine::oci_load::LoadError;
use tt_model_oci::OciLayout;

use crate::event::Event;
use crate::installed;
use crate::localdb::{Entry, Source};
use crate::package::{Package, WIRE_MANIFEST};
use crate::progress::{Progress, human_bytes};
use crate::{Local, LocalError};

/// The command that needed the image: the remedies must fit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via<'a> {
    /// `serve` of a staged or installed package.
    Serve,
    /// `pull <id>`: the layout came from the Hub a moment ago.
    Pull {
        /// The package id pulled.
        id: &'a str,
    },
}

/// What the user can run next, for the refusal; every line is a runnable command.
fn remedies(name: &str, via: Via<'_>) -> String {
    match via {
        Via::Serve => format!(
            "  → serve the staged package: tt-model serve <out-dir>/{name}/{WIRE_MANIFEST}\n  \
             → pull it: tt-model pull <org>/{name}\n  \
             → build it: tt-model package --container <tt-model.yaml>"
        ),
        // The downloaded copy is deleted on failure, so pulling again fetches every blob anew.
        Via::Pull { id } => format!(
            "  → the downloaded layout was deleted; pull again to fetch it afresh: tt-model pull {id}\n  \
             → if it fails the same way, the package on the Hub is damaged: ask its publisher to push it again"
        ),
    }
}

/// What is wrong with the loaded image, in one sentence.
fn problem(pkg: &Package, state: &ImageState) -> String {
    match state {
        ImageState::Missing => format!("image {} is not loaded in docker", pkg.image),
        ImageState::Different { facts, expected } => format!(
            "image {} is a different build than the package records: expected {expected}, loaded {}",
            pkg.image, facts.id
        ),
        // Only reached when forced (`pull --force`).
        ImageState::Matches(_) => format!("image {} is loaded; forced to load it again", pkg.image),
    }
}

/// serve's image step: the package's image, loaded from the staged layout beside its manifest
/// (`<manifest dir>/image`) when missing or another build, and the loaded id recorded in the
/// installed-packages database; refuses (with the digests) when it cannot be healed.
pub async fn ensure(
    local: &Local,
    client: &Client,
    pkg: &Package,
    printer: &dyn Progress,
) -> Result<ImageFacts, LocalError> {
    let layout = pkg
        .manifest_path
        .parent()
        .map(|d| d.join("image"))
        .filter(|d| d.join("oci-layout").is_file());
    let entries = local.db().all().unwrap_or_else(|e| {
        printer.emit(Event::Warning(e.to_string()));
        Vec::new()
    });
    let entry = installed::find(&entries, pkg);
    let (facts, loaded) = heal(
        client,
        pkg,
        layout.as_deref(),
        entry,
        Via::Serve,
        false,
        printer,
    )
    .await?;
    if loaded {
        let digest = pkg.recorded_digest();
        remember(
            local,
            pkg,
            entry.map(|e| e.repo_id.clone()),
            digest.as_deref(),
            &facts.id,
            printer,
        );
    }
    Ok(facts)
}

/// The package's image, loaded from `layout` (an OCI layout directory) when missing or another
/// build. Records nothing: a caller installing the package (pull) records it itself.
pub async fn ensure_from(
    local: &Local,
    client: &Client,
    pkg: &Package,
    layout: Option<&Path>,
    via: Via<'_>,
    printer: &dyn Progress,
) -> Result<ImageFacts, LocalError> {
    let entries = local.db().all().unwrap_or_default();
    let entry = installed::find(&entries, pkg);
    Ok(heal(client, pkg, layout, entry, via, false, printer)
        .await?
        .0)
}

/// The package's image loaded from `layout` even when the engine already has the recorded
/// build (`pull --force`: reinstall whatever is there), then judged as [`ensure_from`] does.
pub async fn reload_from(
    local: &Local,
    client: &Client,
    pkg: &Package,
    layout: &Path,
    via: Via<'_>,
    printer: &dyn Progress,
) -> Result<ImageFacts, LocalError> {
    let entries = local.db().all().unwrap_or_default();
    let entry = installed::find(&entries, pkg);
    Ok(heal(client, pkg, Some(layout), entry, via, true, printer)
        .await?
        .0)
}

/// Judge, load from `layout` if needed (always, with `force`), judge again. Returns the facts
/// and whether a load happened. `entry` supplies the id this engine is known to give the
/// recorded digest.
#[allow(clippy::too_many_arguments)]
async fn heal(
    client: &Client,
    pkg: &Package,
    layout: Option<&Path>,
    entry: Option<&Entry>,
    via: Via<'_>,
    force: bool,
    printer: &dyn Progress,
) -> Result<(ImageFacts, bool), LocalError> {
    let recorded = pkg.recorded_digest();
    let digest = recorded.as_deref();
    let known = entry.and_then(|e| e.known_loaded_id(digest));
    let state = judge(client.image(&pkg.image).await?, digest, known);
    if let ImageState::Matches(facts) = &state
        && !force
    {
        return Ok((facts.clone(), false));
    }
    let Some(layout_dir) = layout else {
        return Err(LocalError::refused(
            "image",
            format!("{}.\n{}", problem(pkg, &state), remedies(&pkg.name, via)),
        ));
    };

    printer.emit(Event::Note(format!(
        "{}; loading it from {}",
        problem(pkg, &state),
        layout_dir.display()
    )));
    let refused = |e: &dyn std::fmt::Display| {
        LocalError::refused("image", format!("{e}.\n{}", remedies(&pkg.name, via)))
    };
    let layout = OciLayout::open(layout_dir).map_err(|e| refused(&e))?;
    if let Some(d) = digest {
        layout.expect(d).map_err(|e| refused(&e))?;
    }
    // The archive's bytes as the image step's progress (tt's `progress` events too).
    let bar: std::sync::Arc<dyn crate::progress::Transfer> = printer
        .transfer("image", &format!("image {}", pkg.image))
        .into();
    bar.total(layout.archive_size(&pkg.image));
    let on_bytes = {
        let bar = bar.clone();
        std::sync::Arc::new(move |n| bar.bytes(n))
    };
    let result = client
        .load_oci_layout_with(&layout, &pkg.image, on_bytes)
        .await;
    bar.finish();
    let loaded = match result {
        Ok(l) => l,
        // The engine being unreachable is not the layout's fault: keep the error chain.
        Err(e @ (LoadError::Request { .. } | LoadError::Engine(_))) => return Err(e.into()),
        Err(e) => return Err(refused(&e)),
    };
    let hex = loaded.id.trim_start_matches("sha256:");
    printer.emit(Event::done(
        format!("loaded image {}", pkg.image),
        Some(format!(
            "{} from {} ({})",
            &hex[..hex.len().min(12)],
            layout_dir.display(),
            human_bytes(loaded.bytes)
        )),
    ));

    // The load checked the tag; judge again as a fresh serve would.
    match judge(client.image(&pkg.image).await?, digest, Some(&loaded.id)) {
        ImageState::Matches(facts) => Ok((facts, true)),
        still => Err(LocalError::refused(
            "image",
            format!(
                "loaded {} but it is still not the recorded build: {}.\n{}",
                layout_dir.display(),
                problem(pkg, &still),
                remedies(&pkg.name, via)
            ),
        )),
    }
}

/// Records the id this engine gave the image, creating a staged entry for a package the
/// database did not know. A database problem is a warning: the serve goes on.
fn remember(
    local: &Local,
    pkg: &Package,
    id: Option<String>,
    digest: Option<&str>,
    loaded_id: &str,
    printer: &dyn Progress,
) {
    let db = local.db();
    let result = match id {
        Some(id) => db.set_loaded_id(&id, digest, loaded_id).map(|_| ()),
        None => {
            let mut e = installed::entry_for(pkg, &pkg.name, Source::Staged);
            e.image_loaded_id = Some(loaded_id.to_string());
            db.record(e)
        }
    };
    if let Err(e) = result {
        printer.emit(Event::Warning(format!("the load is not recorded: {e}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `→` line is a command that can be run as printed, and fits the command that failed.
    #[test]
    fn remedies_fit_the_failed_command_and_are_runnable() {
        for via in [Via::Serve, Via::Pull { id: "acme/demo" }] {
            let text = remedies("demo", via);
            for line in text.lines() {
                if line.contains("tt-model package") {
                    assert!(line.contains("--container"), "{via:?}: {line}");
                }
            }
        }
        let pull = remedies("demo", Via::Pull { id: "acme/demo" });
        assert!(pull.contains("tt-model pull acme/demo"), "{pull}");
        assert!(
            !pull.contains("<org>"),
            "a placeholder is not runnable: {pull}"
        );
        assert!(
            !pull.contains("tt-model package"),
            "pull has no manifest to build: {pull}"
        );
        assert!(!pull.contains("tt-model serve"), "{pull}");
    }
}
