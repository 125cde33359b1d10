//! `tt-model stop` arguments.

use clap::Args;

/// Stop the running containers of a package (SIGTERM, then SIGKILL after the grace period).
#[derive(Debug, Args)]
pub struct StopArgs {
    /// A staged `tt_kernel_manifest.json`, a pulled `org/name`, or a package name.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Stop only this profile's container.
    #[arg(long, value_name = "P")]
    pub profile: Option<String>,
    /// Seconds to wait after SIGTERM before SIGKILL.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    pub grace: u64,
}
