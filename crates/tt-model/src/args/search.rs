//! `tt-model search` arguments.

use clap::Args;

/// Search the Hub for packages (repos tagged `tt-model-cache`), newest first.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Only repos whose id contains this.
    #[arg(value_name = "QUERY")]
    pub query: Option<String>,
    /// Only packages listed in the community catalog (`tt-model-catalog`).
    #[arg(long)]
    pub catalog: bool,
    /// At most this many results.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub limit: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}
