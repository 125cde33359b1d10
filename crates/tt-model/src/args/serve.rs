//! `tt-model serve` arguments.

use std::ffi::OsString;

use clap::Args;

/// Run a packaged model and watch it boot until it is ready.
///
/// Examples:
///   tt-model serve out/my-model/tt_kernel_manifest.json
///   tt-model serve acme/my-model --port 8000 --device-id 0
///   tt-model serve acme/my-model --print
#[derive(Debug, Args)]
#[command(trailing_var_arg = true)]
pub struct ServeArgs {
    /// A staged `tt_kernel_manifest.json` (or its directory), or a pulled `org/name[@rev]`.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Print the exact `docker run` command and exit without running anything.
    #[arg(long)]
    pub print: bool,
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
    /// Publish the port on all interfaces instead of 127.0.0.1.
    #[arg(long)]
    pub expose: bool,
    /// Readiness deadline: seconds, or with a unit (`90s`, `45m`, `2h`). Default 30m.
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
}
