//! `PackageError`: one variant per pipeline step; causes kept as `#[source]`. Everything that
//! is about one manifest field is (or converts to) a [`FieldError`] naming the field, so the
//! CLI locates it in the manifest and renders it as `lint` renders its findings.

use std::path::PathBuf;

pub use tt_model_manifest::FieldError;

/// Why packaging failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PackageError {
    /// The manifest could not be read, or has errors (each located).
    #[error(transparent)]
    Manifest(Box<tt_model_manifest::ManifestError>),
    /// A manifest field names something that is not there or not usable (a source path, a
    /// wheel, a default profile): located by its dotted path.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// The tt-metal tree is missing or not a checkout.
    #[error("`source.tt_metal`: {path} {problem}")]
    MetalTree {
        /// The tree as resolved (or the fetched checkout).
        path: PathBuf,
        /// What is wrong, phrased to follow the path (e.g. `does not exist`).
        problem: String,
    },
    /// The base image is not in the engine and `--pull never` forbids pulling it.
    #[error(
        "base image `{0}` is not in the container engine, and `--pull never` forbids pulling it; pull it (drop `--pull never`), build it locally (scripts/make-base-images.sh makes the test bases) or pass `--base-image`"
    )]
    BaseImageMissing(String),
    /// Pulling a base image failed; `answer` is the engine's or registry's own message.
    #[error(
        "pulling base image `{reference}` failed: {answer}; check the name and that `docker login` holds credentials for its registry, or build it locally and pass `--base-image`"
    )]
    BaseImagePull {
        /// The image as the manifest or `--base-image` names it.
        reference: String,
        /// What the engine or the registry answered.
        answer: String,
    },
    /// A background task (staging, streaming the context, building the Rust binary) panicked
    /// or was cancelled: a bug, with the task's own error as cause.
    #[error("the {task} task did not finish")]
    Task {
        /// What the task was doing (`staging`, `fetching sources`, …).
        task: &'static str,
        /// Why it did not finish.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The image layout the export wrote (or the one reused) cannot be read back.
    #[error("the exported image layout is unreadable")]
    Layout(#[source] tt_model_engine::oci_load::LoadError),
    /// `pip freeze` inside the built image failed.
    #[error("freezing the image's Python environment failed (exit {status}): {output}")]
    Freeze {
        /// The freeze run's exit status.
        status: i64,
        /// What it printed.
        output: String,
    },
    /// `runtime.lock` names a file that is not there.
    #[error("`runtime.lock` names {0}, which does not exist")]
    MissingLock(PathBuf),
    /// `--out` is a git checkout's root or a folder holding tracked files.
    #[error(
        "`--out` {0} holds files tracked by git; package outputs (images, code copies) do not belong among sources — choose a new or untracked directory (the default `build` is fine)"
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
    /// A BuildKit build could not be run (`--builder buildkit`): the engine is not on its local
    /// socket, or the exchange failed. A failing build step is [`PackageError::Engine`].
    #[error(transparent)]
    BuildKit(tt_model_engine::buildkit::BuildKitError),
    /// A verify assertion failed inside the image.
    #[error("Verification failed: check {index} `{check}` exited with status {status}")]
    Verify {
        /// 1-based position of the check in `verify.sh` (kind checks first, then the author's).
        index: usize,
        /// The check's text as written ([`VerifyStep::text`](crate::spec::VerifyStep::text)).
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
    /// The manifest, a source it names or an option is wrong: the message says what to fix,
    /// located in the manifest when it is about a field (exit 1, no cause chain).
    Input,
    /// The build, a verify check, the compiler or our own code failed: a diagnosis card with
    /// the evidence and the log (exit 1).
    Failed,
    /// The machine let us down (the engine, the file system, git, a missing base image): the
    /// message and its causes (exit 1).
    Environment,
    /// The user cancelled (exit 130).
    Cancelled,
}

impl PackageError {
    /// This failure's [`ErrorClass`].
    pub fn class(&self) -> ErrorClass {
        match self {
            PackageError::Manifest(_)
            | PackageError::Field(_)
            | PackageError::MetalTree { .. }
            | PackageError::MissingLock(_)
            | PackageError::OutInsideGit(_)
            | PackageError::GitSource { .. }
            | PackageError::Cargo { .. } => ErrorClass::Input,
            PackageError::Verify { .. }
            | PackageError::VerifyIncomplete { .. }
            | PackageError::CargoBuild { .. }
            | PackageError::Freeze { .. }
            | PackageError::Task { .. }
            | PackageError::Template { .. } => ErrorClass::Failed,
            PackageError::Engine(tt_model_engine::EngineError::Build { .. }) => ErrorClass::Failed,
            PackageError::Io { .. }
            | PackageError::Git { .. }
            | PackageError::Engine(_)
            | PackageError::BuildKit(_)
            | PackageError::Layout(_)
            | PackageError::BaseImageMissing(_)
            | PackageError::BaseImagePull { .. } => ErrorClass::Environment,
            PackageError::Cancelled => ErrorClass::Cancelled,
        }
    }

    /// The manifest field this failure is about, as a [`FieldError`] to locate and render as a
    /// lint finding; `None` when it is about no one field.
    pub fn field_error(&self) -> Option<FieldError> {
        match self {
            PackageError::Field(e) => Some(e.clone()),
            PackageError::MetalTree { .. } => Some(FieldError::new(
                "source-missing",
                "source.tt_metal",
                self.to_string(),
            )),
            PackageError::MissingLock(_) => Some(FieldError::new(
                "source-missing",
                "runtime.lock",
                self.to_string(),
            )),
            PackageError::Cargo { .. } => Some(FieldError::new(
                "cargo-workspace",
                "runtime.cargo.workspace",
                self.to_string(),
            )),
            PackageError::GitSource { field, .. } => Some(
                FieldError::new("git-source", format!("{field}.ref"), self.to_string()).with_help(
                    "check the repository URL and that the branch, tag or commit exists there (git ls-remote <repo> <ref>)",
                ),
            ),
            _ => None,
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

impl From<tt_model_engine::buildkit::BuildKitError> for PackageError {
    /// A step that failed is the engine's build failure, whichever builder ran it.
    fn from(e: tt_model_engine::buildkit::BuildKitError) -> Self {
        match e {
            tt_model_engine::buildkit::BuildKitError::Engine(e) => PackageError::Engine(e),
            e => PackageError::BuildKit(e),
        }
    }
}
