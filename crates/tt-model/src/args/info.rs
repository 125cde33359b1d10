//! `tt-model info` arguments.

use clap::Args;

/// Print a published package's manifest (JSON), then its compatibility with this machine.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// `org/name[@revision]`.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Judge against this arch (`blackhole`, `wormhole_b0`, or a board such as `p150`) instead of
    /// this machine's card.
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// Print a summary as JSON instead (kind, hardware, image, weights, card, visibility,
    /// listing, compatibility).
    #[arg(long)]
    pub json: bool,
}
