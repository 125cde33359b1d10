//! `tt-model list` arguments.

use clap::Args;

/// List locally installed packages and whether each can serve now.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}
