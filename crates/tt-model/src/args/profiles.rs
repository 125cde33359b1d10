//! `tt-model profiles` arguments.

use clap::Args;

/// Show a package's serve profiles, the default marked (pick one with `serve --profile`).
#[derive(Debug, Args)]
pub struct ProfilesArgs {
    /// A pulled `org/name`, a staged package directory, or its `tt_kernel_manifest.json`.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Print JSON instead of the table (one object per profile, in manifest order).
    #[arg(long)]
    pub json: bool,
}
