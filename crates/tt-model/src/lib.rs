//! `tt-model`: package ML models for Tenstorrent hardware into container images and serve them.
//!
//! The binary is thin: [`main`] parses the arguments, builds the [`printer::Printer`], runs one
//! command from [`commands`], and sorts the outcome into an exit class:
//!
//! * `0` ([`ExitStatus::Success`]): the command did what was asked;
//! * `1` ([`ExitStatus::Failure`]): every handled error, as the original's `_err`/`_fail_card`:
//!   the user's input is wrong (a manifest with errors, a missing package), the container engine
//!   is unreachable or the Hub failed (both a diagnosis card, see [`diagnosis_for`]), or an
//!   unexpected failure (its cause chain, printed here, once);
//! * `2` ([`ExitStatus::Error`]): a usage error (clap's, a missing command, an unreadable
//!   `lint` input, a command that is not built yet);
//! * `130` ([`ExitStatus::Interrupted`]): Ctrl-C stopped the command (serve's boot watch
//!   detaches and says so, the container keeps booting).

#![cfg_attr(not(test), warn(clippy::print_stdout, clippy::print_stderr))]

pub mod args;
pub mod commands;
pub(crate) mod local;
// Only the printer writes to the terminal (it knows about colour, piping and progress bars).
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod printer;
pub(crate) mod progress;

use std::process::ExitCode;

use clap::FromArgMatches;

use crate::args::Cli;
use crate::printer::{DiagnosisCard, Printer};

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
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        match status {
            ExitStatus::Success => ExitCode::from(0),
            ExitStatus::Failure => ExitCode::from(1),
            ExitStatus::Error => ExitCode::from(2),
            ExitStatus::Interrupted => ExitCode::from(130),
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

/// What a Hub failure means for the repo or this machine (the card's consequence), attached as
/// context by the command that knows it (`push`: the repo keeps its previous commit).
#[derive(Debug)]
pub struct HubConsequence(pub String);

impl std::fmt::Display for HubConsequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HubConsequence {}

/// The diagnosis card for a failure the user can act on without reading a cause chain: an
/// unreachable container engine or a Hub failure, wherever it sits in the chain. `None` for
/// anything else.
pub fn diagnosis_for(err: &anyhow::Error) -> Option<DiagnosisCard> {
    let others = |skip: &dyn std::error::Error| -> Vec<String> {
        let skip = skip.to_string();
        err.chain()
            .map(|c| c.to_string())
            .filter(|m| *m != skip)
            .collect()
    };
    // anyhow's own downcast sees through context layers; the chain's items do not.
    let consequence = err
        .downcast_ref::<HubConsequence>()
        .or_else(|| err.chain().find_map(|c| c.downcast_ref::<HubConsequence>()))
        .map(|c| c.0.clone());
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<tt_model_engine::EngineError>()
            && e.is_unreachable()
        {
            return Some(engine_unreachable_card(e, others(e)));
        }
        let card = if let Some(e) = cause.downcast_ref::<tt_model_hub::error::HubError>() {
            hub_card(e, others(e))
        } else if let Some(e) = cause.downcast_ref::<tt_model_hub::registry::RegistryError>() {
            registry_card(e, others(e))
        } else {
            continue;
        };
        let mut card = card;
        if let Some(c) = &consequence {
            card.evidence.retain(|line| line != c);
            card.consequence = Some(c.clone());
        }
        return Some(card);
    }
    None
}

/// The card for an engine that does not answer (`evidence`: the rest of the error chain).
pub fn engine_unreachable_card(
    e: &tt_model_engine::EngineError,
    evidence: Vec<String>,
) -> DiagnosisCard {
    DiagnosisCard {
        cause: e.to_string(),
        evidence,
        consequence: Some("this command needs the container engine; nothing was changed".into()),
        actions: vec![
            "start the engine (sudo systemctl start docker) or point DOCKER_HOST at a running one"
                .into(),
            "let your user use its socket: sudo usermod -aG docker $USER, then log in again".into(),
        ],
    }
}

/// The card for a Hub failure (`evidence`: the rest of the error chain).
pub fn hub_card(e: &tt_model_hub::error::HubError, evidence: Vec<String>) -> DiagnosisCard {
    use tt_model_hub::error::HubError as H;
    let endpoint = tt_model_hub::env::HubEnv::from_env().endpoint;
    let actions: Vec<String> = match e {
        H::Network { .. } | H::Http { .. } | H::BadResponse { .. } => vec![
            format!("check HF_ENDPOINT ({endpoint}), the network and any proxy"),
            "retry: a download resumes where it stopped".into(),
        ],
        H::Refused { status, .. } => vec![
            format!("the Hub said why ({status}); fix that and retry"),
            "a write needs a token with write access to the namespace (tt-model login)".into(),
        ],
        H::TokenRejected { .. } => {
            vec!["log in again with a valid token: tt-model login, or set HF_TOKEN".into()]
        }
        H::Unauthorized { .. } => vec![
            "use a token with access to the repo's namespace: tt-model login, or set HF_TOKEN"
                .into(),
            "check the repo id (<namespace>/<name>)".into(),
        ],
        H::NotFound { .. } | H::Gated { .. } => {
            vec![
                "check the repo id (<org>/<name>) and the revision".into(),
                "set HF_TOKEN to a token that can read the repo".into(),
            ]
        }
        H::BadRepoId(_) | H::BadRevision(_) => {
            vec!["name the package as <org>/<name>[@revision]".into()]
        }
        _ if e.is_no_space() => vec![
            "free space on the HF cache filesystem, or point HF_HUB_CACHE at a larger one".into(),
        ],
        H::Io { .. } => vec!["check that the HF cache (HF_HUB_CACHE) is writable".into()],
        _ => vec!["retry: the bad file was deleted and is fetched again".into()],
    };
    DiagnosisCard {
        cause: format!("the Hub: {e}"),
        evidence,
        consequence: Some("nothing was installed".into()),
        actions,
    }
}

