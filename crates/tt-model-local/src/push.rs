//! The `push` use case: upload a staged container package to a Hub repo (reference §1.4,
//! §5.2).
//!
//! 1. The staged dir must hold a container `tt_kernel_manifest.json` and an OCI layout.
//! 2. The repo is the request's, else `built.repo`; its visibility and catalog listing are read.
//! 3. Card gate, before any byte: a push that lists the package (`publish`, or a listed repo
//!    pushed without `private`) needs `card.performance` and `card.limitations`.
//! 4. A new repo is created private unless `public`; an existing repo's visibility changes
//!    only when asked, and the change is reported.
//! 5. One commit: README (Quickstart pointed at the repo, catalog tag as decided) +
//!    `tt_kernel_manifest.json` + `requirements.lock` + `code/**` + `image/**`, sending only
//!    what the Hub lacks; stale `code/**`/`image/**` files are deleted in the same commit.
//! 6. The push is recorded under `<state>/pushed/` ([`crate::push_record`]).
//!
//! A package whose manifest sets `image.registry` sends its image to that registry instead
//! (after the card gate, before the Hub commit, so the repo never points at a missing image);
//! the Hub repo then carries the manifest (which pins the registry's manifest digest), card,
//! lock and code, and any `image/**` an earlier push left there is pruned.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::publish::{self, Listing, Visibility};
use tt_model_hub::card_tags;
use tt_model_hub::upload::{self, LocalFile, PushOutcome};
use tt_model_manifest::WireManifest;

use crate::event::Event;
use crate::hub_access::{check_repo_id, consequence};
use crate::progress::{Progress, Transfer, human_bytes};
use crate::push_record::PushRecord;
use crate::state::WIRE_MANIFEST;
use crate::{Local, LocalError, registry};

/// What to push, and how the repo should be seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PushRequest<'a> {
    /// The staged package directory (holding `tt_kernel_manifest.json` and `image/`).
    pub dir: &'a Path,
    /// The repo (`ns/name`); `None`: the one the package records (`built.repo`).
    pub repo: Option<&'a str>,
    /// Make the repo private (and delist the package).
    pub private: bool,
    /// Make the repo public.
    pub public: bool,
    /// List the package in the community catalog.
    pub publish: bool,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The repo pushed to.
    pub repo: String,
    /// The upload's outcome (the commit, what was sent).
    pub outcome: PushOutcome,
    /// Where the push is recorded.
    pub record: PathBuf,
}

/// The refusal for a directory that is not a staged container package, with its remedies.
fn not_staged(dir: &Path, why: &str) -> LocalError {
    LocalError::refused(
        "dir",
        format!(
            "{} is not a staged container package (no {WIRE_MANIFEST} with a container block: {why}).\n  → build one:  tt-model package --container tt-model.yaml --out <root>, then push <root>/<name>\n  → or point push at the package directory itself (the one holding {WIRE_MANIFEST} and image/)",
            dir.display()
        ),
    )
}

/// The staged package's manifest (checked) and README text.
fn open_staged(dir: &Path) -> Result<(WireManifest, String), LocalError> {
    let manifest = dir.join(WIRE_MANIFEST);
    if !manifest.is_file() {
        return Err(not_staged(dir, "the file is missing"));
    }
    let wire = WireManifest::read(&manifest).map_err(|e| not_staged(dir, &e.to_string()))?;
    if !dir.join("image/oci-layout").is_file() {
        return Err(LocalError::refused(
            "dir",
            format!(
                "{}/image is not an OCI layout (no image/oci-layout): re-run `tt-model package --container tt-model.yaml`",
                dir.display()
            ),
        ));
    }
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
    Ok((wire, readme))
}

/// The files the repo will hold, the README as given; `image/` unless the image lives in a
/// registry.
fn package_files(
    dir: &Path,
    readme: String,
    with_image: bool,
) -> Result<Vec<LocalFile>, LocalError> {
    let mut files = vec![LocalFile::bytes("README.md", readme.into_bytes())];
    for name in &publish::TOP_FILES[1..] {
        let p = dir.join(name);
        if p.is_file() {
            files.push(LocalFile::disk(name, &p)?);
        }
    }
    let subs: &[&str] = if with_image {
        &["code", "image"]
    } else {
        &["code"]
    };
    for sub in subs {
        let d = dir.join(sub);
        if d.is_dir() {
            files.extend(upload::collect_dir(&d, sub)?);
        }
    }
    Ok(files)
}

