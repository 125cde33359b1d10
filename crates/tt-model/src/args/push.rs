//! `tt-model push` arguments.

use std::path::PathBuf;

use clap::Args;

/// Upload a staged container package.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The staged package directory (holds `tt_kernel_manifest.json`).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The target repository (default: `built.repo` of the manifest).
    #[arg(long, value_name = "NS/NAME")]
    pub repo: Option<String>,
    /// Make the repository private (a new repository is private unless `--public`).
    #[arg(long, conflicts_with_all = ["public", "publish"])]
    pub private: bool,
    /// Make the repository public.
    #[arg(long)]
    pub public: bool,
    /// List the package in the catalog (implies `--public`; refused when the card lacks
    /// `performance` or `limitations`).
    #[arg(long)]
    pub publish: bool,
}
