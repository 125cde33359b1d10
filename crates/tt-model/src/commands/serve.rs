//! `tt-model serve`: preflight, image check, weights, chips (under the allocation lock), the
//! container from a pure run spec, then the boot checklist until ready by both signals (the
//! kind's ready line AND the health endpoint), or a diagnosis card.

pub(crate) mod checklist;

use std::time::{Duration, Instant};

use tt_model_engine::bootlog::BootTracker;
use tt_model_engine::devices::{self, AllocLock, ChipError};
use tt_model_engine::diagnose::{Card, diagnose};
use tt_model_engine::labels;
use tt_model_engine::run_spec::{self, Chips, ServeRequest, compose, container_name};
use tt_model_engine::wait::{DEFAULT_READY_TIMEOUT, ReadySpec, WaitOutcome, wait_ready};
use tt_model_hub::env::HubEnv;

use crate::args::ServeArgs;
use crate::printer::{DiagnosisCard, Printer};
use crate::{ExitStatus, UserError};

use crate::local::package::{Package, Profile};
use crate::local::{host, image, installed, package, target, weights};

/// How long a serve waits for another serve's chip allocation.
const ALLOC_LOCK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the host-wide container scan may take.
const SCAN_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `tt-model serve`.
pub fn run(args: &ServeArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    crate::block_on(serve(args, printer))
}

/// The engine's diagnosis as the printer's card.
pub(crate) fn card_for_printer(c: &Card) -> DiagnosisCard {
    DiagnosisCard {
        cause: c.title.clone(),
        evidence: c.evidence.iter().cloned().collect(),
        consequence: Some(c.detail.clone()),
        actions: c.actions.clone(),
    }
}

fn passthrough(args: &ServeArgs) -> Result<Vec<String>, UserError> {
    let v: Vec<String> = args
        .passthrough
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if v.iter().any(|a| a == "--port" || a.starts_with("--port=")) {
        return Err(UserError(format!(
            "--port must come before the target so tt-model can publish it too:  tt-model serve --port N {}",
            args.target
        )));
    }
    Ok(v)
}

/// What `--device` / the manifest say about the card.
fn wants_card(args: &ServeArgs, pkg: &Package) -> Result<bool, UserError> {
    match args.device.as_deref() {
        None => Ok(!pkg.runs_without_card()),
        Some("none") => Ok(false),
        Some(other) => Err(UserError(format!(
            "--device takes `none` (run without a Tenstorrent device), got '{other}'; pick chips with --device-id"
        ))),
    }
}

struct Plan {
    req: ServeRequest,
    ready: ReadySpec,
}

#[allow(clippy::too_many_arguments)]
fn request(
    args: &ServeArgs,
    pkg: &Package,
    profile: &Profile,
    port: u16,
    chips: Chips,
    weights_on_host: bool,
    extra: &[String],
    timeout: Duration,
) -> Plan {
    let launch = pkg.launch(profile, port);
    let mut cmd = launch.argv;
    cmd.extend(extra.iter().cloned());
    let mut env = launch.env;
    if chips == Chips::None {
        // The image's own device check would refuse to start otherwise.
        env.insert("TT_MODEL_NO_DEVICE_CHECK".into(), "1".into());
    }
    let mut lab = std::collections::BTreeMap::new();
    lab.insert(
        labels::MANIFEST_SCHEMA.to_string(),
        pkg.schema_version.clone(),
    );
    lab.insert(
        labels::OPENAI_COMPATIBLE.to_string(),
        pkg.kind.starts_with("vllm").to_string(),
    );
    Plan {
        req: ServeRequest {
            package: pkg.name.clone(),
            profile: profile.name.clone(),
            image: pkg.image.clone(),
            target: args.target.clone(),
            kind: pkg.kind.clone(),
            port,
            expose: args.expose,
            health_path: pkg.health_path(),
            chips,
            weights_on_host,
            env,
            labels: lab,
            cmd,
            network: args.network.clone(),
        },
        ready: ReadySpec {
            ready_line: pkg.ready_line(),
            http_addr: format!("127.0.0.1:{port}"),
            health_path: pkg.health_path(),
            timeout,
            poll: Duration::from_millis(250),
        },
    }
}

/// How long `--refresh` waits for the Hub to say which commit is newest.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(3);

