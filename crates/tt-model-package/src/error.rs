//! `PackageError`: one variant per pipeline step; causes kept as `#[source]`.

use std::path::PathBuf;

/// Why packaging failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackageError {
    /// The manifest could not be read, or has errors (each located).
    #[error(transparent)]
    Manifest(Box<tt_model_manifest::ManifestError>),
    /// The manifest could not be turned into a package spec.
    #[error("{0}")]
    Spec(String),
    /// A feature the manifest asks for is not available in this build.
    #[error("{0}")]
    Unsupported(String),
    /// The tt-metal tree is missing or not a checkout.
    #[error("`source.tt_metal`: {path} {problem}")]
    MetalTree {
        /// The tree as resolved (or the fetched checkout).
        path: PathBuf,
        /// What is wrong, phrased to follow the path (e.g. `does not exist`).
        problem: String,
    },
    /// An allowlisted path does not exist.
    #[error(
        "`{field}` entry `{entry}` does not exist under {root} — the allowlist names exactly what ships, so a missing entry is an error, not a skip"
    )]
    MissingCode {
        /// The manifest key the entry belongs to (`source.code`, `source.extra_code`).
        field: &'static str,
        /// The allowlist entry as written.
        entry: String,
        /// The root it was looked up under (the tt-metal tree or the `extra_code` root).
        root: PathBuf,
    },
    /// `runtime.lock` names a file that is not there.
    #[error("`runtime.lock` names {0}, which does not exist")]
    MissingLock(PathBuf),
    /// `--out` would put the build inside a git checkout.
    #[error(
        "`--out` {0} is inside a git checkout; package outputs (images, code copies) do not belong in version control — choose a directory outside it"
    )]
    OutInsideGit(PathBuf),
    /// A template failed to render (a bug, or a value the template cannot take).
    #[error("Rendering template `{name}` failed: {detail}")]
    Template {
        /// The template's name (`Dockerfile`, `card.md`, …).
        name: String,
        /// minijinja's error, with its causes.
        detail: String,
    },
    /// Reading or writing a file failed.
    #[error("{action} `{path}`")]
    Io {
        /// What was being done, as the message's start (`Reading`, `Walking`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A git source (`{repo, ref}`) could not be pinned or fetched: an unreachable repository,
    /// a ref that names nothing, a commit the server will not send.
    #[error("`{field}`: {repo} at `{git_ref}`: {detail}")]
    GitSource {
        /// The manifest key (`runtime.plugin`, `source.extra_code[0].root`, …).
        field: String,
        /// The repository as authored.
        repo: String,
        /// The ref as authored (branch, tag or commit).
        git_ref: String,
        /// What went wrong (git's own message where there is one).
        detail: String,
    },
    /// A git query about the tt-metal tree failed.
    #[error("Reading git facts of {path} failed: {detail}")]
    Git {
        /// The tt-metal tree.
        path: PathBuf,
        /// Why the query failed.
        detail: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] tt_model_engine::EngineError),
    /// A verify assertion failed inside the image.
    #[error("Verification failed: check {index} `{check}` exited with status {status}")]
    Verify {
        /// 1-based position of the check in `verify.sh` (kind checks first, then the author's).
        index: usize,
        /// The check's text as written ([`Check::text`](crate::spec::Check::text)).
        check: String,
        /// Its exit status.
        status: i64,
        /// What the check printed.
        output: String,
    },
    /// The verify run ended without the markers we expect (the script did not run).
    #[error("Verification did not complete (exit {status})")]
    VerifyIncomplete {
        /// The verify run's exit status.
        status: i64,
        /// Everything it printed.
        output: String,
    },
    /// The `runtime.cargo` workspace could not be built from (no manifest, no lock, no
    /// such package, not a static executable).
    #[error("`runtime.cargo`: {workspace}: {detail}")]
    Cargo {
        /// The workspace directory, resolved.
        workspace: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The `runtime.cargo` binary failed to compile.
    #[error("`runtime.cargo`: building `{package}` failed:\n{first_error}")]
    CargoBuild {
        /// The `runtime.cargo` package being built.
        package: String,
        /// The first compiler error as rustc rendered it, else cargo's own `error:` paragraph.
        first_error: String,
    },
    /// The user pressed Ctrl-C twice.
    #[error("Cancelled; the previous output (if any) is untouched")]
    Cancelled,
}

/// How a failure ends the command: what its exit code and its rendering follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The manifest, a source it names or an option is wrong: the message says what to fix
    /// (exit 1, no cause chain).
    Input,
    /// The build, a verify check or the compiler failed: a diagnosis with the evidence (exit 1).
    Failed,
    /// The machine let us down (the engine, the file system, git): the message and its causes
    /// (exit 1).
    Environment,
    /// The user cancelled (exit 130).
    Cancelled,
}

impl PackageError {
    /// This failure's [`ErrorClass`].
    pub fn class(&self) -> ErrorClass {
        match self {
            PackageError::Manifest(_)
            | PackageError::Spec(_)
            | PackageError::Unsupported(_)
            | PackageError::MetalTree { .. }
            | PackageError::MissingCode { .. }
            | PackageError::MissingLock(_)
            | PackageError::OutInsideGit(_)
            | PackageError::GitSource { .. }
            | PackageError::Cargo { .. } => ErrorClass::Input,
            PackageError::Verify { .. }
            | PackageError::VerifyIncomplete { .. }
            | PackageError::CargoBuild { .. }
            | PackageError::Template { .. } => ErrorClass::Failed,
            PackageError::Engine(tt_model_engine::EngineError::Build { .. }) => ErrorClass::Failed,
            PackageError::Io { .. } | PackageError::Git { .. } | PackageError::Engine(_) => {
                ErrorClass::Environment
            }
            PackageError::Cancelled => ErrorClass::Cancelled,
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| PackageError::Io {
            action,
            path,
            source,
        }
    }
}
