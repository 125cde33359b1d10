//! One free function per command: `(args, &Printer) -> anyhow::Result<ExitStatus>`.
//!
//! Each command lives in its own file, so that the engineer owning it edits only that file and
//! its `args/<command>.rs`.

use crate::ExitStatus;
use crate::args::Commands;
use crate::printer::Printer;

mod hub;
mod info;
pub(crate) mod lint;
mod list;
mod login;
mod logs;
mod package;
mod ps;
mod publish;
mod pull;
mod push;
mod rm;
mod schema;
mod search;
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
        Commands::Info(args) => info::run(&args, printer),
        Commands::Search(args) => search::run(&args, printer),
        Commands::Publish(args) => publish::publish(&args, printer),
        Commands::Unpublish(args) => publish::unpublish(&args, printer),
        Commands::Login(args) => login::login(&args, printer),
        Commands::Logout(args) => login::logout(&args, printer),
    }
}
