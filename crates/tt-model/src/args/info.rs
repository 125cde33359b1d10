//! `tt-model info` arguments.

use clap::Args;

/// Show what a published package is: kind, arch, hardware, image, weights, card, visibility.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// `org/name[@revision]`.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}
