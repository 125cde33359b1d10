//! `tt-model pull <org/name[@rev]> [--with-weights]`: install a container package from the Hub
//! (reference §5.3). No card is needed, only the engine.
//!
//! 1. Download the package repo at the revision, without its `image/` OCI layout, into
//!    tt-model's own pull cache, in the HF layout: an interrupted pull resumes, every file is
//!    verified (LFS sha256, git blob id), and the user's HF cache does not keep image layers
//!    that the engine already holds once loaded.
//! 2. Unless the engine already has the recorded build (by digest), download the layout at the
//!    same commit and load the image from it.
//! 3. Install the manifest as `pulled/<org>__<name>/tt_kernel_manifest.json` (temp file +
//!    rename, only after the image is in) and record the package in `installed.json`.
//! 4. Drop the downloaded layout; `--with-weights` then fetches the weights as serve does.
//!
//! `--force` reinstalls whatever is there: a partial download of the package is discarded, and
//! the image layout is downloaded and loaded even when the engine already has the build.

use std::path::{Path, PathBuf};

use tt_model_engine::images::{ImageState, judge};
use tt_model_hub::Downloader;

use super::hub::registry;
use crate::args::PullArgs;
use crate::printer::Printer;
use crate::progress::{ByteBar, human_bytes};
use crate::{ExitStatus, UserError};
use tt_model_local::image::Via;
use tt_model_local::package::{Package, WIRE_MANIFEST};
use tt_model_local::weights;
use tt_model_local::{Local, host, image, installed, target};

/// Runs `tt-model pull`.
pub fn run(args: &PullArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    crate::block_on(async {
        pull_with(local, &args.id, args.with_weights, args.force, printer).await?;
        printer.next(&format!("tt-model serve {}", args.id));
        Ok(ExitStatus::Success)
    })
}

/// Where a package repo keeps its OCI image layout (an `allow`/`ignore` pattern: everything
/// under it).
const LAYOUT_DIR: &str = "image/";

/// The pull cache: an HF-layout hub cache of tt-model's own.
fn pull_cache(local: &Local) -> PathBuf {
    local.root().join("pull-cache")
}

/// Removes the pull cache's copy of `id` (warns when it cannot).
fn drop_download(dl: &Downloader, id: &str, printer: &Printer) {
    if let Ok(repo) = dl.cache().repo(id)
        && repo.dir.exists()
        && let Err(e) = std::fs::remove_dir_all(&repo.dir)
    {
        printer.warn(&format!(
            "the downloaded layout could not be removed ({}): {e}",
            repo.dir.display()
        ));
    }
}

/// Removes a layout pulled from a registry (one from the Hub snapshot goes with the download).
fn drop_layout(local: &Local, layout: Option<&Path>, printer: &Printer) {
    if let Some(dir) = layout.filter(|d| d.starts_with(pull_cache(local).join("registry")))
        && let Err(e) = std::fs::remove_dir_all(dir)
    {
        printer.warn(&format!(
            "the pulled image layout could not be removed ({}): {e}",
            dir.display()
        ));
    }
}

/// Installs `target` (`org/name[@rev]`) and returns the installed package. `serve` calls this
/// for a package id that is not installed yet.
pub(crate) async fn pull(
    local: &Local,
    target_id: &str,
    with_weights: bool,
    printer: &Printer,
) -> anyhow::Result<Package> {
    pull_with(local, target_id, with_weights, false, printer).await
}

/// [`pull`], reinstalling what is already there with `force`.
pub(crate) async fn pull_with(
    local: &Local,
    target_id: &str,
    with_weights: bool,
    force: bool,
    printer: &Printer,
) -> anyhow::Result<Package> {
    pull_checked(local, target_id, with_weights, force, printer, async |_| {
        Ok(())
    })
    .await
}

