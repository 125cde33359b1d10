//! Command-line arguments (clap derive types only; no behaviour).
//!
//! `Cli` and `Commands` live here; each command's flags live in `args/<command>.rs` so that the
//! engineer owning a command edits only that file.

use std::fmt::Write as _;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

mod curl;
mod info;
mod lint;
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
pub mod serve_argv;
mod stop;
mod version;
mod weights;
mod whitelist;

pub use curl::CurlArgs;
pub use info::InfoArgs;
pub use lint::{LintArgs, LintFormat};
pub use list::ListArgs;
pub use login::{LoginArgs, LogoutArgs};
pub use logs::LogsArgs;
pub use package::{BuilderArg, PackageArgs, PullArg};
pub use profiles::ProfilesArgs;
pub use ps::PsArgs;
pub use publish::{PublishArgs, UnpublishArgs};
pub use pull::PullArgs;
pub use push::PushArgs;
pub use rm::RmArgs;
pub use schema::SchemaArgs;
pub use search::SearchArgs;
pub use serve::{FleetDevices, PrintFormat, ServeArgs};
pub use stop::StopArgs;
pub use version::VersionArgs;
pub use weights::WeightsArgs;
pub use whitelist::{UnwhitelistArgs, WhitelistArgs};

/// Package ML models for Tenstorrent hardware into container images, and serve them.
#[derive(Debug, Parser)]
#[command(
    name = "tt-model",
    disable_version_flag = true,
    arg_required_else_help = false,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Commands>,
}

/// Options every command accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Show full per-step output (subprocess logs, every checklist row).
    #[arg(short, long, global = true, help_heading = GLOBAL_HEADING)]
    pub verbose: bool,
    /// Never colour the output (also honoured: the `NO_COLOR` environment variable).
    #[arg(long, global = true, help_heading = GLOBAL_HEADING)]
    pub no_color: bool,
    /// Print the bare version (e.g. `0.1.0`) and exit.
    #[arg(short = 'V', long)]
    pub version: bool,
}

/// The heading of the options every command accepts, in each command's `--help`.
pub const GLOBAL_HEADING: &str = "Global options";

/// The original's help panels (its Rich panels "Run a model", "Get models", "Publish
/// models", "Environment", "Maintenance"), in order, with the commands each lists; `ps` joins
/// its run-time siblings, `lint` and `schema` the authoring side, `logout` its `login`.
pub const PANELS: &[(&str, &[&str])] = &[
    ("Run a model", &["serve", "curl", "stop", "logs", "ps"]),
    (
        "Get models",
        &["pull", "weights", "info", "search", "list", "profiles"],
    ),
    (
        "Publish models",
        &[
            "package",
            "push",
            "publish",
            "unpublish",
            "whitelist",
            "unwhitelist",
            "lint",
            "schema",
        ],
    ),
    ("Environment", &["login", "logout"]),
    ("Maintenance", &["rm", "version"]),
];

/// The parser `tt-model` runs: [`Cli`]'s, with the top-level help grouped into [`PANELS`]
/// (clap gives all subcommands one heading, so the panels are rendered into the template).
pub fn command() -> clap::Command {
    let cmd = Cli::command();
    let styles = cmd.get_styles().clone();
    let (header, literal) = (styles.get_header(), styles.get_literal());
    let width = PANELS
        .iter()
        .flat_map(|(_, names)| names.iter().map(|n| n.len()))
        .max()
        .unwrap_or(0);
    let mut panels = String::new();
    for (title, names) in PANELS {
        let _ = writeln!(panels, "{header}{title}:{header:#}");
        for name in *names {
            let about = cmd
                .find_subcommand(name)
                .and_then(|s| s.get_about())
                .map(|a| a.to_string())
                .unwrap_or_default();
            let _ = writeln!(
                panels,
                "  {literal}{name}{literal:#}{:pad$}  {about}",
                "",
                pad = width - name.len()
            );
        }
        panels.push('\n');
    }
    let template = format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{panels}{header}Options:{header:#}\n{{options}}{{after-help}}"
    );
    cmd.help_template(template)
}

