//! The one place a command's error is rendered ([`report`]), by what it is: a refusal of the
//! user's input as `✗ message`; a manifest with errors as `lint` shows it; an unreachable
//! engine, a Hub or a registry failure as a diagnosis card ([`diagnosis_for`]); anything else
//! as its cause chain. Library errors are recognised whether they come directly or inside a
//! [`LocalError`].

pub(crate) mod findings;
mod package;

use tt_model_local::{Local, LocalError};

pub use package::PackageFailed;

use crate::events::DiagnosisCard;
use crate::printer::Printer;
use crate::{ExitStatus, UsageError, UserError};

/// The library error a [`LocalError`] carries (the engine's, the Hub's, a manifest's), so each
/// library's errors are rendered by one rule whether or not they came through the local crate.
fn unwrap_local<'e>(
    c: &'e (dyn std::error::Error + 'static),
) -> &'e (dyn std::error::Error + 'static) {
    c.downcast_ref::<LocalError>()
        .and_then(LocalError::inner)
        .unwrap_or(c)
}

/// The first error of type `T` in `err`'s chain, seen through [`LocalError`]'s wrappers.
fn find_in_chain<T: std::error::Error + Send + Sync + 'static>(err: &anyhow::Error) -> Option<&T> {
    err.downcast_ref::<T>().or_else(|| {
        err.chain()
            .find_map(|c| unwrap_local(c).downcast_ref::<T>())
    })
}

/// The diagnosis card for a failure the user can act on without reading a cause chain: an
/// unreachable container engine or a Hub failure, wherever it sits in the chain. `None` for
/// anything else. `local` names the Hub endpoint in the card's actions.
pub fn diagnosis_for(err: &anyhow::Error, local: &Local) -> Option<DiagnosisCard> {
    let others = |skip: &dyn std::error::Error| -> Vec<String> {
        let skip = skip.to_string();
        err.chain()
            .map(|c| c.to_string())
            .filter(|m| *m != skip)
            .collect()
    };
    // What the failure means for the repo, as the use case or command that knows it said.
    let consequence = err
        .chain()
        .find_map(|c| match c.downcast_ref::<LocalError>() {
            Some(LocalError::Consequence { consequence, .. }) => Some(consequence.clone()),
            _ => None,
        });
    for cause in err.chain() {
        let cause = unwrap_local(cause);
        if let Some(e) = cause.downcast_ref::<tt_model_engine::EngineError>()
            && e.is_unreachable()
        {
            return Some(engine_unreachable_card(e, others(e)));
        }
        let card = if let Some(e) = cause.downcast_ref::<tt_model_hub::error::HubError>() {
            hub_card(e, others(e), &local.hub().endpoint)
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

/// The card for a Hub failure (`evidence`: the rest of the error chain; `endpoint`: the Hub
/// asked).
pub fn hub_card(
    e: &tt_model_hub::error::HubError,
    evidence: Vec<String>,
    endpoint: &str,
) -> DiagnosisCard {
    use tt_model_hub::error::HubError as H;
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
    // A missing repo is the common case: a short cause (tt quotes it in one sentence), the
    // Hub's full answer first among the evidence.
    let (cause, evidence) = match e {
        H::NotFound { repo, revision, .. } => (
            format!("the Hub has no {repo}@{revision}"),
            std::iter::once(e.to_string()).chain(evidence).collect(),
        ),
        _ => (format!("the Hub: {e}"), evidence),
    };
    DiagnosisCard {
        cause,
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

/// Prints a command's error once and returns its exit class: the one place errors are
/// rendered.
pub(crate) fn report(err: &anyhow::Error, printer: &Printer, local: &Local) -> ExitStatus {
    use tt_model_manifest::ManifestError;
    let refused = err
        .downcast_ref::<LocalError>()
        .filter(|e| matches!(e, LocalError::Refused { .. }));
    if let Some(failed) = err.downcast_ref::<PackageFailed>()
        && let Some(status) = package::render(failed, printer)
    {
        return status;
    }
    if let Some(user) = err.downcast_ref::<UserError>() {
        printer.error(&user.to_string());
        ExitStatus::Failure
    } else if let Some(refused) = refused {
        printer.error(&refused.to_string());
        ExitStatus::Failure
    } else if let Some(usage) = err.downcast_ref::<UsageError>() {
        printer.error(&usage.to_string());
        ExitStatus::Error
    } else if let Some(ManifestError::Invalid {
        path,
        source_text,
        diagnostics,
    }) = find_in_chain::<ManifestError>(err)
    {
        findings::print_invalid(printer, path, source_text, diagnostics);
        ExitStatus::Failure
    } else if let Some(e @ ManifestError::Read { source, .. }) = find_in_chain::<ManifestError>(err)
    {
        // An unreadable manifest is the user's input, as lint reports it.
        printer.error(&format!("{e}: {source}"));
        ExitStatus::Failure
    } else if let Some(fleet) = err.downcast_ref::<tt_model_fleet::FleetError>() {
        // A fleet that cannot be rendered names what to pass instead.
        printer.error(&fleet.to_string());
        ExitStatus::Failure
    } else if let Some(card) = diagnosis_for(err, local) {
        printer.fail(&card);
        ExitStatus::Failure
    } else {
        printer.error_chain(err);
        ExitStatus::Failure
    }
}

#[cfg(test)]
mod diagnosis_tests {
    use super::*;

    /// A use case's Hub failure (push's) carries its consequence as a library error; the card
    /// is the Hub's, with that consequence, and it is not repeated among the evidence.
    #[test]
    fn a_library_hub_failure_gets_a_card_with_its_consequence() {
        let e = tt_model_hub::HubError::TokenRejected {
            repo: "acme/x".into(),
        };
        let err = anyhow::Error::new(tt_model_local::hub_access::consequence(
            "nothing was sent; the repo is unchanged",
        )(e));
        let local = Local::new(
            "/nonexistent".into(),
            tt_model_hub::env::HubEnv::from_lookup(|_| None),
        );
        let card = diagnosis_for(&err, &local).expect("a card");
        assert!(card.cause.starts_with("the Hub: "), "{}", card.cause);
        assert_eq!(
            card.consequence.as_deref(),
            Some("nothing was sent; the repo is unchanged")
        );
        assert!(
            !card
                .evidence
                .iter()
                .any(|l| l.contains("the repo is unchanged")),
            "{:?}",
            card.evidence
        );
        assert!(
            card.actions.iter().any(|a| a.contains("tt-model login")),
            "{:?}",
            card.actions
        );
    }

    #[test]
    fn a_registry_failure_gets_a_card_with_the_commands_consequence() {
        let e = tt_model_hub::registry::RegistryError::NotFound {
            what: "manifest",
            host: "127.0.0.1:5000".into(),
            repository: "tt/x".into(),
            reference: "sha256:ab".into(),
        };
        let err = anyhow::Error::new(tt_model_local::hub_access::consequence(
            "the repo is unchanged",
        )(e));
        let local = Local::new(
            "/nonexistent".into(),
            tt_model_hub::env::HubEnv::from_lookup(|_| None),
        );
        let card = diagnosis_for(&err, &local).expect("a card");
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
