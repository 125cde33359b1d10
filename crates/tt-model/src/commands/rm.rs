//! `tt-model rm`: a package's containers, its image (unless another package uses it), its
//! pulled manifest, its caches (unless `--keep-cache`) and, with `--include-weights`, its
//! weights in the host HF cache.

use std::path::Path;

use tt_model_hub::HubCache;
use tt_model_hub::env::HubEnv;

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
        let (name, pkg) = target::resolve_name(&args.target)?;
        let client = host::engine().await?;
        for c in super::stop::running_of(&client, &name, None, true).await? {
            client.remove_container_force(&c.name).await?;
            printer.done(&format!("removed container {}", c.name), Some(&c.status));
        }
        if let Some(pkg) = &pkg {
            let shared = super::list::installed()
                .into_iter()
                .filter_map(|(_, p)| p.ok())
                .any(|p| p.name != pkg.name && p.image == pkg.image);
            if shared {
                printer.skipped(
                    &format!("image {} kept", pkg.image),
                    Some("another pulled package uses it"),
                );
            } else if client.image(&pkg.image).await?.is_some() {
                match client.remove_image(&pkg.image).await {
                    Ok(()) => printer.done(&format!("removed image {}", pkg.image), None),
                    Err(e) => printer.warn(&format!("image {} kept: {e}", pkg.image)),
                }
            }
            // A pulled package's manifest directory goes too; a staged one is the user's.
            let pulled = target::state_root().join("pulled");
            if pkg.manifest_path.starts_with(&pulled)
                && let Some(dir) = pkg.manifest_path.parent()
            {
                std::fs::remove_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", dir.display()))?;
                printer.done(
                    "removed the pulled manifest",
                    Some(&dir.display().to_string()),
                );
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