/// Parses `tt-model`'s argv (the first item is the program name), serve's own options wherever
/// they stand ([`serve_argv::reorder`]).
pub fn parse<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let cmd = command();
    let argv = serve_argv::reorder(&cmd, argv.into_iter().map(Into::into).collect());
    cmd.try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m))
}

/// `weights --help`: what the command does and where a fleet runs it.
const WEIGHTS_LONG_ABOUT: &str = "Fetch a package's weights into the HF cache at their pinned revisions.\n\n\
Every weights repository of the package (the primary and each auxiliary one) is downloaded at its \
pinned revision into HF_HUB_CACHE (else $HF_HOME/hub), with serve's own pin checks, allow_patterns and \
file verification; a revision the Hub does not have is refused (exit 1). With --check nothing is \
downloaded: exit 0 when every repository is complete in the cache at its pinned revision, else 1.\n\n\
A fleet rendered with `serve --print k8s --tools-image` runs it in a Job that fills its weights \
claim, and each server pod runs --check on the claim before it starts (docs/serving.md, \
\"Weights at the pinned revision\").\n\n\
Examples:\n  tt-model weights out/my-model/tt_kernel_manifest.json\n  tt-model weights acme/my-model --check";

/// The commands, in the order `--help` lists them.
#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Check `tt-model.yaml` manifests: every error with file:line:col and a fix.
    Lint(LintArgs),
    /// Print the JSON Schema (draft-07) of `tt-model.yaml`, for editors and CI.
    Schema(SchemaArgs),
    /// Build a container package from a `tt-model.yaml` (image + `tt_kernel_manifest.json`).
    Package(PackageArgs),
    /// Run a packaged model: a staged `tt_kernel_manifest.json` or a pulled `org/name[@rev]`.
    Serve(ServeArgs),
    /// Stop the running containers of a package.
    Stop(StopArgs),
    /// Show the logs of a package's container: the running one, else the most recent exited one.
    Logs(LogsArgs),
    /// List the running tt-model containers.
    Ps(PsArgs),
    /// List locally installed packages and whether each can serve now.
    List(ListArgs),
    /// Remove an installed package (its image, state and, on request, its weights).
    Rm(RmArgs),
    /// Upload a staged container package.
    Push(PushArgs),
    /// Download a container package and load its image.
    Pull(PullArgs),
    /// Fetch a package's weights into the HF cache at their pinned revisions (`--check`: only look).
    #[command(long_about = WEIGHTS_LONG_ABOUT)]
    Weights(WeightsArgs),
    /// Print a published package's manifest (JSON), then its compatibility with this machine.
    Info(InfoArgs),
    /// Show a package's serve profiles, the default marked (pick one with `serve --profile`).
    Profiles(ProfilesArgs),
    /// Send the served model one request for its task (`--task`; any other `--key value` goes into the body).
    Curl(CurlArgs),
    /// Print the tt-model version (the same as `--version`).
    Version(VersionArgs),
    /// Search the Hub for packages (`--catalog`: only those listed in the catalog).
    Search(SearchArgs),
    /// List a pushed package in the community catalog (refused while its card is incomplete).
    Publish(PublishArgs),
    /// Remove a package from the community catalog.
    Unpublish(UnpublishArgs),
    /// Reviewers: copy a listed package into `Tenstorrent/`, recording the review, and list the copy.
    Whitelist(WhitelistArgs),
    /// Reviewers: remove a reviewed `Tenstorrent/` copy from the catalog (the repo stays).
    Unwhitelist(UnwhitelistArgs),
    /// Store a Hugging Face token (`--token`, standard input or a prompt), checked against the Hub.
    Login(LoginArgs),
    /// Remove the stored Hugging Face token.
    Logout(LogoutArgs),
}
