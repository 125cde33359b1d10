//! One free function per command: `(args, &Printer) -> anyhow::Result<ExitStatus>`.
//!
//! Each command lives in its own file, so that the engineer owning it edits only that file and
//! its `args/<command>.rs`.

use crate::ExitStatus;
use crate::args::Commands;
use crate::printer::Printer;

pub(crate) mod lint;
mod list;
mod logs;
mod package;
mod ps;
mod pull;
mod push;
mod rm;
mod schema;
mod serve;
mod stop;

/// Runs the chosen command.
pub fn dispatch(command: Commands, printer: &Printer) -> anyhow::Result<ExitStatus> {
    match command {
        Commands::Lint(args) => lint::run(&args, printer),
        Commands::Schema(args) => schema::run(&args, printer),
        Commands::Package(args) => package::run(&args, printer),
        Commands::Serve(args) => serve::run(&args, printer),
        Commands::Stop(args) => stop::run(&args, printer),
        Commands::Logs(args) => logs::run(&args, printer),
        Commands::Ps(args) => ps::run(&args, printer),
        Commands::List(args) => list::run(&args, printer),
        Commands::Rm(args) => rm::run(&args, printer),
        Commands::Push(args) => push::run(&args, printer),
        Commands::Pull(args) => pull::run(&args, printer),
    }
}

/// The error a declared-but-unbuilt command returns (exit code 2).
pub(crate) fn not_implemented(name: &str) -> anyhow::Result<ExitStatus> {
    Err(crate::UsageError(format!("`tt-model {name}` is not implemented yet")).into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn not_implemented_names_the_command() {
        let err = super::not_implemented("push").unwrap_err();
        assert_eq!(err.to_string(), "`tt-model push` is not implemented yet");
    }
}
