//! `tt-model serve`, in three steps: the library's plan (what the user asked for, checked,
//! and the container composed from it; `--print` stops there) and start (preflight, image,
//! weights, chips under the allocation lock, the container from a pure run spec), both in
//! `tt_model_local::serve`, then [`watch`] (the boot checklist until ready by both signals,
//! the kind's ready line AND the health endpoint, or a diagnosis card).

pub(crate) mod checklist;
mod fleet;
pub(crate) mod watch;

use std::time::Instant;

use tt_model_engine::run_spec;
use tt_model_local::host::{self, CardFacts};
use tt_model_local::package::{self, Package};
use tt_model_local::serve::{self as serving, ServeOptions};
use tt_model_local::{Local, target};

use crate::ExitStatus;
use crate::args::{PrintFormat, ServeArgs, serve_argv};
use crate::printer::Printer;

/// Runs `tt-model serve`.
pub fn run(args: &ServeArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    // A misspelt serve option would reach the server silently (and fail there, or not at all).
    let cmd = crate::args::command();
    for (given, meant) in serve_argv::near_misses(&cmd, &args.passthrough) {
        printer.warn(&serve_argv::near_miss_warning(&given, &meant));
    }
    crate::block_on(serve(args, printer, local))
}

/// The package the target names: a staged or pulled one, an authoring manifest for
/// `--print`, or a Hub package installed first; refreshed with `--refresh`.
async fn resolve(
    args: &ServeArgs,
    options: &ServeOptions,
    facts: &CardFacts,
    printer: &Printer,
    local: &Local,
) -> anyhow::Result<Package> {
    let resolved = if args.print.is_some() {
        target::resolve_for_print(local, &args.target)
    } else {
        target::resolve(local, &args.target)
    };
    let pkg = match resolved {
        // First serve of a Hub package: install it (image and manifest; the weights follow
        // below as for any serve). `--print` has no side effects and `--local-only` stays off
        // the network, so both keep the refusal.
        Err(_)
            if args.print.is_none()
                && !args.local_only
                && target::is_unpulled_repo(local, &args.target) =>
        {
            printer.note(&format!("{} is not installed: pulling it", args.target));
            // The chips are judged on the fetched manifest, before the image is downloaded.
            let check = async |pkg: &Package| serving::precheck(options, pkg, facts).await;
            {
                let req = tt_model_local::pull::PullRequest {
                    target: &args.target,
                    ..Default::default()
                };
                tt_model_local::pull::pull(local, &req, printer, check).await?
            }
        }
        r => r?,
    };
    if args.refresh && args.print.is_none() {
        Ok(serving::refresh::refresh(options, pkg, local, printer).await)
    } else {
        Ok(pkg)
    }
}

async fn serve(args: &ServeArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let t0 = Instant::now();
    // The original's v5/v6 overrides: a container package has nothing they change.
    for (flag, given) in [("--force", args.force), ("--arch", args.arch.is_some())] {
        if given {
            printer.skipped(
                flag,
                Some("applies only to the original's v5/v6 bundles; a container package has no such override"),
            );
        }
    }
    let mounts_text = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let dev_root = std::path::Path::new(run_spec::DEV_TENSTORRENT);
    let facts = host::card_facts(dev_root, &mounts_text);
    let options = args.options();
    let pkg = resolve(args, &options, &facts, printer, local).await?;
    // Not under `--local-only`, `--no-update-check`, `--refresh` (which asks anyway) or
    // `--print`.
    if !(args.local_only || args.no_update_check || args.refresh || args.print.is_some()) {
        serving::refresh::advise(&args.target, &pkg, local, printer).await;
    }
    let settings = serving::settings(&options, &pkg)?;

    if args.print == Some(PrintFormat::K8s) {
        printer.out_raw(&fleet::fleet_yaml(
            args, &options, &pkg, &settings, local, printer,
        )?);
        return Ok(ExitStatus::Success);
    }
    if args.print.is_some() {
        if pkg.image.ends_with(&format!(":{}", package::UNBUILT_TAG)) {
            printer.warn(&format!(
                "{} is not packaged yet: `{}` stands for the image `tt-model package --container` will tag",
                args.target, pkg.image
            ));
        }
        let spec = serving::print_spec(&options, &pkg, &settings, &facts, local);
        printer.out(&spec.to_shell());
        return Ok(ExitStatus::Success);
    }
    let started = serving::start(&options, &pkg, &settings, &facts, local, printer).await?;
    watch::watch(args, &pkg, &settings, started, t0, printer).await
}
