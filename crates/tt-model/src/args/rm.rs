//! `tt-model rm` arguments.

use clap::Args;

/// Remove a package: its containers, its image (unless shared), its caches.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The package (`org/name`, a staged `tt_kernel_manifest.json`, or a package name).
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Also delete the weights in the host HF cache.
    #[arg(long)]
    pub include_weights: bool,
    /// Keep the JIT/weight/tensor caches under ~/.cache/tt-model/<name>.
    #[arg(long)]
    pub keep_cache: bool,
}
