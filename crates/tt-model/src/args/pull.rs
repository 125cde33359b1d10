//! `tt-model pull` arguments.

use clap::Args;

/// Download a container package.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// `org/name[@revision]`.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Also download the weights (the default is image and manifest only).
    #[arg(long)]
    pub with_weights: bool,
    /// Reinstall even when the package is already there: download everything again and load
    /// the image even when the engine has that build.
    #[arg(long)]
    pub force: bool,
}
