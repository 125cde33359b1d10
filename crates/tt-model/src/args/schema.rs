//! `tt-model schema` arguments.

use std::path::PathBuf;

use clap::Args;

/// Print the JSON Schema of `tt-model.yaml`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Write the schema to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}
