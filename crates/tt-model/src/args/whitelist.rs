//! `tt-model whitelist` / `unwhitelist` arguments.

use clap::Args;

/// Reviewers: copy a listed package into `Tenstorrent/`, recording the review, and list the copy.
///
/// The copy is server-side (no bytes pass through this machine), named after the weights repo
/// (`Tenstorrent/<weights name>`), and records the review on its card (source, revision,
/// reviewer, date, and a credit to the author first in the card). Re-running on the same source
/// re-records the review; a copy of another source is never overwritten.
#[derive(Debug, Args)]
pub struct WhitelistArgs {
    /// The community package, `org/name` (public and listed in the catalog).
    #[arg(value_name = "ID")]
    pub id: String,
}

/// Reviewers: remove a reviewed `Tenstorrent/` copy from the catalog (the repo stays).
#[derive(Debug, Args)]
pub struct UnwhitelistArgs {
    /// The reviewed copy, `Tenstorrent/<name>`.
    #[arg(value_name = "ID")]
    pub id: String,
}