/// `serve --refresh` (reference §5.4): a pulled, unpinned package is re-pulled (manifest and,
/// when its digest changed, the image; not the weights) when the Hub's tip moved. Anything
/// that goes wrong is a warning: the installed package is served unchanged.
async fn refresh(args: &ServeArgs, pkg: Package, printer: &Printer) -> anyhow::Result<Package> {
    if args.local_only {
        printer.skipped("--refresh", Some("--local-only never asks the Hub"));
        return Ok(pkg);
    }
    let Some((id, installed_rev)) = installed::pulled_revision(&pkg) else {
        printer.skipped(
            "--refresh",
            Some(&format!("{} is not a pulled package", args.target)),
        );
        return Ok(pkg);
    };
    if let Some((_, Some(pin))) = target::split_repo(&args.target) {
        printer.skipped("--refresh", Some(&format!("{id} is pinned to {pin}")));
        return Ok(pkg);
    }
    let dl = tt_model_hub::Downloader::new(HubEnv::from_env());
    let short = |r: &str| r[..r.len().min(8)].to_string();
    let latest = match tokio::time::timeout(REFRESH_TIMEOUT, dl.resolve_revision(&id, "main")).await
    {
        Ok(Ok(sha)) => sha,
        Ok(Err(e)) => {
            printer.warn(&format!(
                "refresh failed ({e}); serving the installed package unchanged"
            ));
            return Ok(pkg);
        }
        Err(_) => {
            printer.warn(&format!(
                "refresh failed (the Hub did not answer within {}s); serving the installed package unchanged",
                REFRESH_TIMEOUT.as_secs()
            ));
            return Ok(pkg);
        }
    };
    if latest == installed_rev {
        printer.done(
            &format!("{id} is up to date"),
            Some(&format!("revision {}", short(&latest))),
        );
        return Ok(pkg);
    }
    printer.note(&format!(
        "refreshing {id}: {} → {}",
        short(&installed_rev),
        short(&latest)
    ));
    match super::pull::pull(&format!("{id}@{latest}"), false, printer).await {
        Ok(new) => Ok(new),
        Err(e) => {
            printer.warn(&format!(
                "refresh failed ({}); serving the installed package unchanged",
                format!("{e:#}").lines().next().unwrap_or_default()
            ));
            Ok(pkg)
        }
    }
}

