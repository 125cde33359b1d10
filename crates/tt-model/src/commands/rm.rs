//! `tt-model rm`: a package's containers, its image (unless another installed package uses the
//! same image reference), its pulled manifest and installed-packages entry, its caches (unless
//! `--keep-cache`) and, with `--include-weights`, its weights in the host HF cache.

use std::path::Path;

use tt_model_hub::HubCache;

use tt_model_engine::Client;
use tt_model_local::localdb::Entry;

use crate::args::RmArgs;
use crate::printer::Printer;
use crate::progress::human_bytes;
use crate::{ExitStatus, UsageError, UserError};
use tt_model_local::package::Package;
use tt_model_local::{Local, installed};
use tt_model_local::{host, target};

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
pub fn run(args: &RmArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    // Checked here, not by clap: `requires` counts a flag's default `false` as present.
    if args.yes && !args.all {
        return Err(UsageError(
            "--yes confirms `rm --all`; a single package is removed without asking:  tt-model rm <target>".into(),
        )
        .into());
    }
    crate::block_on(async {
        let client = host::engine().await?;
        let Some(target) = &args.target else {
            return remove_all(&client, local, args, printer).await;
        };
        let entries = installed::all(local, &mut |w| printer.warn(&w));
        remove(&client, local, &entries, target, args, printer).await?;
        Ok(ExitStatus::Success)
    })
}

/// `rm --all`: every installed package, after a confirmation (or `--yes`); a failure is
/// reported and the next package is removed; the failures are listed at the end (exit 1).
async fn remove_all(
    client: &Client,
    local: &Local,
    args: &RmArgs,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let entries = installed::all(local, &mut |w| printer.warn(&w));
    if entries.is_empty() {
        printer.skipped("nothing to remove", Some("no package is installed"));
        return Ok(ExitStatus::Success);
    }
    let ids: Vec<&str> = entries.iter().map(|e| e.repo_id.as_str()).collect();
    if !args.yes && !confirm(&ids)? {
        printer.skipped("nothing removed", Some("not confirmed"));
        return Ok(ExitStatus::Failure);
    }
    let mut failed = Vec::new();
    for id in &ids {
        // The database changes as packages go: each removal reads it afresh.
        let now = installed::all(local, &mut |_| {});
        if let Err(e) = remove(client, local, &now, id, args, printer).await {
            printer.error(&format!("{id}: {e:#}"));
            failed.push((id.to_string(), format!("{e:#}")));
        }
    }
    if failed.is_empty() {
        printer.done(&format!("removed {} package(s)", ids.len()), None);
        return Ok(ExitStatus::Success);
    }
    printer.error(&format!(
        "{} of {} package(s) could not be removed:",
        failed.len(),
        ids.len()
    ));
    for (id, why) in &failed {
        printer.note(&format!("{id}: {}", why.lines().next().unwrap_or_default()));
    }
    Ok(ExitStatus::Failure)
}

/// Asks on the terminal; without one, `--all` needs `--yes` (it never removes unasked).
fn confirm(ids: &[&str]) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(UserError(format!(
            "rm --all would remove {} installed package(s) ({}) and stdin is not a terminal to confirm it\n  → confirm up front: tt-model rm --all --yes",
            ids.len(),
            ids.join(", ")
        ))
        .into());
    }
    let mut err = std::io::stderr().lock();
    write!(
        err,
        "remove {} installed package(s): {}? [y/N] ",
        ids.len(),
        ids.join(", ")
    )?;
    err.flush()?;
    let mut line = String::new();
    stdin.lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

/// Removes one package (reference §4.12).
async fn remove(
    client: &Client,
    local: &Local,
    entries: &[Entry],
    target_name: &str,
    args: &RmArgs,
    printer: &Printer,
) -> anyhow::Result<()> {
    // A database entry keeps a package removable after its manifest is gone.
    let by_id = entries.iter().find(|e| e.repo_id == target_name);
    let (name, pkg) = match target::resolve_name(local, target_name) {
        Ok(resolved) => resolved,
        Err(_) if by_id.is_some() => (by_id.map(|e| e.name.clone()).unwrap_or_default(), None),
        Err(e) => return Err(e.into()),
    };
    let entry = by_id
        .or_else(|| pkg.as_ref().and_then(|p| installed::find(entries, p)))
        .cloned();
    let pkg = pkg.or_else(|| entry.as_ref().and_then(|e| Package::load(&e.manifest).ok()));
    for c in super::stop::running_of(client, &name, None, true).await? {
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
        // `package` keeps the engine's own build under `<repository>:build` (the layers the
        // next build reuses from cache; the shipped image is its reproducible rewrite): a
        // package that is removed takes that cache with it.
        let provisional = image
            .rsplit_once(':')
            .filter(|(r, t)| r.starts_with("tt-model/") && !t.contains('/'))
            .map(|(repository, _)| format!("{repository}:build"))
            .filter(|p| *p != image);
        if sharer.is_none()
            && let Some(provisional) = provisional
            && client.image(&provisional).await?.is_some()
        {
            match client.remove_image(&provisional).await {
                Ok(()) => printer.done(
                    &format!("removed build cache {provisional}"),
                    Some("the engine's own build, kept for the next package"),
                ),
                Err(e) => printer.warn(&format!("build cache {provisional} kept: {e}")),
            }
        }
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
        std::fs::remove_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", dir.display()))?;
        printer.done(
            "removed the pulled manifest",
            Some(&dir.display().to_string()),
        );
    }
    if let Some(e) = &entry {
        match local.db().remove(&e.repo_id) {
            Ok(Some(_)) => printer.done(
                &format!("forgot {}", e.repo_id),
                Some("installed packages database"),
            ),
            Ok(None) => {}
            Err(err) => printer.warn(&format!("{} stays listed: {err}", e.repo_id)),
        }
    }
    let state = local.package_state_dir(&name);
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
        if args.include_weights {
            std::fs::remove_dir_all(&repo.dir)
                .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", repo.dir.display()))?;
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
    Ok(())
}
