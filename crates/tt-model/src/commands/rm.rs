//! `tt-model rm`: a package's containers, its image (unless another installed package uses the
//! same image reference), its pulled manifest and installed-packages entry, its caches (unless
//! `--keep-cache`) and, with `--include-weights`, its weights in the host HF cache.

use std::path::Path;

use tt_model_hub::HubCache;
use tt_model_hub::env::HubEnv;

use tt_model_engine::localdb::Entry;

use super::serve::installed;
use super::serve::package::Package;
use super::serve::weights::human_bytes;
use super::serve::{host, target};
use crate::ExitStatus;
use crate::args::RmArgs;
use crate::printer::Printer;

/// Bytes under `p` (symlinks not followed).
pub(crate) fn dir_size(p: &Path) -> u64 {
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

/// Runs `tt-model rm`.
pub fn run(args: &RmArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let entries = super::list::installed(&mut |w| printer.warn(&w));
        // A database entry keeps a package removable after its manifest is gone.
        let by_id = entries.iter().find(|e| e.repo_id == args.target);
        let (name, pkg) = match target::resolve_name(&args.target) {
            Ok(resolved) => resolved,
            Err(_) if by_id.is_some() => (by_id.map(|e| e.name.clone()).unwrap_or_default(), None),
            Err(e) => return Err(e),
        };
        let entry = by_id
            .or_else(|| pkg.as_ref().and_then(|p| installed::find(&entries, p)))
            .cloned();
        let pkg = pkg.or_else(|| entry.as_ref().and_then(|e| Package::load(&e.manifest).ok()));
        let client = host::engine().await?;
        for c in super::stop::running_of(&client, &name, None, true).await? {
            client.remove_container_force(&c.name).await?;
            printer.done(&format!("removed container {}", c.name), Some(&c.status));
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
            if let Some(other) = sharer {
                printer.skipped(
                    &format!("image {image} kept"),
                    Some(&format!(
                        "another installed package uses it ({})",
                        other.repo_id
                    )),
                );
            } else if client.image(&image).await?.is_some() {
                match client.remove_image(&image).await {
                    Ok(()) => printer.done(&format!("removed image {image}"), None),
                    Err(e) => printer.warn(&format!("image {image} kept: {e}")),
                }
            }
        }
        // A pulled package's manifest directory goes too; a staged one is the user's.
        let pulled = target::state_root().join("pulled");
        let manifest = pkg
            .as_ref()
            .map(|p| p.manifest_path.clone())
            .or_else(|| entry.as_ref().map(|e| e.manifest.clone()));
        if let Some(dir) = manifest
            .filter(|m| m.starts_with(&pulled))
            .and_then(|m| m.parent().map(Path::to_path_buf))
            .filter(|d| d.exists())
        {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", dir.display()))?;
            printer.done(
                "removed the pulled manifest",
                Some(&dir.display().to_string()),
            );
        }
        if let Some(e) = &entry {
            match installed::db().remove(&e.repo_id) {
                Ok(Some(_)) => printer.done(
                    &format!("forgot {}", e.repo_id),
                    Some("installed packages database"),
                ),
                Ok(None) => {}
                Err(err) => printer.warn(&format!("{} stays listed: {err}", e.repo_id)),
            }
        }
        let state = target::package_state_dir(&name);
        if state.exists() {
            let size = human_bytes(dir_size(&state));
            if args.keep_cache {
                printer.skipped(
                    &format!("caches kept at {} ({size})", state.display()),
                    None,
                );
            } else {
                std::fs::remove_dir_all(&state)
                    .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", state.display()))?;
                printer.done(
                    &format!("removed caches {}", state.display()),
                    Some(&format!("freed {size}")),
                );
            }
        }
        if let Some(w) = pkg.as_ref().and_then(|p| p.weights.clone()) {
            let repo = HubCache::new(HubEnv::from_env().hub_cache).repo(&w.repo_id)?;
            if repo.dir.exists() {
                let size = human_bytes(dir_size(&repo.dir));
                if args.include_weights {
                    std::fs::remove_dir_all(&repo.dir).map_err(|e| {
                        anyhow::anyhow!("cannot remove {}: {e}", repo.dir.display())
                    })?;
                    printer.done(
                        &format!("removed weights {}", w.repo_id),
                        Some(&format!("freed {size}")),
                    );
                } else {
                    printer.skipped(
                        &format!("weights kept ({} · {size})", w.repo_id),
                        Some("--include-weights removes them too"),
                    );
                }
            }
        }
        Ok(ExitStatus::Success)
    })
}
