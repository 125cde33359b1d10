//! `tt-model logs` arguments.

use clap::Args;

/// Show the logs of a package's container (running or exited).
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// A staged `tt_kernel_manifest.json`, a pulled `org/name`, or a package name.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// Keep following the log.
    #[arg(short, long)]
    pub follow: bool,
    /// The profile whose container to read.
    #[arg(long, value_name = "P")]
    pub profile: Option<String>,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,
}
