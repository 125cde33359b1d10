//! `tt-model lint` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Check one or more `tt-model.yaml` manifests.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  tt-model lint examples/*/tt-model.yaml --format github")]
pub struct LintArgs {
    /// The manifests to check.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also check that every `source.code` / `extra_code` path exists and that `runtime.app`'s
    /// package is shipped (paths resolve against the current directory, as `package` does).
    #[arg(long)]
    pub check_sources: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,
    /// Treat warnings as errors (exit 1 when any warning is found).
    #[arg(long)]
    pub deny_warnings: bool,
}

/// How `lint` reports its findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// Snippets with carets and suggestions.
    Human,
    /// One JSON document: `{"files": [{"path", "diagnostics": [...]}], "errors", "warnings"}`.
    Json,
    /// GitHub Actions annotations (`::error file=…,line=…,col=…::…`).
    Github,
}
