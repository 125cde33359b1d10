//! `tt-model`: package ML models for Tenstorrent hardware into container images and serve them.
//!
//! The binary is thin: [`main`] parses the arguments, builds the [`printer::Printer`], runs one
//! command from [`commands`], and sorts the outcome into an exit class:
//!
//! * `0` ([`ExitStatus::Success`]): the command did what was asked;
//! * `1` ([`ExitStatus::Failure`]): the user's input is wrong (a manifest with errors, a missing
//!   package) — the command already printed why;
//! * `2` ([`ExitStatus::Error`]): a usage error or an unexpected failure (printed here, once).

pub mod args;
pub mod commands;
pub mod printer;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;
use crate::printer::Printer;

/// The exit class of a command; see the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything went as asked.
    Success,
    /// User or validation errors were found and reported.
    Failure,
    /// A usage error or an unexpected failure.
    Error,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        match status {
            ExitStatus::Success => ExitCode::from(0),
            ExitStatus::Failure => ExitCode::from(1),
            ExitStatus::Error => ExitCode::from(2),
        }
    }
}

/// A handled, user-facing error: the input is wrong, not the tool. Commands return it (through
/// `anyhow`) when they want exit code 1 and a plain `✗ message` without an error chain.
#[derive(Debug)]
pub struct UserError(pub String);

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

/// Runs the CLI with the process arguments and returns its exit code.
pub fn main() -> ExitCode {
    run(std::env::args_os()).into()
}

/// Runs the CLI with explicit arguments (the first is the program name).
pub fn run<I, T>(argv: I) -> ExitStatus
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout with exit 0 and usage errors to stderr with 2.
            let _ = err.print();
            return if err.use_stderr() {
                ExitStatus::Error
            } else {
                ExitStatus::Success
            };
        }
    };
    let printer = Printer::new(cli.global.verbose, cli.global.no_color);
    if cli.global.version {
        printer.out(env!("CARGO_PKG_VERSION"));
        return ExitStatus::Success;
    }
    let Some(command) = cli.command else {
        use clap::CommandFactory;
        let _ = Cli::command().print_help();
        return ExitStatus::Error;
    };
    match commands::dispatch(command, &printer) {
        Ok(status) => status,
        Err(err) => {
            if let Some(user) = err.downcast_ref::<UserError>() {
                printer.error(&user.to_string());
                ExitStatus::Failure
            } else {
                printer.error_chain(&err);
                ExitStatus::Error
            }
        }
    }
}
