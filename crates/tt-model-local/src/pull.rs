//! The `pull` use case: install a container package from the Hub (reference §5.3). No card is
//! needed, only the engine.
//!
//! 1. Download the package repo at the revision, without its `image/` OCI layout, into
//!    tt-model's own pull cache, in the HF layout: an interrupted pull resumes, every file is
//!    verified (LFS sha256, git blob id), and the user's HF cache does not keep image layers
//!    that the engine already holds once loaded.
//! 2. Run the caller's check on the fetched manifest (serve's chip pre-check: a first serve
//!    that cannot get its chips downloads no image, as the original checks capacity first).
//! 3. Unless the engine already has the recorded build (by digest), download the layout at the
//!    same commit (or pull the pinned image from its registry) and load the image from it.
//! 4. Install the manifest as `pulled/<org>__<name>/tt_kernel_manifest.json` (temp file +
//!    rename, only after the image is in) and record the package in `installed.json`.
//! 5. Drop the downloaded layout; with the weights asked for, fetch them as serve does.
//!
//! `force` reinstalls whatever is there: a partial download of the package is discarded, and
//! the image layout is downloaded and loaded even when the engine already has the build.

use std::path::{Path, PathBuf};

use tt_model_engine::images::{ImageState, judge};
use tt_model_hub::Downloader;
use tt_model_hub::download::Snapshot;

use crate::event::Event;
use crate::image::{self, Via};
use crate::package::{Package, WIRE_MANIFEST};
use crate::progress::{Progress, human_bytes};
use crate::{Local, LocalError, host, installed, registry, target, weights};

/// What to pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PullRequest<'a> {
    /// The package: `org/name[@revision]` (default revision `main`).
    pub target: &'a str,
    /// Fetch its weights into the HF cache too.
    pub with_weights: bool,
    /// Reinstall what is there (see the module's docs).
    pub force: bool,
}

/// Where a package repo keeps its OCI image layout (an `allow`/`ignore` pattern: everything
/// under it).
const LAYOUT_DIR: &str = "image/";

impl Local {
    /// The pull cache: an HF-layout hub cache of tt-model's own.
    fn pull_cache(&self) -> PathBuf {
        self.root().join("pull-cache")
    }
}

