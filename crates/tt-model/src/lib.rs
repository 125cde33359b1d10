//! `tt-model`: package ML models for Tenstorrent hardware into container images and serve them.
//!
//! The binary is thin: [`main`] parses the arguments, builds the [`printer::Printer`], resolves
//! the settings every command shares once ([`tt_model_local::Local`]: the state root and the
//! Hub's), runs one command from [`commands`], and renders its error in one place (`report.rs`),
//! sorted into an exit class:
//!
//! * `0` ([`ExitStatus::Success`]): the command did what was asked;
//! * `1` ([`ExitStatus::Failure`]): every handled error, as the original's `_err`/`_fail_card`:
//!   the user's input is wrong (a manifest with errors, a missing package), the container engine
//!   is unreachable or the Hub failed (both a diagnosis card, see [`diagnosis_for`]), or an
//!   unexpected failure (its cause chain, printed here, once);
//! * `2` ([`ExitStatus::Error`]): a usage error (clap's, a missing command, an unreadable
//!   `lint` input, a command that is not built yet);
//! * `130` ([`ExitStatus::Interrupted`]): Ctrl-C stopped the command (serve's boot watch
//!   detaches and says so, the container keeps booting);
//! * a child's own code ([`ExitStatus::Child`]): `curl` exits as the `curl` it ran, as the
//!   original's does.

pub mod args;
pub mod commands;
pub mod events;
// Only the printer writes to the terminal (it knows about colour, piping and progress bars).
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod printer;
pub(crate) mod progress;
mod report;

use std::process::ExitCode;

use tt_model_local::Local;

use crate::printer::Printer;
pub use crate::report::{diagnosis_for, engine_unreachable_card, hub_card, registry_card};

/// The exit class of a command; see the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything went as asked.
    Success,
    /// User or validation errors were found and reported.
    Failure,
    /// A usage error.
    Error,
    /// Ctrl-C stopped the command (128 + SIGINT).
    Interrupted,
    /// The exit code of the child the command ran in the foreground (`curl`).
    Child(u8),
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        match status {
            ExitStatus::Success => ExitCode::from(0),
            ExitStatus::Failure => ExitCode::from(1),
            ExitStatus::Error => ExitCode::from(2),
            ExitStatus::Interrupted => ExitCode::from(130),
            ExitStatus::Child(code) => ExitCode::from(code),
        }
    }
}

/// The CLI's one tokio runtime (multi-threaded: the engine client, Hub transfers and the boot
/// watch run side by side), built on first use and shared by every command.
pub(crate) fn runtime() -> anyhow::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let built = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    Ok(RUNTIME.get_or_init(|| built))
}

/// Runs `fut` to completion on [`runtime`].
pub(crate) fn block_on<T>(
    fut: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    runtime()?.block_on(fut)
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

/// A usage error found after parsing (exit code 2 and a plain `✗ message`).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The original's hint for two command names in a row (`tt-model pull serve org/x`):
/// `tt-model serve org/x`, the second command with the rest.
fn two_commands_hint(argv: &[std::ffi::OsString]) -> Option<String> {
    let words: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let names: Vec<String> = args::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let first = words.iter().position(|w| !w.starts_with('-'))?;
    let second = words.get(first + 1)?;
    if !(names.contains(&words[first]) && names.contains(second)) {
        return None;
    }
    let mut hint = vec!["tt-model".to_string()];
    hint.extend(words[first + 1..].iter().cloned());
    Some(hint.join(" "))
}

/// Runs the CLI with the process arguments and returns its exit code.
pub fn main() -> ExitCode {
    adopt_legacy_names();
    run(std::env::args_os()).into()
}

/// The original's `tt-kernel` → `tt-model` rename shims: every `TT_KERNEL_*` variable stands
/// in for its unset `TT_MODEL_*` name, and running as `tt-kernel` says it is deprecated.
fn adopt_legacy_names() {
    for (name, value) in tt_model_local::state::legacy_env_to_adopt(std::env::vars_os()) {
        // SAFETY: called first thing in `main`, before any thread exists, so nothing reads
        // the environment concurrently.
        unsafe { std::env::set_var(name, value) };
    }
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if std::path::Path::new(&argv0).file_name() == Some(std::ffi::OsStr::new("tt-kernel")) {
        printer::Printer::plain(false)
            .err_raw("! `tt-kernel` is the old name of this tool; run `tt-model` instead\n");
    }
}

/// Runs the CLI with explicit arguments (the first is the program name).
pub fn run<I, T>(argv: I) -> ExitStatus
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let parsed = args::parse(argv.iter().cloned());
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            // Usage errors (with clap's did-you-mean tips) go to stderr with exit 2.
            if err.use_stderr() {
                let _ = err.print();
                if let Some(hint) = two_commands_hint(&argv) {
                    printer::Printer::plain(false).err_raw(&format!("\nDid you mean:  {hint}\n"));
                }
                return ExitStatus::Error;
            }
            // Help goes to stdout with exit 0.
            let _ = err.print();
            return ExitStatus::Success;
        }
    };
    let mut printer = Printer::new(cli.global.verbose, cli.global.no_color);
    // The progress events are serve's and pull's (tt's contract); any other command keeps its
    // stdout its own even when the variable is exported.
    if !matches!(
        cli.command,
        Some(args::Commands::Serve(_) | args::Commands::Pull(_))
    ) {
        printer = printer.without_events();
    }
    if cli.global.version {
        printer.out(env!("CARGO_PKG_VERSION"));
        return ExitStatus::Success;
    }
    let Some(command) = cli.command else {
        let _ = args::command().print_help();
        return ExitStatus::Error;
    };
    // The settings every command shares, resolved once.
    let local = Local::from_env();
    match commands::dispatch(command, &printer, &local) {
        Ok(status) => status,
        Err(err) => report::report(&err, &printer, &local),
    }
}