/// The card for an OCI registry failure (`evidence`: the rest of the error chain).
pub fn registry_card(
    e: &tt_model_hub::registry::RegistryError,
    evidence: Vec<String>,
) -> DiagnosisCard {
    use tt_model_hub::registry::RegistryError as R;
    let actions: Vec<String> = match e {
        R::Network { .. } => vec![
            "check image.registry (host and port) and that the registry is running".into(),
            "a registry other than loopback is spoken to over HTTPS: check its certificate and any proxy".into(),
        ],
        R::Unauthorized { .. } | R::Helper { .. } => vec![
            "store credentials for the registry in the Docker config (docker login <host>, or a credential helper); tt-model reads $DOCKER_CONFIG/config.json".into(),
            "check that the account may push to (or pull from) the repository".into(),
        ],
        R::BadTarget(_) | R::BadRepository(_) => vec![
            "set image.registry to <host>[:<port>]/<namespace> and image.repository to a lowercase name, then package again".into(),
        ],
        R::DigestMismatch { .. } | R::SizeMismatch { .. } | R::NotFound { .. } => vec![
            "ask the publisher to push the package again (its image in the registry is missing or damaged)".into(),
            "retry: nothing damaged was kept".into(),
        ],
        R::ManifestRewritten { .. } => vec![
            "use a registry that stores OCI manifests as sent (distribution, zot, ghcr.io, Harbor)".into(),
        ],
        _ => vec!["the registry said why; fix that and retry (blobs already sent are skipped)".into()],
    };
    DiagnosisCard {
        cause: format!("the image registry: {e}"),
        evidence,
        consequence: Some("nothing was installed".into()),
        actions,
    }
}

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

/// Prints a command's error once and returns its exit class.
fn report(err: &anyhow::Error, printer: &Printer) -> ExitStatus {
    if let Some(user) = err.downcast_ref::<UserError>() {
        printer.error(&user.to_string());
        ExitStatus::Failure
    } else if let Some(usage) = err.downcast_ref::<UsageError>() {
        printer.error(&usage.to_string());
        ExitStatus::Error
    } else if let Some(tt_model_manifest::ManifestError::Invalid {
        path,
        source_text,
        diagnostics,
    }) = err.downcast_ref()
    {
        commands::lint::print_invalid(printer, path, source_text, diagnostics);
        ExitStatus::Failure
    } else if let Some(card) = diagnosis_for(err) {
        printer.fail(&card);
        ExitStatus::Failure
    } else {
        printer.error_chain(err);
        ExitStatus::Failure
    }
}

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
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let parsed = args::command()
        .try_get_matches_from(&argv)
        .and_then(|m| Cli::from_arg_matches(&m));
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
    let printer = Printer::new(cli.global.verbose, cli.global.no_color);
    if cli.global.version {
        printer.out(env!("CARGO_PKG_VERSION"));
        return ExitStatus::Success;
    }
    let Some(command) = cli.command else {
        let _ = args::command().print_help();
        return ExitStatus::Error;
    };
    match commands::dispatch(command, &printer) {
        Ok(status) => status,
        Err(err) => report(&err, &printer),
    }
}

#[cfg(test)]
mod diagnosis_tests {
    use super::*;

    #[test]
    fn a_registry_failure_gets_a_card_with_the_commands_consequence() {
        let e = tt_model_hub::registry::RegistryError::NotFound {
            what: "manifest",
            host: "127.0.0.1:5000".into(),
            repository: "tt/x".into(),
            reference: "sha256:ab".into(),
        };
        let err = anyhow::Error::new(e).context(HubConsequence("the repo is unchanged".into()));
        let card = diagnosis_for(&err).expect("a card");
        assert!(
            card.cause.starts_with(
                "the image registry: manifest sha256:ab is not in 127.0.0.1:5000/tt/x"
            ),
            "{}",
            card.cause
        );
        assert_eq!(card.consequence.as_deref(), Some("the repo is unchanged"));
        assert!(
            card.evidence.iter().all(|l| l != "the repo is unchanged"),
            "{:?}",
            card.evidence
        );
        assert!(card.actions[0].contains("push the package again"));
    }
}
