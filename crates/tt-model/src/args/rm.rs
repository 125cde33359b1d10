//! `tt-model rm` arguments.

use clap::Args;

/// Remove a package: its containers, its image (unless shared), its caches.
///
/// Examples:
///   tt-model rm acme/my-model
///   tt-model rm acme/my-model --include-weights
///   tt-model rm --all -y
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The package (`org/name`, a staged `tt_kernel_manifest.json`, or a package name).
    #[arg(
        value_name = "TARGET",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub target: Option<String>,
    /// Remove every installed package (asks first unless --yes); continues past failures.
    #[arg(long)]
    pub all: bool,
    /// Do not ask before `--all` removes every installed package.
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Also delete the weights in the host HF cache (the primary and every auxiliary repo).
    #[arg(long)]
    pub include_weights: bool,
    /// Keep the JIT/weight/tensor caches under ~/.cache/tt-model/<name>.
    #[arg(long)]
    pub keep_cache: bool,
}
