//! serve's plan: what the user asked for, checked before anything is touched (the profile,
//! the passthrough flags, the device choice, the readiness deadline), and the run request and
//! readiness spec composed from it. `--print` stops here: [`print_spec`] is the container serve
//! would start, composed without a preflight.

use std::time::Duration;

use tt_model_engine::run_spec::{Chips, RunSpec, ServeRequest, compose};
use tt_model_local::host::{self, CardFacts};
use tt_model_local::package::{Package, Profile};
use tt_model_local::watch::{DEFAULT_READY_TIMEOUT, ReadySpec};
use tt_model_local::{Local, devices};
use tt_model_oci::labels;

use crate::UserError;
use crate::args::ServeArgs;

/// What the user asked for, checked.
pub(crate) struct Settings {
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

/// Checks the flags against the package.
pub(crate) fn settings(args: &ServeArgs, pkg: &Package) -> anyhow::Result<Settings> {
    let profile = pkg.profile(args.profile.as_deref())?.clone();
    let extra = passthrough(args)?;
    let card = wants_card(args, pkg)?;
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
    Ok(Settings {
        profile,
        extra,
        card,
        requested,
        timeout,
    })
}

/// The run request and what "ready" means for it.
pub(crate) struct Plan {
    pub req: ServeRequest,
    pub ready: ReadySpec,
}

/// The plan for serving `pkg` on `port` with `chips`.
pub(crate) fn request(
    args: &ServeArgs,
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
            health_path: pkg.readiness_probe(),
            timeout: s.timeout,
            poll: Duration::from_millis(250),
        },
    }
}

/// The container `serve --print` shows: deterministic and side-effect free (no preflight,
/// port 20000, the first chips the host has, weights assumed on the host unless
/// `--no-weights`).
pub(crate) fn print_spec(
    args: &ServeArgs,
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
    let on_host = pkg.all_weights().next().is_none() || !args.no_weights;
    let plan = request(args, pkg, s, host::FIRST_PORT, chips, on_host);
    let host = host::host_facts(
        false,
        local.hub().hub_cache.clone(),
        local.package_state_dir(&pkg.name),
        facts.hugepages_1g,
        local.hf_token_in_env(),
    );
    compose(&plan.req, &host)
}
