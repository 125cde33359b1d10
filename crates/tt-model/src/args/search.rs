//! `tt-model search` arguments.

use clap::Args;

/// Search the Hub for packages (repos tagged `tt-model-cache`), newest first.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Only repos whose id contains this (empty: every package).
    #[arg(value_name = "QUERY")]
    pub query: Option<String>,
    /// Only packages listed in the community catalog (`tt-model-catalog`).
    #[arg(long)]
    pub catalog: bool,
    /// Only packages tagged for this chip architecture (`blackhole`, `wormhole_b0`, …).
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// At most this many results.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub limit: usize,
    /// Print JSON rows (`id`, `private`, `downloads`, `last_modified`) instead of text.
    #[arg(long)]
    pub json: bool,
}
