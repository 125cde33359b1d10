//! `tt-model version` arguments.

use clap::Args;

/// Print the tt-model version (the same as `--version`).
#[derive(Debug, Args)]
pub struct VersionArgs {}
