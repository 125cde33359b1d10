//! `tt-model weights` arguments.

use clap::Args;

/// `tt-model weights TARGET [--check]` (its help is on `Commands::Weights`).
#[derive(Debug, Args)]
pub struct WeightsArgs {
    /// What serve takes: a staged `tt_kernel_manifest.json` (or its directory), or a pulled
    /// `org/name`.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Download nothing: exit 0 when every weights repository is complete in the cache at its
    /// pinned revision, else 1 naming what is missing.
    #[arg(long)]
    pub check: bool,
}