/// [`pull_with`], with `check` run on the fetched manifest before the image is downloaded:
/// serve's chip pre-check, so a first serve that cannot get its chips downloads no image
/// (the original checks capacity before any download too).
pub(crate) async fn pull_checked(
    local: &Local,
    target_id: &str,
    with_weights: bool,
    force: bool,
    printer: &Printer,
    check: impl AsyncFnOnce(&Package) -> anyhow::Result<()>,
) -> anyhow::Result<Package> {
    let (id, rev) = target::split_repo(target_id).ok_or_else(|| {
        UserError(format!(
            "{target_id} is not a package id: expected <org>/<name>[@<revision>]"
        ))
    })?;
    let rev = rev.unwrap_or_else(|| "main".to_string());
    let client = host::engine().await?;

    // 1. The package repo without its image layout (manifest, card, code: small).
    let mut env = local.hub().clone();
    env.hub_cache = pull_cache(local);
    let endpoint = env.endpoint.clone();
    let dl = Downloader::new(env);
    if force {
        // Nothing half-downloaded is resumed: every file comes from the Hub again.
        drop_download(&dl, &id, printer);
    }
    // `key`: the progress stream's step the bytes belong to.
    let fetch = |rev: String, allow: Vec<String>, ignore: Vec<String>, key: &'static str| {
        let (dl, id, endpoint) = (&dl, &id, &endpoint);
        async move {
            let bar = ByteBar::for_step(id, key, printer);
            let snap = dl.snapshot(id, &rev, &allow, &ignore, &bar).await;
            bar.finish();
            snap.map_err(|e| {
                anyhow::Error::new(e).context(format!("cannot fetch {id}@{rev} from {endpoint}"))
            })
        }
    };
    printer.step_start("bundle", &format!("fetching {id}"));
    let snap = fetch(rev, vec![], vec![LAYOUT_DIR.into()], "bundle").await?;
    let commit = snap.commit.clone();
    let short = &commit[..commit.len().min(8)];
    printer.step_done(
        "bundle",
        &format!("fetched {id}@{short}"),
        Some(&format!(
            "{} files · {} downloaded",
            snap.plan.files.len(),
            human_bytes(snap.plan.bytes_to_fetch())
        )),
    );
    let fetched = snap.dir.join(WIRE_MANIFEST);
    if !fetched.is_file() {
        return Err(UserError(format!(
            "{id}@{short} holds no {WIRE_MANIFEST}: it is not a tt-model container package"
        ))
        .into());
    }
    let pkg = Package::load(&fetched)?;
    check(&pkg).await?;

    // 2. The image: already loaded (by the recorded digest), or fetched and loaded from the
    //    repo's layout at the same commit.
    let digest = pkg.recorded_digest();
    let known = local
        .db()
        .get(&id)
        .ok()
        .flatten()
        .and_then(|e| e.known_loaded_id(digest.as_deref()).map(str::to_string));
    printer.step_start("image", &format!("image {}", pkg.image));
    let layout = match judge(
        client.image(&pkg.image).await?,
        digest.as_deref(),
        known.as_deref(),
    ) {
        ImageState::Matches(_) if !force => {
            printer.step_done(
                "image",
                &format!("image {} already loaded", pkg.image),
                None,
            );
            None
        }
        _ if pkg.wire().container.image.in_registry() => {
            let under = pull_cache(local).join("registry");
            Some(registry::pull_layout(pkg.wire(), &under, printer).await?)
        }
        _ => {
            let image_snap =
                fetch(commit.clone(), vec![LAYOUT_DIR.into()], vec![], "image").await?;
            printer.done(
                &format!("fetched the image layout of {id}@{short}"),
                Some(&format!(
                    "{} blobs · {} downloaded",
                    image_snap.plan.files.len(),
                    human_bytes(image_snap.plan.bytes_to_fetch())
                )),
            );
            let dir = image_snap.dir.join(LAYOUT_DIR);
            if !dir.join("oci-layout").is_file() {
                return Err(UserError(format!(
                    "{id}@{short} carries no image layout ({LAYOUT_DIR}oci-layout) and names no image registry, and image {} is not loaded: ask its publisher to push it again",
                    pkg.image
                ))
                .into());
            }
            Some(dir)
        }
    };
    let via = Via::Pull { id: &id };
    let loaded = match match layout.as_deref() {
        Some(dir) if force => image::reload_from(local, &client, &pkg, dir, via, printer).await,
        dir => image::ensure_from(local, &client, &pkg, dir, via, printer).await,
    } {
        Ok(l) => l,
        Err(e) => {
            // A blob that failed to load must not be trusted by the next pull.
            drop_download(&dl, &id, printer);
            drop_layout(local, layout.as_deref(), printer);
            return Err(e.into());
        }
    };
    drop_layout(local, layout.as_deref(), printer);
    if layout.is_some() {
        // The load's own line was printed by the library; the stream settles the step.
        printer.step_end("image", Some(loaded.short_id()));
    }

    // 3. Install: the manifest, then the database entry.
    let pkg = installed::install_pulled(local, &id, &fetched, &commit, &loaded.id)?;

    // 4. The layout has served its purpose.
    drop_download(&dl, &id, printer);
    if with_weights {
        if pkg.all_weights().next().is_some() {
            weights::ensure_all(local, &pkg, false, false, printer).await?;
        } else {
            printer.skipped("weights", Some("the package pins none"));
        }
    }
    printer.done(&format!("pulled {id}"), Some(&format!("revision {short}")));
    Ok(pkg)
}
