//! serve's start: the preflight (engine, card), the image (healed from the staged layout, or
//! re-pulled), one container per package and profile, the weights, the port, and the chips
//! chosen and the container created under the allocation lock.

use std::time::{Duration, Instant};

use tt_model_engine::Client;
use tt_model_engine::run_spec::{self, Chips, compose, container_name};
use tt_model_oci::labels;

use super::plan::{self, Plan, ServeOptions, Settings};
use crate::devices::{self, AllocLock, ChipError};
use crate::event::Event;
use crate::host::{self, CardFacts};
use crate::package::Package;
use crate::progress::Progress;
use crate::pull::{self, PullRequest};
use crate::{Local, LocalError, image, installed, weights};

/// How long a serve waits for another serve's chip allocation.
const ALLOC_LOCK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the host-wide container scan may take.
const SCAN_TIMEOUT: Duration = Duration::from_secs(30);

/// A container serve started.
pub struct Started {
    /// The engine it runs in (the watch reads its log and state there).
    pub client: Client,
    /// The container's name.
    pub name: String,
    /// The host port it publishes.
    pub port: u16,
    /// The plan it was created from.
    pub plan: Plan,
}

fn create_dir(dir: &std::path::Path) -> Result<(), LocalError> {
    std::fs::create_dir_all(dir).map_err(|detail| LocalError::Io {
        action: "create",
        path: dir.to_path_buf(),
        detail,
    })
}

/// Checks the host, readies the image, weights, port and chips, and starts the container.
pub async fn start(
    o: &ServeOptions,
    pkg: &Package,
    s: &Settings,
    facts: &CardFacts,
    local: &Local,
    progress: &dyn Progress,
) -> Result<Started, LocalError> {
    let card = s.card;
    let profile = &s.profile;
    let needed = profile.chip_count();
    let hub_cache = &local.hub().hub_cache;
    let state_dir = local.package_state_dir(&pkg.name);

    // Preflight.
    progress.emit(Event::step_start("host", "checking the host"));
    let client = host::engine().await?;
    let rootless = client.is_rootless().await.unwrap_or(false);
    if card {
        host::require_card(facts)?;
    }
    let card_detail = if card {
        format!("{} chip(s) · hugepages-1G", facts.chips.len())
    } else {
        "no Tenstorrent device (runs on CPU)".to_string()
    };
    let rl = if rootless { " (rootless)" } else { "" };
    progress.emit(Event::step_done(
        "host",
        "host ready",
        Some(format!(
            "docker {}{rl} · {card_detail}",
            client.server_version()
        )),
    ));
    if !card {
        progress.emit(Event::Note("serving without a Tenstorrent device: the container gets no /dev/tenstorrent and no hugepages".into()));
    }

    // One container per package and profile.
    let name = container_name(&pkg.name, &profile.name);
    if let Some(info) = client.container(&name).await? {
        if info.running {
            return Err(LocalError::refused(
                "target",
                format!(
                    "{name} is already running. Stop it first:  tt-model stop {}",
                    o.target
                ),
            ));
        }
        client.remove_container_force(&name).await?;
        progress.emit(Event::Note(format!(
            "removed a stopped container {name} ({})",
            info.status
        )));
    }

    // The chips, before any download (image or weights): a full card is refused now, not
    // after the bytes, as the original's capacity pre-check does. The allocation itself
    // happens under the lock below.
    if card {
        choose_chips(&client, s, facts, needed, rootless).await?;
    }

    // Image: the recorded build, healed from the staged OCI layout when missing or stale.
    progress.emit(Event::step_start("image", format!("image {}", pkg.image)));
    let image = match image::ensure(local, &client, pkg, progress).await {
        Ok(facts) => facts,
        // A pulled package whose image is gone: re-pull the recorded revision (never the tip).
        Err(e) => match installed::pulled_revision(local, pkg).filter(|_| !o.local_only) {
            Some((id, rev)) => {
                progress.emit(Event::Note(first_line(&e)));
                progress.emit(Event::Note(format!(
                    "re-pulling {id}@{}",
                    &rev[..rev.len().min(8)]
                )));
                let target = format!("{id}@{rev}");
                let req = PullRequest {
                    target: &target,
                    ..PullRequest::default()
                };
                pull::pull(local, &req, progress, async |_| Ok::<(), LocalError>(())).await?;
                image::ensure(local, &client, pkg, progress)
                    .await
                    .map_err(|e| {
                        LocalError::refused(
                            "image",
                            format!(
                                "re-pulled {id}@{rev} but image {} is still not usable: {}\n  → rebuild it with: tt-model package --container <tt-model.yaml>",
                                pkg.image,
                                chain(&e)
                            ),
                        )
                    })?
            }
            None => return Err(e),
        },
    };
    progress.emit(Event::step_done(
        "image",
        format!("image {}", pkg.image),
        Some(image.short_id().to_string()),
    ));

    // Weights.
    let outcome = weights::ensure_all(local, pkg, o.no_weights, o.local_only, progress).await?;

    // Port.
    let port = match o.port {
        Some(p) => p,
        None => {
            let p = host::pick_free_port(host::FIRST_PORT).ok_or_else(|| {
                LocalError::refused(
                    "--port",
                    format!(
                        "no free port found in {}-{}; pass one explicitly with --port",
                        host::FIRST_PORT,
                        host::FIRST_PORT + host::PORT_TRIES - 1
                    ),
                )
            })?;
            if p != host::FIRST_PORT {
                progress.emit(Event::Note(format!(
                    "port {} is in use; serving on {p} instead",
                    host::FIRST_PORT
                )));
            }
            p
        }
    };

    // Bind-mount sources are created as the user (dockerd would create them as root).
    for (dir, _, _) in run_spec::state_mounts(&state_dir) {
        create_dir(&dir)?;
    }
    create_dir(hub_cache)?;

    // Chips and create, atomically with respect to other serves.
    let lock = if card {
        let path = AllocLock::default_path();
        let held =
            tokio::task::spawn_blocking(move || AllocLock::acquire(&path, ALLOC_LOCK_TIMEOUT))
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))?;
        Some(held)
    } else {
        None
    };
    let chips = if card {
        Chips::Ids(choose_chips(&client, s, facts, needed, rootless).await?)
    } else {
        Chips::None
    };
    let plan = plan::request(o, pkg, s, port, chips.clone(), outcome.weights_on_host());
    let host = host::host_facts(
        rootless,
        hub_cache.clone(),
        state_dir,
        facts.hugepages_1g,
        local.hf_token_in_env(),
    );
    let spec = compose(&plan.req, &host);
    progress.emit(Event::Detail(spec.to_shell()));
    let t_create = Instant::now();
    progress.emit(Event::step_start("container", "starting the container"));
    client
        .create_and_start(&spec, |k| std::env::var(k).ok())
        .await?;
    drop(lock);
    progress.emit(Event::Container {
        name: name.clone(),
        endpoint: endpoint_for_events(pkg, port),
    });
    let chips_text = match &chips {
        Chips::Ids(ids) => format!("chips {}", labels::format_devices(ids)),
        _ => "no device".into(),
    };
    progress.emit(Event::step_done(
        "container",
        "container started",
        Some(format!(
            "{name} · {chips_text} · {:.1}s",
            t_create.elapsed().as_secs_f64()
        )),
    ));
    Ok(Started {
        client,
        name,
        port,
        plan,
    })
}