/// Pushes the staged package `req` names.
pub async fn push(
    local: &Local,
    req: &PushRequest<'_>,
    progress: &dyn Progress,
) -> Result<Pushed, LocalError> {
    let dir = req.dir;
    let (wire, readme) = open_staged(dir)?;
    let Some(repo) = publish::target_repo(req.repo, &wire) else {
        return Err(LocalError::refused(
            "repo",
            format!(
                "{} records no target repo; pass --repo namespace/name.",
                dir.display()
            ),
        ));
    };
    check_repo_id(&repo)?;
    let client = local.hub_client(true)?;
    let keep = "nothing was sent; the repo is unchanged";

    // What the repo is now: does it exist, is it private, is it listed.
    let meta = client.repo_meta(&repo).await.map_err(consequence(keep))?;
    let listed_before = meta
        .as_ref()
        .is_some_and(|m| m.tags.iter().any(|t| t == card_tags::CATALOG_TAG));
    let requested = publish::requested_private(req.private, req.public, req.publish);
    let listing = publish::listing(listed_before, req.publish, req.private);

    // The card gate, before any byte is sent.
    if publish::gate_applies(listing) {
        let gaps = publish::card_gaps(&wire);
        if !gaps.is_empty() {
            return Err(LocalError::refused(
                "card",
                publish::gate_message(&repo, &gaps),
            ));
        }
    }

    // The image, when it lives in a registry: there before the Hub names it.
    let in_registry = wire.container.image.in_registry();
    let pinned_image = if in_registry {
        let (_, pinned) = registry::push(local, dir, &wire, progress)
            .await
            .map_err(consequence(keep))?;
        Some(pinned)
    } else {
        None
    };

    // The repo and its visibility.
    match publish::visibility(meta.as_ref().map(|m| m.private), requested) {
        Visibility::Create { private } => {
            client
                .create_repo(&repo, private)
                .await
                .map_err(consequence(keep))?;
            let how = if private { "private" } else { "public" };
            progress.emit(Event::done(format!("created {repo}"), Some(how.into())));
        }
        Visibility::Keep { .. } if requested.is_none() => {
            progress.emit(Event::Note(format!(
                "repo {repo} exists; leaving its visibility unchanged"
            )));
        }
        Visibility::Keep { .. } => {}
        Visibility::Change { private } => {
            client
                .set_private(&repo, private)
                .await
                .map_err(consequence(keep))?;
            let how = if private { "private" } else { "public" };
            progress.emit(Event::Warning(format!(
                "Changed visibility of {repo} to {how} (as requested)"
            )));
        }
    }

    // The files: the README repointed and carrying the listing decided above.
    let readme = card_tags::repoint_quickstart(&readme, &repo);
    let readme = card_tags::with_tag(&readme, card_tags::CATALOG_TAG, listing.listed());
    // Every package carries the package tag (`search` finds packages by it), and the tags `tt`
    // classifies bundles by (container, arch, kind, hardware), even when its card was rendered
    // by a tt-model that did not write them.
    let readme = card_tags::package_tags(&wire)
        .iter()
        .fold(readme, |r, t| card_tags::with_tag(&r, t, true));
    let files = package_files(dir, readme, !in_registry)?;
    if !in_registry {
        let blobs: Vec<&LocalFile> = files
            .iter()
            .filter(|f| f.path.starts_with("image/blobs/"))
            .collect();
        progress.emit(Event::Note(format!(
            "image layout: {} blobs, {}",
            blobs.len(),
            human_bytes(blobs.iter().map(|f| f.size).sum())
        )));
    }

    let bar: Arc<dyn Transfer> = progress.transfer("push", &repo).into();
    let summary = format!("Upload package {}", wire.name);
    let outcome = upload::upload(
        &client,
        &repo,
        &files,
        publish::PRUNED,
        &summary,
        bar.clone(),
    )
    .await;
    bar.finish();
    let outcome = outcome.map_err(consequence(
        "the repo keeps its previous commit (objects uploaded so far are kept by the Hub); re-run the same push to resume",
    ))?;
    if outcome.committed {
        progress.emit(Event::done(
            format!("uploaded to {repo}"),
            Some(format!(
                "{} files sent ({}) · {} unchanged · {} already on the Hub · {} pruned",
                outcome.sent.len(),
                human_bytes(outcome.bytes_sent),
                outcome.unchanged,
                outcome.already_on_hub,
                outcome.deleted.len()
            )),
        ));
    } else {
        progress.emit(Event::skipped(
            format!("nothing to upload: {repo} already holds this package"),
            Some(format!("{} files unchanged", outcome.unchanged)),
        ));
    }
    match listing {
        Listing::List => progress.emit(Event::done(
            format!("listed {repo} in the community catalog"),
            None,
        )),
        Listing::Keep => progress.emit(Event::done(format!("kept {repo} listed"), None)),
        Listing::Delist => progress.emit(Event::Warning(format!(
            "delisted {repo} (pushed --private)"
        ))),
        Listing::Unlisted => {}
    }
    let record = local.record_push(&PushRecord {
        repo: &repo,
        commit: &outcome.commit,
        dir,
        bytes_sent: outcome.bytes_sent,
        image: pinned_image.as_deref(),
    })?;
    Ok(Pushed {
        repo,
        outcome,
        record,
    })
}