/// Installs the package `req` names and returns it, with `check` judging the fetched manifest
/// before any image is downloaded (its error is the caller's, returned as it is).
pub async fn pull<E: From<LocalError>>(
    local: &Local,
    req: &PullRequest<'_>,
    progress: &dyn Progress,
    check: impl AsyncFnOnce(&Package) -> Result<(), E>,
) -> Result<Package, E> {
    let (id, rev) = target::split_repo(req.target).ok_or_else(|| {
        LocalError::refused(
            "target",
            format!(
                "{} is not a package id: expected <org>/<name>[@<revision>]",
                req.target
            ),
        )
    })?;
    let rev = rev.unwrap_or_else(|| "main".to_string());
    let client = host::engine().await?;

    // 1. The package repo without its image layout (manifest, card, code: small).
    let mut env = local.hub().clone();
    env.hub_cache = local.pull_cache();
    let endpoint = env.endpoint.clone();
    let dl = Downloader::new(env);
    if req.force {
        // Nothing half-downloaded is resumed: every file comes from the Hub again.
        drop_download(&dl, &id, progress);
    }
    let fetch = async |rev: &str, allow: &[String], ignore: &[String], key: &str| {
        let bar = progress.transfer(key, &id);
        let snap = dl.snapshot(&id, rev, allow, ignore, bar.as_ref()).await;
        bar.finish();
        snap.map_err(|source| LocalError::Fetch {
            what: format!("{id}@{rev}"),
            endpoint: endpoint.clone(),
            source: Box::new(source),
        })
    };
    progress.emit(Event::step_start("bundle", format!("fetching {id}")));
    let snap: Snapshot = fetch(&rev, &[], &[LAYOUT_DIR.into()], "bundle").await?;
    let commit = snap.commit.clone();
    let short = &commit[..commit.len().min(8)];
    progress.emit(Event::step_done(
        "bundle",
        format!("fetched {id}@{short}"),
        Some(format!(
            "{} files · {} downloaded",
            snap.plan.files.len(),
            human_bytes(snap.plan.bytes_to_fetch())
        )),
    ));
    let fetched = snap.dir.join(WIRE_MANIFEST);
    if !fetched.is_file() {
        return Err(LocalError::refused(
            "target",
            format!(
                "{id}@{short} holds no {WIRE_MANIFEST}: it is not a tt-model container package"
            ),
        )
        .into());
    }
    let pkg = Package::load(&fetched)?;
    check(&pkg).await?;

    // 3. The image: already loaded (by the recorded digest), or fetched and loaded from the
    //    repo's layout at the same commit.
    let digest = pkg.recorded_digest();
    let known = local
        .db()
        .get(&id)
        .ok()
        .flatten()
        .and_then(|e| e.known_loaded_id(digest.as_deref()).map(str::to_string));
    progress.emit(Event::step_start("image", format!("image {}", pkg.image)));
    let present = client.image(&pkg.image).await.map_err(LocalError::from)?;
    let layout = match judge(present, digest.as_deref(), known.as_deref()) {
        ImageState::Matches(_) if !req.force => {
            progress.emit(Event::step_done(
                "image",
                format!("image {} already loaded", pkg.image),
                None,
            ));
            None
        }
        _ if pkg.wire().container.image.in_registry() => {
            let under = local.pull_cache().join("registry");
            Some(registry::pull_layout(pkg.wire(), &under, progress).await?)
        }
        _ => {
            let image_snap = fetch(&commit, &[LAYOUT_DIR.into()], &[], "image").await?;
            progress.emit(Event::done(
                format!("fetched the image layout of {id}@{short}"),
                Some(format!(
                    "{} blobs · {} downloaded",
                    image_snap.plan.files.len(),
                    human_bytes(image_snap.plan.bytes_to_fetch())
                )),
            ));
            let dir = image_snap.dir.join(LAYOUT_DIR);
            if !dir.join("oci-layout").is_file() {
                return Err(LocalError::refused(
                    "image",
                    format!(
                        "{id}@{short} carries no image layout ({LAYOUT_DIR}oci-layout) and names no image registry, and image {} is not loaded: ask its publisher to push it again",
                        pkg.image
                    ),
                )
                .into());
            }
            Some(dir)
        }
    };
    let via = Via::Pull { id: &id };
    let loaded = match layout.as_deref() {
        Some(dir) if req.force => {
            image::reload_from(local, &client, &pkg, dir, via, progress).await
        }
        dir => image::ensure_from(local, &client, &pkg, dir, via, progress).await,
    };
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            // A blob that failed to load must not be trusted by the next pull.
            drop_download(&dl, &id, progress);
            drop_layout(local, layout.as_deref(), progress);
            return Err(e.into());
        }
    };
    drop_layout(local, layout.as_deref(), progress);
    if layout.is_some() {
        // The load's own line was reported by the image module; the stream settles the step.
        progress.emit(Event::StepEnd {
            key: "image".into(),
            detail: Some(loaded.short_id().to_string()),
        });
    }

    // 4. Install: the manifest, then the database entry.
    let pkg = installed::install_pulled(local, &id, &fetched, &commit, &loaded.id)?;

    // 5. The layout has served its purpose.
    drop_download(&dl, &id, progress);
    if req.with_weights {
        if pkg.all_weights().next().is_some() {
            weights::ensure_all(local, &pkg, false, false, progress).await?;
        } else {
            progress.emit(Event::skipped(
                "weights",
                Some("the package pins none".into()),
            ));
        }
    }
    progress.emit(Event::done(
        format!("pulled {id}"),
        Some(format!("revision {short}")),
    ));
    Ok(pkg)
}

/// Removes the pull cache's copy of `id` (a warning when it cannot).
fn drop_download(dl: &Downloader, id: &str, progress: &dyn Progress) {
    if let Ok(repo) = dl.cache().repo(id)
        && repo.dir.exists()
        && let Err(e) = std::fs::remove_dir_all(&repo.dir)
    {
        progress.emit(Event::Warning(format!(
            "the downloaded layout could not be removed ({}): {e}",
            repo.dir.display()
        )));
    }
}

/// Removes a layout pulled from a registry (one from the Hub snapshot goes with the download).
fn drop_layout(local: &Local, layout: Option<&Path>, progress: &dyn Progress) {
    if let Some(dir) = layout.filter(|d| d.starts_with(local.pull_cache().join("registry")))
        && let Err(e) = std::fs::remove_dir_all(dir)
    {
        progress.emit(Event::Warning(format!(
            "the pulled image layout could not be removed ({}): {e}",
            dir.display()
        )));
    }
}
