//! `tt-model rm`: a package's containers, its image (unless another installed package uses the
//! same image reference), its pulled manifest and installed-packages entry, its caches (unless
//! `--keep-cache`) and, with `--include-weights`, its weights in the host HF cache
//! (`tt_model_local::remove`). Here: the flags, `--all`'s confirmation and its summary.

use tt_model_local::localdb::Entry;
use tt_model_local::remove::{self, RemoveRequest};
use tt_model_local::{Local, installed};

use crate::args::RmArgs;
use crate::printer::Printer;
use crate::{ExitStatus, UsageError, UserError};

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
        let Some(target) = &args.target else {
            return remove_all(local, args, printer).await;
        };
        let entries = installed::all(local, &mut |w| printer.warn(&w));
        remove(local, &entries, target, args, printer).await?;
        Ok(ExitStatus::Success)
    })
}

/// `rm --all`: every installed package, after a confirmation (or `--yes`); a failure is
/// reported and the next package is removed; the failures are listed at the end (exit 1).
async fn remove_all(local: &Local, args: &RmArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
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
        if let Err(e) = remove(local, &now, id, args, printer).await {
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

/// Removes one package (reference §4.12), its steps drawn as they are reported.
async fn remove(
    local: &Local,
    entries: &[Entry],
    target: &str,
    args: &RmArgs,
    printer: &Printer,
) -> anyhow::Result<()> {
    let req = RemoveRequest {
        target,
        keep_cache: args.keep_cache,
        include_weights: args.include_weights,
    };
    remove::remove(local, entries, &req, printer).await?;
    Ok(())
}
