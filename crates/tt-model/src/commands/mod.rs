//! One free function per command: `(args, &Printer) -> anyhow::Result<ExitStatus>`.
//!
//! Each command lives in its own file, so that the engineer owning it edits only that file and
//! its `args/<command>.rs`.

use tt_model_local::Local;

use crate::ExitStatus;
use crate::args::Commands;
use crate::printer::Printer;

mod curl;
mod info;
pub(crate) mod lint;
mod list;
mod login;
mod logs;
mod package;
mod profiles;
mod ps;
mod publish;
mod pull;
mod push;
mod rm;
mod schema;
mod search;
mod serve;
mod stop;
mod version;
mod weights;
mod whitelist;

/// Runs the chosen command; `local` is the state root and Hub settings, resolved once.
pub fn dispatch(command: Commands, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    match command {
        Commands::Lint(args) => lint::run(&args, printer),
        Commands::Schema(args) => schema::run(&args, printer),
        Commands::Package(args) => package::run(&args, printer, local),
        Commands::Serve(args) => serve::run(&args, printer, local),
        Commands::Stop(args) => stop::run(&args, printer, local),
        Commands::Logs(args) => logs::run(&args, printer, local),
        Commands::Ps(args) => ps::run(&args, printer),
        Commands::List(args) => list::run(&args, printer, local),
        Commands::Rm(args) => rm::run(&args, printer, local),
        Commands::Push(args) => push::run(&args, printer, local),
        Commands::Pull(args) => pull::run(&args, printer, local),
        Commands::Weights(args) => weights::run(&args, printer, local),
        Commands::Info(args) => info::run(&args, printer, local),
        Commands::Profiles(args) => profiles::run(&args, printer, local),
        Commands::Curl(args) => curl::run(&args, printer, local),
        Commands::Version(_) => version::run(printer),
        Commands::Search(args) => search::run(&args, printer, local),
        Commands::Publish(args) => publish::publish(&args, printer, local),
        Commands::Unpublish(args) => publish::unpublish(&args, printer, local),
        Commands::Whitelist(args) => whitelist::whitelist(&args, printer, local),
        Commands::Unwhitelist(args) => whitelist::unwhitelist(&args, printer, local),
        Commands::Login(args) => login::login(&args, printer, local),
        Commands::Logout(args) => login::logout(&args, printer, local),
    }
}
