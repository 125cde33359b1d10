//! serve's plan: what the user asked for, checked before anything is touched (the profile,
//! the passthrough flags, the device choice, the readiness deadline), and the run request and
//! readiness spec composed from it. `--print` stops here: [`print_spec`] is the container serve
//! would start, composed without a preflight.

use std::time::Duration;

use tt_model_engine::run_spec::{Chips, RunSpec, ServeRequest, compose};
use tt_model_oci::labels;

use crate::host::{self, CardFacts};
use crate::package::{Package, Profile};
use crate::watch::{DEFAULT_READY_TIMEOUT, ReadySpec};
use crate::{Local, LocalError, devices};

/// What the user asked `serve` for, as plain values (the CLI fills it from its flags).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// The package: a staged manifest, a pulled repo id, an installed package's id.
    pub target: String,
    /// `--profile`.
    pub profile: Option<String>,
    /// Flags after the target, passed to the server.
    pub passthrough: Vec<String>,
    /// `--device` (only `none` is accepted: run without a Tenstorrent device).
    pub device: Option<String>,
    /// `--device-id`: the chips asked for, as written (`0,2`).
    pub device_id: Option<String>,
    /// `--timeout`: the readiness deadline, as written (`90s`, `10m`).
    pub timeout: Option<String>,
    /// `--port`: the host port (else the first free one from [`host::FIRST_PORT`]).
    pub port: Option<u16>,
    /// `--expose`: publish on every interface, not only loopback.
    pub expose: bool,
    /// `--network`.
    pub network: Option<String>,
    /// `--no-weights`: the server fetches its own weights.
    pub no_weights: bool,
    /// `--local-only`: never touch the network.
    pub local_only: bool,
}

/// What the user asked for, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The profile served.
    pub profile: Profile,
    /// Flags after the target, passed to the server.
    pub extra: Vec<String>,
    /// The serve uses a Tenstorrent card.
    pub card: bool,
    /// `--device-id`: the chips asked for.
    pub requested: Option<Vec<u32>>,
    /// The readiness deadline.
    pub timeout: Duration,
}

fn passthrough(o: &ServeOptions) -> Result<Vec<String>, LocalError> {
    if o.passthrough
        .iter()
        .any(|a| a == "--port" || a.starts_with("--port="))
    {
        return Err(LocalError::refused(
            "--port",
            format!(
                "--port must come before the target so tt-model can publish it too:  tt-model serve --port N {}",
                o.target
            ),
        ));
    }
    Ok(o.passthrough.clone())
}

/// What `--device` / the manifest say about the card.
fn wants_card(o: &ServeOptions, pkg: &Package) -> Result<bool, LocalError> {
    match o.device.as_deref() {
        None => Ok(!pkg.runs_without_card()),
        Some("none") => Ok(false),
        Some(other) => Err(LocalError::refused(
            "--device",
            format!(
                "--device takes `none` (run without a Tenstorrent device), got '{other}'; pick chips with --device-id"
            ),
        )),
    }
}

/// Checks the options against the package.
pub fn settings(o: &ServeOptions, pkg: &Package) -> Result<Settings, LocalError> {
    let profile = pkg.profile(o.profile.as_deref())?.clone();
    let extra = passthrough(o)?;
    let card = wants_card(o, pkg)?;
    let requested = o
        .device_id
        .as_deref()
        .map(devices::parse_device_ids)
        .transpose()
        .map_err(|e| LocalError::refused("--device-id", e.to_string()))?;
    if !card && requested.is_some() {
        return Err(LocalError::refused(
            "--device-id",
            "--device-id picks chips, but this serve runs without a device (--device none)",
        ));
    }
    let timeout = o
        .timeout
        .as_deref()
        .map(host::parse_duration)
        .transpose()?
        .unwrap_or(DEFAULT_READY_TIMEOUT);
    Ok(Settings {
        profile,
        extra,
        card,
        requested,
        timeout,
    })
}

/// The run request and what "ready" means for it.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The container to run.
    pub req: ServeRequest,
    /// When it counts as ready.
    pub ready: ReadySpec,
}

/// The plan for serving `pkg` on `port` with `chips`.
pub fn request(
    o: &ServeOptions,
    pkg: &Package,
    s: &Settings,
    port: u16,
    chips: Chips,
    weights_on_host: bool,
) -> Plan {
    let launch = pkg.launch(&s.profile, port);
    let mut cmd = launch.argv;
    cmd.extend(s.extra.iter().cloned());
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
            profile: s.profile.name.clone(),
            image: pkg.image.clone(),
            target: o.target.clone(),
            kind: pkg.kind.clone(),
            port,
            expose: o.expose,
            health_path: pkg.health_path(),
            chips,
            weights_on_host,
            env,
            labels: lab,
            cmd,
            network: o.network.clone(),
        },
        ready: ReadySpec {
            ready_line: pkg.ready_line(),
            http_addr: format!("127.0.0.1:{port}"),
            health_path: pkg.readiness_probe(),
            timeout: s.timeout,
            poll: Duration::from_millis(250),
        },
    }
}

/// The container `serve --print` shows: deterministic and side-effect free (no preflight,
/// port 20000, the first chips the host has, weights assumed on the host unless
/// `--no-weights`).
pub fn print_spec(
    o: &ServeOptions,
    pkg: &Package,
    s: &Settings,
    facts: &CardFacts,
    local: &Local,
) -> RunSpec {
    let needed = s.profile.chip_count();
    let chips = if !s.card {
        Chips::None
    } else if let Some(ids) = &s.requested {
        Chips::Ids(ids.clone())
    } else if facts.chips.len() >= needed {
        Chips::Ids(facts.chips[..needed].to_vec())
    } else {
        Chips::All
    };
    let on_host = pkg.all_weights().next().is_none() || !o.no_weights;
    let plan = request(o, pkg, s, host::FIRST_PORT, chips, on_host);
    let host = host::host_facts(
        false,
        local.hub().hub_cache.clone(),
        local.package_state_dir(&pkg.name),
        facts.hugepages_1g,
        local.hf_token_in_env(),
    );
    compose(&plan.req, &host)
}
