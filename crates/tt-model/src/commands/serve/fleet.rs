//! `serve --print k8s`: the Kubernetes fleet for the package, built by `tt-model-fleet` from the
//! run spec serve's own plan composes (the same request, so the same env, command, hardening
//! and weights decision), on a host-independent footing: the fleet never depends on the chips,
//! hugepages, uid or paths of the machine that prints it.

use tt_model_engine::run_spec::{Chips, compose};
use tt_model_fleet::{
    DEFAULT_CPU, DEFAULT_HF_TOKEN_SECRET, DEFAULT_MEMORY, DEFAULT_WEIGHTS_CLAIM,
    DEFAULT_WEIGHTS_SIZE, DeviceMode, FleetOptions, WeightsFill, WeightsPin, check_pinned,
    pinned_image, render,
};
use tt_model_hub::env::DEFAULT_ENDPOINT;
use tt_model_local::package::Package;
use tt_model_local::{Local, host};
use tt_model_manifest::validate::hardware::parse_hardware;

use crate::args::{FleetDevices, ServeArgs};
use crate::printer::Printer;
use tt_model_local::serve::{ServeOptions, Settings, request};

/// The image a cluster pulls: `--image` (pinned), else the package's registry image by digest.
fn image(args: &ServeArgs, pkg: &Package) -> Result<String, tt_model_fleet::FleetError> {
    if let Some(reference) = &args.k8s.image {
        check_pinned(reference)?;
        return Ok(reference.clone());
    }
    let i = &pkg.wire().container.image;
    let repository = if i.repository.is_empty() {
        &pkg.name
    } else {
        &i.repository
    };
    pinned_image(&pkg.name, &i.registry, repository, i.digest.as_deref())
}

/// How the fleet gets its weights: filled by its own Job with `--tools-image`, else a warning
/// that a person must fill the claim. `None` where the pods do not read a claim.
fn weights_fill(
    args: &ServeArgs,
    pkg: &Package,
    reads_claim: bool,
    local: &Local,
    printer: &Printer,
) -> Result<Option<WeightsFill>, tt_model_fleet::FleetError> {
    if !reads_claim {
        return Ok(None);
    }
    let Some(tools_image) = &args.k8s.tools_image else {
        let claim = args
            .k8s
            .weights_claim
            .as_deref()
            .unwrap_or(DEFAULT_WEIGHTS_CLAIM);
        printer.warn(&format!(
            "the pods read the weights from the claim `{claim}`, which this fleet does not fill: fill it by hand \
             (docs/serving.md), or pass --tools-image REF@sha256:… (an image with the tt-model binary) to have \
             the fleet fill it itself"
        ));
        return Ok(None);
    };
    check_pinned(tools_image)?;
    let hub = local.hub();
    Ok(Some(WeightsFill {
        tools_image: tools_image.clone(),
        manifest_json: pkg.wire().to_json(),
        create_claim: args.k8s.weights_claim.is_none().then(|| {
            args.k8s
                .weights_size
                .clone()
                .unwrap_or_else(|| DEFAULT_WEIGHTS_SIZE.into())
        }),
        // A mirror the renderer uses is the Job's too; the public Hub needs no variable.
        hf_endpoint: (hub.endpoint != DEFAULT_ENDPOINT).then(|| hub.endpoint.clone()),
    }))
}

/// The fleet as multi-document YAML.
pub(crate) fn fleet_yaml(
    args: &ServeArgs,
    options: &ServeOptions,
    pkg: &Package,
    s: &Settings,
    local: &Local,
    printer: &Printer,
) -> anyhow::Result<String> {
    let image = image(args, pkg)?;
    let chips = if s.card { s.profile.chip_count() } else { 0 };
    let chip_ids = if s.card {
        Chips::Ids((0..chips as u32).collect())
    } else {
        Chips::None
    };
    let on_host = pkg.all_weights().next().is_none() || !args.no_weights;
    let port = args.port.unwrap_or(host::FIRST_PORT);
    let plan = request(options, pkg, s, port, chip_ids, on_host);
    // Paths and ids of this host do not reach the fleet; fixed ones keep the rendering pure.
    let facts = host::host_facts(false, "/hf-hub".into(), "/state".into(), true, false);
    let spec = compose(&plan.req, &facts);

    let mut opts = FleetOptions::new(image);
    opts.replicas = args.k8s.replicas.unwrap_or(1);
    opts.namespace = args.k8s.namespace.clone();
    opts.chips = chips as u32;
    let hardware = s
        .profile
        .settings
        .hardware
        .as_deref()
        .and_then(|h| parse_hardware(h).ok());
    opts.board = hardware.map(|h| h.board.to_string());
    opts.boards = hardware.map_or(1, |h| h.count);
    opts.devices = match args.k8s.devices {
        None | Some(FleetDevices::Dra) => DeviceMode::Dra,
        Some(FleetDevices::Extended) => DeviceMode::Extended,
    };
    opts.board_resource = args.k8s.board_resource.clone();
    opts.cpu = args.k8s.cpu.clone().unwrap_or_else(|| DEFAULT_CPU.into());
    opts.memory = args
        .k8s
        .memory
        .clone()
        .unwrap_or_else(|| DEFAULT_MEMORY.into());
    opts.startup_timeout = s.timeout;
    opts.weights = pkg
        .all_weights()
        .map(|w| WeightsPin {
            repo: w.repo_id.clone(),
            revision: w.revision.clone(),
        })
        .collect();
    opts.weights_claim = args
        .k8s
        .weights_claim
        .clone()
        .unwrap_or_else(|| DEFAULT_WEIGHTS_CLAIM.into());
    opts.kernel_cache_claim = args.k8s.kernel_cache_claim.clone();
    opts.hf_token_secret = args
        .k8s
        .hf_token_secret
        .clone()
        .unwrap_or_else(|| DEFAULT_HF_TOKEN_SECRET.into());
    opts.ready_line = pkg.ready_line();
    let has_weights = pkg.all_weights().next().is_some();
    opts.weights_fill = weights_fill(args, pkg, has_weights && on_host, local, printer)?;
    let fleet = render(&spec, &opts)?;
    Ok(fleet.to_yaml()?)
}
