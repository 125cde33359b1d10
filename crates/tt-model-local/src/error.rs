//! [`LocalError`]: why something this machine holds could not be used. A refusal names what
//! the user gave (`field`) and says what to do; every other variant keeps the failing
//! library's own error (with its path and cause) as it is, so the caller renders one error
//! type per library, once.

use tt_model_engine::EngineError;
use tt_model_engine::oci_load::LoadError;
use tt_model_hub::HubError;
use tt_model_hub::registry::RegistryError;
use tt_model_manifest::ManifestError;
use tt_model_manifest::wire::WireReadError;

use crate::localdb::LocalDbError;

/// What an error is about, for the caller's exit class and rendering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The user's input is wrong or names what is not there: a plain message, no error chain.
    Input,
    /// The machine (engine, Hub, disk) failed: the caller renders the cause's own card or chain.
    Environment,
}

/// Why something this machine holds could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The input named by `field` cannot be used; `message` says why and what to run instead.
    #[error("{message}")]
    Refused {
        /// What the user gave: `target`, `--profile`, `--timeout`, `card`, `image`, `weights`;
        /// `curl`'s `--base-url` (what the server there answers), `--model`, `--tools`, `curl`.
        field: &'static str,
        /// The refusal, with its remedies (one runnable command per `→` line).
        message: String,
    },
    /// An authoring manifest (`tt-model.yaml`) with errors, located as `lint` locates them.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A package manifest (`tt_kernel_manifest.json`) that cannot be read; names its path.
    #[error(transparent)]
    WireRead(#[from] WireReadError),
    /// A package manifest read from `path` that is not a servable package.
    #[error("{problem}")]
    Wire {
        /// The manifest file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        problem: tt_model_manifest::WireError,
    },
    /// A file or directory of this machine's state could not be read or written.
    #[error("cannot {action} {}: {detail}", path.display())]
    Io {
        /// What was being done: `read`, `write`, `create`.
        action: &'static str,
        /// The path.
        path: std::path::PathBuf,
        /// The I/O error (its message is this error's; no separate cause).
        detail: std::io::Error,
    },
    /// The installed-packages database.
    #[error(transparent)]
    Db(#[from] LocalDbError),
    /// The container engine.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Loading an image layout into the engine, failing on the engine's side.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The Hub.
    #[error(transparent)]
    Hub(#[from] HubError),
    /// A package repo that could not be fetched from the Hub.
    #[error("cannot fetch {what} from {endpoint}")]
    Fetch {
        /// The repo and revision asked for (`org/name@rev`).
        what: String,
        /// The Hub asked.
        endpoint: String,
        /// The Hub's error (boxed: it is large, and every `Result` of the crate carries this).
        #[source]
        source: Box<HubError>,
    },
    /// An OCI registry.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The chip allocation lock (serve).
    #[error(transparent)]
    Lock(#[from] crate::devices::LockError),
    /// A Hub or registry failure, with what it means for the user's repo or data: the
    /// diagnosis card's consequence ([`crate::hub_access::consequence`]).
    #[error("{consequence}")]
    Consequence {
        /// What did or did not happen because of it.
        consequence: String,
        /// The Hub's or the registry's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl LocalError {
    /// A refusal of the input `field`.
    pub fn refused(field: &'static str, message: impl Into<String>) -> Self {
        LocalError::Refused {
            field,
            message: message.into(),
        }
    }

    /// What the error is about.
    pub fn class(&self) -> ErrorClass {
        match self {
            LocalError::Refused { .. } | LocalError::Manifest(_) => ErrorClass::Input,
            _ => ErrorClass::Environment,
        }
    }

    /// The library error a transparent variant carries (the engine's, the Hub's, …), for a
    /// renderer that knows those types; `None` for a refusal.
    pub fn inner(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LocalError::Refused { .. } | LocalError::Wire { .. } | LocalError::Io { .. } => None,
            // The box is the source in the chain: the Hub's error itself is what renders.
            LocalError::Fetch { source, .. } => Some(source.as_ref()),
            LocalError::Manifest(e) => Some(e),
            LocalError::WireRead(e) => Some(e),
            LocalError::Db(e) => Some(e),
            LocalError::Engine(e) => Some(e),
            LocalError::Load(e) => Some(e),
            LocalError::Hub(e) => Some(e),
            LocalError::Registry(e) => Some(e),
            LocalError::Lock(e) => Some(e),
            LocalError::Consequence { source, .. } => Some(source.as_ref()),
        }
    }
}