async fn serve(args: &ServeArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let t0 = Instant::now();
    let resolved = if args.print {
        target::resolve_for_print(&args.target)
    } else {
        target::resolve(&args.target)
    };
    let pkg = match resolved {
        // First serve of a Hub package: install it (image and manifest; the weights follow
        // below as for any serve). `--print` has no side effects and `--local-only` stays off
        // the network, so both keep the refusal.
        Err(_) if !args.print && !args.local_only && target::is_unpulled_repo(&args.target) => {
            printer.note(&format!("{} is not installed: pulling it", args.target));
            super::pull::pull(&args.target, false, printer).await?
        }
        r => r?,
    };
    let pkg = if args.refresh && !args.print {
        refresh(args, pkg, printer).await?
    } else {
        pkg
    };
    let profile = pkg.profile(args.profile.as_deref())?;
    let extra = passthrough(args)?;
    let card = wants_card(args, &pkg)?;
    let requested = args
        .device_id
        .as_deref()
        .map(devices::parse_device_ids)
        .transpose()
        .map_err(|e| UserError(e.to_string()))?;
    if !card && requested.is_some() {
        return Err(UserError(
            "--device-id picks chips, but this serve runs without a device (--device none)".into(),
        )
        .into());
    }
    let timeout = args
        .timeout
        .as_deref()
        .map(host::parse_duration)
        .transpose()?
        .unwrap_or(DEFAULT_READY_TIMEOUT);
    let hub = HubEnv::from_env();
    let state_dir = target::package_state_dir(&pkg.name);
    let mounts_text = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let dev_root = std::path::Path::new(run_spec::DEV_TENSTORRENT);
    let facts = host::card_facts(dev_root, &mounts_text);
    let needed = profile.chip_count();

    if args.print {
        // Deterministic and side-effect free: no preflight, port 20000, best-effort chips.
        if pkg.image.ends_with(&format!(":{}", package::UNBUILT_TAG)) {
            printer.warn(&format!(
                "{} is not packaged yet: `{}` stands for the image `tt-model package --container` will tag",
                args.target, pkg.image
            ));
        }
        let chips = if !card {
            Chips::None
        } else if let Some(ids) = requested {
            Chips::Ids(ids)
        } else if facts.chips.len() >= needed {
            Chips::Ids(facts.chips[..needed].to_vec())
        } else {
            Chips::All
        };
        let on_host = pkg.all_weights().next().is_none() || !args.no_weights;
        let plan = request(
            args,
            &pkg,
            profile,
            host::FIRST_PORT,
            chips,
            on_host,
            &extra,
            timeout,
        );
        let host = host::host_facts(false, hub.hub_cache.clone(), state_dir, facts.hugepages_1g);
        printer.out(&compose(&plan.req, &host).to_shell());
        return Ok(ExitStatus::Success);
    }

    // Preflight.
    let client = host::engine().await?;
    let rootless = client.is_rootless().await.unwrap_or(false);
    if card {
        host::require_card(&facts)?;
    }
    let card_detail = if card {
        format!("{} chip(s) · hugepages-1G", facts.chips.len())
    } else {
        "no Tenstorrent device (runs on CPU)".to_string()
    };
    let rl = if rootless { " (rootless)" } else { "" };
    printer.done(
        "host ready",
        Some(&format!(
            "docker {}{rl} · {card_detail}",
            client.server_version()
        )),
    );
    if !card {
        printer.note("serving without a Tenstorrent device: the container gets no /dev/tenstorrent and no hugepages");
    }

    // Image: the recorded build, healed from the staged OCI layout when missing or stale.
    let image = match image::ensure(&client, &pkg, printer).await {
        Ok(facts) => facts,
        // A pulled package whose image is gone: re-pull the recorded revision (never the tip).
        Err(e) => match installed::pulled_revision(&pkg).filter(|_| !args.local_only) {
            Some((id, rev)) => {
                printer.note(format!("{e:#}").lines().next().unwrap_or_default());
                printer.note(&format!("re-pulling {id}@{}", &rev[..rev.len().min(8)]));
                super::pull::pull(&format!("{id}@{rev}"), false, printer).await?;
                image::ensure(&client, &pkg, printer).await.map_err(|e| {
                    UserError(format!(
                        "re-pulled {id}@{rev} but image {} is still not usable: {e:#}\n  → rebuild it with: tt-model package --container <tt-model.yaml>",
                        pkg.image
                    ))
                })?
            }
            None => return Err(e),
        },
    };
    printer.done(&format!("image {}", pkg.image), Some(image.short_id()));

    // One container per package and profile.
    let name = container_name(&pkg.name, &profile.name);
    if let Some(info) = client.container(&name).await? {
        if info.running {
            return Err(UserError(format!(
                "{name} is already running. Stop it first:  tt-model stop {}",
                args.target
            ))
            .into());
        }
        client.remove_container_force(&name).await?;
        printer.note(&format!(
            "removed a stopped container {name} ({})",
            info.status
        ));
    }

    // Weights.
    let outcome = weights::ensure_all(&pkg, args.no_weights, args.local_only, printer).await?;

    // Port.
    let port = match args.port {
        Some(p) => p,
        None => {
            let p = host::pick_free_port(host::FIRST_PORT).ok_or_else(|| {
                UserError(format!(
                    "no free port found in {}-{}; pass one explicitly with --port",
                    host::FIRST_PORT,
                    host::FIRST_PORT + host::PORT_TRIES - 1
                ))
            })?;
            if p != host::FIRST_PORT {
                printer.note(&format!(
                    "port {} is in use; serving on {p} instead",
                    host::FIRST_PORT
                ));
            }
            p
        }
    };

    // Bind-mount sources are created as the user (dockerd would create them as root).
    for (dir, _, _) in run_spec::state_mounts(&state_dir) {
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&hub.hub_cache)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", hub.hub_cache.display()))?;

    // Chips and create, atomically with respect to other serves.
    let lock = if card {
        let path = AllocLock::default_path();
        Some(
            tokio::task::spawn_blocking(move || AllocLock::acquire(&path, ALLOC_LOCK_TIMEOUT))
                .await??,
        )
    } else {
        None
    };
    let chips = if card {
        let claims = match tokio::time::timeout(SCAN_TIMEOUT, client.scan_claims()).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(UserError(
                    ChipError::CannotAsk(format!("docker ps/inspect failed: {e}")).to_string(),
                )
                .into());
            }
            Err(_) => {
                return Err(UserError(
                    ChipError::CannotAsk("docker ps/inspect timed out".into()).to_string(),
                )
                .into());
            }
        };
        let claimed = devices::claimed_chips(&claims, &facts.chips);
        let ids = devices::choose(
            requested.as_deref(),
            needed,
            &profile.name,
            &facts.chips,
            &claimed,
        )
        .map_err(|e| UserError(e.to_string()))?;
        if rootless {
            let problems = host::rootless_device_problems(&ids, host::ids().0, host::ids().1);
            if !problems.is_empty() {
                return Err(UserError(format!(
                    "rootless docker cannot open the chips:\n  {}",
                    problems.join("\n  ")
                ))
                .into());
            }
        }
        Chips::Ids(ids)
    } else {
        Chips::None
    };
    let plan = request(
        args,
        &pkg,
        profile,
        port,
        chips.clone(),
        outcome.weights_on_host(),
        &extra,
        timeout,
    );
    let host = host::host_facts(
        rootless,
        hub.hub_cache.clone(),
        state_dir,
        facts.hugepages_1g,
    );
    let spec = compose(&plan.req, &host);
    if printer.verbose() {
        printer.note(&spec.to_shell());
    }
    let t_create = Instant::now();
    client
        .create_and_start(&spec, |k| std::env::var(k).ok())
        .await?;
    drop(lock);
    let chips_text = match &chips {
        Chips::Ids(ids) => format!("chips {}", labels::format_devices(ids)),
        _ => "no device".into(),
    };
    printer.done(
        "container started",
        Some(&format!(
            "{name} · {chips_text} · {:.1}s",
            t_create.elapsed().as_secs_f64()
        )),
    );

    let host_ip = if args.expose { "0.0.0.0" } else { "127.0.0.1" };
    let endpoint = format!("http://{host_ip}:{port}");
    if args.detach {
        printer.note(&format!("endpoint (once ready): {endpoint}"));
        printer.next(&format!(
            "follow the boot: tt-model logs {} -f",
            args.target
        ));
        return Ok(ExitStatus::Success);
    }

    // Readiness.
    let mut tracker = BootTracker::new(&pkg.kind);
    let mut list = checklist::Checklist::new(printer, &pkg.kind);
    let t_wait = Instant::now();
    let cancel = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let outcome = wait_ready(
        &client,
        &name,
        &plan.ready,
        &mut tracker,
        |e| list.on_event(e),
        cancel,
    )
    .await;
    if matches!(outcome, Ok(WaitOutcome::Ready { .. })) {
        for e in tracker.finish_all() {
            list.on_event(&tt_model_engine::wait::WaitEvent::Boot(e));
        }
    }
    list.clear();
    match outcome? {
        WaitOutcome::Ready {
            elapsed, log_ready, ..
        } => {
            let total = t0.elapsed();
            printer.done(
                &format!("{} ready", args.target),
                Some(&format!("{:.1}s", total.as_secs_f64())),
            );
            let by = if log_ready.is_some() {
                "ready line + health endpoint"
            } else {
                "health endpoint"
            };
            printer.note(&format!("endpoint: {endpoint}  (ready by {by})"));
            printer.note(&format!("try: curl {endpoint}{}", pkg.health_path()));
            printer.next(&format!("follow the log: tt-model logs {} -f", args.target));
            printer.next(&format!("stop it: tt-model stop {}", args.target));
            if printer.verbose() {
                let overhead = total.saturating_sub(elapsed);
                printer.note(&format!(
                    "timing: serve→ready {:.2}s = serve overhead {:.2}s (preflight, image, weights, chips, create) + container boot {:.2}s",
                    total.as_secs_f64(),
                    overhead.as_secs_f64(),
                    t_wait.elapsed().min(elapsed).as_secs_f64()
                ));
            }
            Ok(ExitStatus::Success)
        }
        WaitOutcome::Detached { .. } => {
            // As the original: Ctrl-C stops the watching, not the server; exit 130.
            printer.skipped(
                "Ctrl-C: detached from the boot; the container keeps booting",
                Some(&name),
            );
            printer.note(&format!("endpoint (once ready): {endpoint}"));
            printer.next(&format!(
                "follow the boot: tt-model logs {} -f",
                args.target
            ));
            printer.next(&format!("stop it: tt-model stop {}", args.target));
            Ok(ExitStatus::Interrupted)
        }
        WaitOutcome::Exited { evidence, .. } | WaitOutcome::TimedOut { evidence, .. } => {
            let c = diagnose(&evidence, &args.target, &extra, port, timeout);
            printer.fail(&card_for_printer(&c));
            Ok(ExitStatus::Failure)
        }
    }
}