/// An error and its causes on one line, as the terminal shows an error chain.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn first_line(e: &dyn std::error::Error) -> String {
    chain(e).lines().next().unwrap_or_default().to_string()
}

/// The chip pre-check of a first serve, which the auto-pull runs on the fetched manifest before
/// it downloads the image: the settings, the card and free chips, judged as [`start`] judges
/// them (no lock: the allocation itself happens in [`start`]).
pub async fn precheck(
    o: &ServeOptions,
    pkg: &Package,
    facts: &CardFacts,
) -> Result<(), LocalError> {
    let s = plan::settings(o, pkg)?;
    if !s.card {
        return Ok(());
    }
    host::require_card(facts)?;
    let client = host::engine().await?;
    let rootless = client.is_rootless().await.unwrap_or(false);
    choose_chips(&client, &s, facts, s.profile.chip_count(), rootless).await?;
    Ok(())
}

/// Where the container answers, for the `container` event: on loopback (a published port is
/// there with or without `--expose`), with `/v1` for an OpenAI server, as tt's contract has it.
pub fn endpoint_for_events(pkg: &Package, port: u16) -> String {
    let v1 = if pkg.kind.starts_with("vllm") {
        "/v1"
    } else {
        ""
    };
    format!("http://127.0.0.1:{port}{v1}")
}

/// The chips to give the container: free ones (no running container claims them), the ones
/// asked for if free, openable by a rootless engine. Runs under the allocation lock.
async fn choose_chips(
    client: &Client,
    s: &Settings,
    facts: &CardFacts,
    needed: usize,
    rootless: bool,
) -> Result<Vec<u32>, LocalError> {
    let refused = |e: ChipError| LocalError::refused("card", e.to_string());
    let claims = match tokio::time::timeout(SCAN_TIMEOUT, client.scan_claims()).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return Err(refused(ChipError::CannotAsk(format!(
                "docker ps/inspect failed: {e}"
            ))));
        }
        Err(_) => {
            return Err(refused(ChipError::CannotAsk(
                "docker ps/inspect timed out".into(),
            )));
        }
    };
    let claimed = devices::claimed_chips(&claims, &facts.chips);
    let ids = devices::choose(
        s.requested.as_deref(),
        needed,
        &s.profile.name,
        &facts.chips,
        &claimed,
    )
    .map_err(refused)?;
    if rootless {
        let problems = host::rootless_device_problems(&ids, host::ids().0, host::ids().1);
        if !problems.is_empty() {
            return Err(LocalError::refused(
                "card",
                format!(
                    "rootless docker cannot open the chips:\n  {}",
                    problems.join("\n  ")
                ),
            ));
        }
    }
    Ok(ids)
}
