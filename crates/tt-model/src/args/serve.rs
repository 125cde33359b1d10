//! `tt-model serve` arguments.

use std::ffi::OsString;

use clap::{Args, ValueEnum};

/// How a fleet's pods get their card (`serve --print k8s --devices`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FleetDevices {
    /// A DRA claim for the profile's boards by name (tt-operator's driver; Kubernetes 1.34+).
    Dra,
    /// An extended resource counted in chips, for clusters with a device plugin and no DRA.
    Extended,
}

/// What `serve --print` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrintFormat {
    /// The exact `docker run` command.
    Docker,
    /// A Kubernetes fleet: Deployment, Service and PodDisruptionBudget as YAML.
    K8s,
}

/// Run a packaged model and watch it boot until it is ready.
///
/// Examples:
///   tt-model serve out/my-model/tt_kernel_manifest.json
///   tt-model serve acme/my-model --port 8000 --device-id 0
///   tt-model serve acme/my-model --print
///   tt-model serve acme/my-model --print k8s --replicas 4 | kubectl apply -f -
#[derive(Debug, Args)]
#[command(trailing_var_arg = true)]
pub struct ServeArgs {
    /// A staged `tt_kernel_manifest.json` (or its directory), or a pulled `org/name[@rev]`.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Print instead of running anything: `docker` (the default) the exact `docker run`
    /// command, `k8s` a Kubernetes fleet as YAML (docs/serving.md, "Fleets on Kubernetes").
    #[arg(
        long,
        value_name = "FORMAT",
        num_args = 0..=1,
        default_missing_value = "docker",
        hide_possible_values = true
    )]
    pub print: Option<PrintFormat>,
    /// Return once the container has started instead of watching it boot.
    #[arg(long)]
    pub detach: bool,
    /// The host port (moves both the published port and the server's `--port`).
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,
    /// Pin chips, e.g. `0,1`; the count must equal the profile's chip count.
    #[arg(long, value_name = "IDS")]
    pub device_id: Option<String>,
    /// `none`: run without a Tenstorrent device (CPU/emulation runtimes and tests).
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// A non-default serve profile.
    #[arg(long, value_name = "P")]
    pub profile: Option<String>,
    /// Do not prefetch weights; the model downloads them inside the container.
    #[arg(long)]
    pub no_weights: bool,
    /// Re-pull a pulled package when the Hub has a newer revision (its image is reloaded only
    /// when the digest differs); a pinned `org/name@rev` is served as it is.
    #[arg(long)]
    pub refresh: bool,
    /// Never touch the Hub.
    #[arg(long)]
    pub local_only: bool,
    /// Skip the advisory check for a newer published revision (one Hub request, bounded by
    /// 3 s, silent when offline); `--refresh` still asks.
    #[arg(long)]
    pub no_update_check: bool,
    /// The original's compatibility override for v5/v6 bundles; a container package has none
    /// (accepted, and said so).
    #[arg(long)]
    pub force: bool,
    /// The original's arch override for v5/v6 bundles; a container package is judged by its
    /// image (accepted, and said so).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// Deprecated: watching the boot is the default (kept so old command lines still parse).
    #[arg(long, hide = true)]
    pub follow: bool,
    /// Publish the port on all interfaces instead of 127.0.0.1.
    #[arg(long)]
    pub expose: bool,
    /// Readiness deadline: seconds, or with a unit (`90s`, `45m`, `2h`). Default 4h.
    #[arg(
        long,
        value_name = "DURATION",
        env = "TT_MODEL_READY_TIMEOUT",
        hide_env_values = true
    )]
    pub timeout: Option<String>,
    /// The container network (`host` or `none` for engines without a bridge).
    #[arg(long, value_name = "MODE", hide = true, env = "TT_MODEL_NETWORK")]
    pub network: Option<String>,
    /// Extra arguments passed through to the engine.
    #[arg(value_name = "PASSTHROUGH", allow_hyphen_values = true)]
    pub passthrough: Vec<OsString>,
    /// The fleet's options (boxed: `Commands` stays small; last: its help heading would
    /// otherwise carry over to the fields after it).
    #[command(flatten)]
    pub k8s: Box<K8sArgs>,
}

/// `serve --print k8s`: the fleet's shape and the cluster's names.
#[derive(Debug, Args)]
#[command(next_help_heading = "Kubernetes (--print k8s)")]
pub struct K8sArgs {
    /// Pods in the fleet [default: 1].
    #[arg(long, value_name = "N", requires = "print")]
    pub replicas: Option<u32>,
    /// The namespace written into the fleet's objects [default: none: kubectl's].
    #[arg(long, value_name = "NS", requires = "print")]
    pub namespace: Option<String>,
    /// How pods get their card: `dra` claims the profile's boards by name through tt-operator's
    /// DRA driver (Kubernetes 1.34+); `extended` asks a device plugin for chips [default: dra].
    #[arg(
        long,
        value_name = "HOW",
        requires = "print",
        hide_possible_values = true
    )]
    pub devices: Option<FleetDevices>,
    /// With --devices extended: the resource asked for once per chip
    /// [default: tenstorrent.com/chip].
    #[arg(long, value_name = "NAME", requires = "print")]
    pub board_resource: Option<String>,
    /// Run this image (`REF@sha256:…`) instead of the package's registry image.
    #[arg(long, value_name = "REF", requires = "print")]
    pub image: Option<String>,
    /// The PersistentVolumeClaim holding the pinned weights [default: tt-model-hf-hub, filled
    /// by hand; with --tools-image, the fleet's own `<name>-hf-hub`, created].
    #[arg(long, value_name = "NAME", requires = "print")]
    pub weights_claim: Option<String>,
    /// An image with the `tt-model` binary (`REF@sha256:…`): the fleet fills its weights claim
    /// itself (a Job runs `tt-model weights`) and each pod checks it (`tt-model weights
    /// --check`) before the server starts.
    #[arg(
        long,
        value_name = "REF",
        requires = "print",
        conflicts_with = "no_weights"
    )]
    pub tools_image: Option<String>,
    /// With --tools-image: the size of the ReadWriteMany weights claim the fleet creates
    /// [default: 200Gi].
    #[arg(
        long,
        value_name = "QUANTITY",
        requires = "tools_image",
        conflicts_with = "weights_claim"
    )]
    pub weights_size: Option<String>,
    /// A ReadWriteMany claim that keeps the compiled kernels between pods, one directory per
    /// image [default: none: each pod compiles its own].
    #[arg(long, value_name = "NAME", requires = "print")]
    pub kernel_cache_claim: Option<String>,
    /// The Secret (key `token`) with HF_TOKEN for pods that download [default: hf-token].
    #[arg(long, value_name = "NAME", requires = "print")]
    pub hf_token_secret: Option<String>,
    /// CPU request per pod [default: 4].
    #[arg(long, value_name = "QUANTITY", requires = "print")]
    pub cpu: Option<String>,
    /// Memory request and limit per pod [default: 32Gi].
    #[arg(long, value_name = "QUANTITY", requires = "print")]
    pub memory: Option<String>,
}

impl ServeArgs {
    /// What the library's `serve` use case takes from these flags.
    pub fn options(&self) -> tt_model_local::serve::ServeOptions {
        tt_model_local::serve::ServeOptions {
            target: self.target.clone(),
            profile: self.profile.clone(),
            passthrough: self
                .passthrough
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            device: self.device.clone(),
            device_id: self.device_id.clone(),
            timeout: self.timeout.clone(),
            port: self.port,
            expose: self.expose,
            network: self.network.clone(),
            no_weights: self.no_weights,
            local_only: self.local_only,
        }
    }
}
