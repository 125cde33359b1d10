//! `EngineError`: one variant per engine operation, the bollard error kept as `#[source]`.
//!
//! Messages name the thing that failed (host, tag, container) and leave the cause to the
//! error chain, so a chain renderer prints each layer once.

/// The underlying engine-client error. Re-exported as an opaque source type so callers can
/// walk the chain without depending on bollard.
pub type Cause = bollard::errors::Error;

/// Why an engine operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The client could not be set up for the host (bad `DOCKER_HOST`, unknown scheme).
    #[error("Cannot use the container engine address `{host}`")]
    Connect {
        /// The engine address tried (`DOCKER_HOST` or the default socket).
        host: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// The engine did not answer (daemon down, socket missing or not permitted).
    #[error("The container engine at `{host}` is not reachable (is dockerd running?)")]
    Unreachable {
        /// The engine address tried.
        host: String,
        /// The client library's error from the version check or ping.
        #[source]
        source: Cause,
    },
    /// The engine speaks an API older than the one we need.
    #[error("The container engine speaks API {found}; tt-model needs at least {needed}")]
    TooOld {
        /// The API version the engine reported (e.g. `1.41`).
        found: String,
        /// The oldest API version tt-model supports, `major.minor`.
        needed: String,
    },
    /// An image build request failed before or while streaming.
    #[error("Building image `{tag}` failed")]
    BuildRequest {
        /// The image tag being built.
        tag: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// The daemon reported a build step failure inside the build stream.
    #[error("Building image `{tag}` failed: {message}")]
    Build {
        /// The image tag being built.
        tag: String,
        /// The daemon's error message for the failed step.
        message: String,
        /// The last build output lines before the failure, for the user.
        last_lines: Vec<String>,
    },
    /// The build finished without reporting an image id.
    #[error("Building image `{tag}` finished without an image id")]
    NoImageId {
        /// The image tag being built.
        tag: String,
    },
    /// Streaming the build context into the request failed.
    #[error("Streaming the build context for `{tag}` failed")]
    Context {
        /// The image tag being built.
        tag: String,
        /// The I/O error reading or sending the context.
        #[source]
        source: std::io::Error,
    },
    /// `image inspect` failed (including "no such image": see [`EngineError::is_not_found`]).
    #[error("Cannot inspect image `{reference}`")]
    InspectImage {
        /// The image name, tag or id inspected.
        reference: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Tagging an image failed.
    #[error("Cannot tag image `{image}` as `{tag}`")]
    Tag {
        /// The image (id or reference) being tagged.
        image: String,
        /// The tag it was to get (`repo:tag`).
        tag: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Removing an image failed.
    #[error("Cannot remove image `{reference}`")]
    RemoveImage {
        /// The image name, tag or id to remove.
        reference: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Importing a root filesystem tar as an image failed.
    #[error("Cannot import image `{reference}`")]
    Import {
        /// The reference the imported image was to get.
        reference: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Pulling an image failed; `answer` is what the engine or the registry said (unknown
    /// manifest, refused credentials, unreachable host).
    #[error("Pulling image `{reference}` failed: {answer}")]
    Pull {
        /// The reference pulled.
        reference: String,
        /// The engine's or the registry's answer.
        answer: String,
    },
    /// Exporting (`docker save`) an image failed.
    #[error("Cannot export image `{reference}`")]
    Export {
        /// The image name, tag or id exported.
        reference: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// The exported archive is not what the engine should produce.
    #[error("The archive exported for `{reference}` is malformed: {detail}")]
    BadArchive {
        /// The image the archive is for.
        reference: String,
        /// What is wrong with it.
        detail: String,
    },
    /// Writing an exported image to disk failed.
    #[error("Cannot write the image layout to `{path}`")]
    Write {
        /// The file or directory being written (or that had to be empty).
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Creating a container failed.
    #[error("Cannot create container `{name}`")]
    Create {
        /// The container name requested.
        name: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Starting a container failed.
    #[error("Cannot start container `{name}`")]
    Start {
        /// The container name or id.
        name: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Waiting for a container to exit failed.
    #[error("Cannot wait for container `{name}`")]
    Wait {
        /// The container name or id.
        name: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Stopping a container failed.
    #[error("Cannot stop container `{name}`")]
    Stop {
        /// The container name or id.
        name: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Removing a container failed.
    #[error("Cannot remove container `{name}`")]
    Remove {
        /// The container name or id.
        name: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Inspecting a container failed.
    #[error("Cannot inspect container `{name}`")]
    InspectContainer {
        /// The container name or id.
        name: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Listing containers failed.
    #[error("Cannot list containers")]
    List {
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// Reading a container's logs failed.
    #[error("Cannot read the logs of container `{name}`")]
    Logs {
        /// The container name or id.
        name: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// The operation was cancelled by the user.
    #[error("Cancelled")]
    Cancelled,
}

impl EngineError {
    /// The bollard cause, when there is one.
    fn cause(&self) -> Option<&Cause> {
        match self {
            Self::Connect { source, .. }
            | Self::Unreachable { source, .. }
            | Self::BuildRequest { source, .. }
            | Self::InspectImage { source, .. }
            | Self::Tag { source, .. }
            | Self::RemoveImage { source, .. }
            | Self::Import { source, .. }
            | Self::Export { source, .. }
            | Self::Create { source, .. }
            | Self::Start { source, .. }
            | Self::Wait { source, .. }
            | Self::Stop { source, .. }
            | Self::Remove { source, .. }
            | Self::InspectContainer { source, .. }
            | Self::List { source }
            | Self::Logs { source, .. } => Some(source),
            _ => None,
        }
    }

    /// The HTTP status the engine answered with, if the failure was an engine response.
    pub fn status_code(&self) -> Option<u16> {
        match self.cause()? {
            bollard::errors::Error::DockerResponseServerError { status_code, .. } => {
                Some(*status_code)
            }
            _ => None,
        }
    }

    /// The engine said the object does not exist (HTTP 404).
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// The engine refused because of a conflict (HTTP 409: name in use, container running).
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409)
    }

    /// The engine itself could not be reached.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::Connect { .. })
    }
}
