//! The `rm` use case for one package: its containers, its image (unless another installed
//! package uses the same reference) and the engine's build cache of it, its pulled manifest
//! and installed-packages entry, its caches (unless kept) and, when asked, its weights in the
//! host HF cache. Each step is reported as an [`Event`]; a failure to remove a file stops the
//! removal with the path, an image the engine keeps is a warning.

use std::path::Path;

use tt_model_engine::Client;
use tt_model_hub::HubCache;

use crate::event::Event;
use crate::localdb::Entry;
use crate::package::Package;
use crate::progress::{Progress, human_bytes};
use crate::{Local, LocalError, containers, host, installed, target};

/// What to remove besides the package itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RemoveRequest<'a> {
    /// The package: a staged manifest, a pulled repo id or an installed package's id.
    pub target: &'a str,
    /// Keep the package's caches (`--keep-cache`).
    pub keep_cache: bool,
    /// Remove its weights from the host HF cache too (`--include-weights`).
    pub include_weights: bool,
}

/// Bytes under `p` (symlinks not followed).
pub fn dir_size(p: &Path) -> u64 {
    let Ok(md) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !md.is_dir() {
        return md.len();
    }
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| dir_size(&e.path())).sum())
        .unwrap_or(0)
}

fn remove_dir(dir: &Path) -> Result<(), LocalError> {
    std::fs::remove_dir_all(dir).map_err(|detail| LocalError::Io {
        action: "remove",
        path: dir.to_path_buf(),
        detail,
    })
}

/// Removes one package; `entries` is the installed-packages database as read now (a
/// database entry keeps a package removable after its manifest is gone).
pub async fn remove(
    local: &Local,
    entries: &[Entry],
    req: &RemoveRequest<'_>,
    progress: &dyn Progress,
) -> Result<(), LocalError> {
    let by_id = entries.iter().find(|e| e.repo_id == req.target);
    let (name, pkg) = match target::resolve_name(local, req.target) {
        Ok(resolved) => resolved,
        Err(_) if by_id.is_some() => (by_id.map(|e| e.name.clone()).unwrap_or_default(), None),
        Err(e) => return Err(e),
    };
    let entry = by_id
        .or_else(|| pkg.as_ref().and_then(|p| installed::find(entries, p)))
        .cloned();
    let pkg = pkg.or_else(|| entry.as_ref().and_then(|e| Package::load(&e.manifest).ok()));
    let engine = host::engine().await?;
    let client = &engine;
    for c in containers::of_package(client, &name, None, true).await? {
        client.remove_container_force(&c.name).await?;
        progress.emit(Event::done(
            format!("removed container {}", c.name),
            Some(c.status.clone()),
        ));
    }
    let image = pkg
        .as_ref()
        .map(|p| p.image.clone())
        .or_else(|| entry.as_ref().map(|e| e.image.clone()));
    if let Some(image) = image {
        let this = |e: &Entry| match (&entry, &pkg) {
            (Some(mine), _) => e.repo_id == mine.repo_id,
            (None, Some(p)) => e.manifest == installed::canonical(&p.manifest_path),
            (None, None) => false,
        };
        let sharer = entries.iter().find(|e| !this(e) && e.image == image);
        remove_image(client, &image, sharer, progress).await?;
    }
    // A pulled package's manifest directory goes too; a staged one is the user's.
    let pulled = local.root().join("pulled");
    let manifest = pkg
        .as_ref()
        .map(|p| p.manifest_path.clone())
        .or_else(|| entry.as_ref().map(|e| e.manifest.clone()));
    if let Some(dir) = manifest
        .filter(|m| m.starts_with(&pulled))
        .and_then(|m| m.parent().map(Path::to_path_buf))
        .filter(|d| d.exists())
    {
        remove_dir(&dir)?;
        progress.emit(Event::done(
            "removed the pulled manifest",
            Some(dir.display().to_string()),
        ));
    }
    if let Some(e) = &entry {
        match local.db().remove(&e.repo_id) {
            Ok(Some(_)) => progress.emit(Event::done(
                format!("forgot {}", e.repo_id),
                Some("installed packages database".into()),
            )),
            Ok(None) => {}
            Err(err) => progress.emit(Event::Warning(format!("{} stays listed: {err}", e.repo_id))),
        }
    }
    let state = local.package_state_dir(&name);
    if state.exists() {
        let size = human_bytes(dir_size(&state));
        if req.keep_cache {
            progress.emit(Event::skipped(
                format!("caches kept at {} ({size})", state.display()),
                None,
            ));
        } else {
            remove_dir(&state)?;
            progress.emit(Event::done(
                format!("removed caches {}", state.display()),
                Some(format!("freed {size}")),
            ));
        }
    }
    let weights: Vec<_> = pkg
        .as_ref()
        .map(|p| p.all_weights().cloned().collect())
        .unwrap_or_default();
    let cache = HubCache::new(local.hub().hub_cache.clone());
    for w in weights {
        let repo = cache.repo(&w.repo_id)?;
        if !repo.dir.exists() {
            continue;
        }
        let size = human_bytes(dir_size(&repo.dir));
        if req.include_weights {
            remove_dir(&repo.dir)?;
            progress.emit(Event::done(
                format!("removed weights {}", w.repo_id),
                Some(format!("freed {size}")),
            ));
        } else {
            progress.emit(Event::skipped(
                format!("weights kept ({} · {size})", w.repo_id),
                Some("--include-weights removes them too".into()),
            ));
        }
    }
    Ok(())
}

/// The package's image, unless `sharer` (another installed package) uses it, and the engine's
/// own build of it: `package` keeps that under `<repository>:build` (the layers the next
/// build reuses from cache; the shipped image is its reproducible rewrite), and a package
/// that is removed takes that cache with it.
async fn remove_image(
    client: &Client,
    image: &str,
    sharer: Option<&Entry>,
    progress: &dyn Progress,
) -> Result<(), LocalError> {
    if let Some(other) = sharer {
        progress.emit(Event::skipped(
            format!("image {image} kept"),
            Some(format!(
                "another installed package uses it ({})",
                other.repo_id
            )),
        ));
        return Ok(());
    }
    if client.image(image).await?.is_some() {
        match client.remove_image(image).await {
            Ok(()) => progress.emit(Event::done(format!("removed image {image}"), None)),
            Err(e) => progress.emit(Event::Warning(format!("image {image} kept: {e}"))),
        }
    }
    let provisional = image
        .rsplit_once(':')
        .filter(|(r, t)| r.starts_with("tt-model/") && !t.contains('/'))
        .map(|(repository, _)| format!("{repository}:build"))
        .filter(|p| *p != image);
    if let Some(provisional) = provisional
        && client.image(&provisional).await?.is_some()
    {
        match client.remove_image(&provisional).await {
            Ok(()) => progress.emit(Event::done(
                format!("removed build cache {provisional}"),
                Some("the engine's own build, kept for the next package".into()),
            )),
            Err(e) => progress.emit(Event::Warning(format!(
                "build cache {provisional} kept: {e}"
            ))),
        }
    }
    Ok(())
}
