//! `tt-model ps` arguments.

use clap::Args;

/// List the running tt-model containers: port, chips, uptime.
#[derive(Debug, Args)]
pub struct PsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also list stopped containers.
    #[arg(short, long)]
    pub all: bool,
}
