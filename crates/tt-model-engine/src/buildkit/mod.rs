//! Image builds through BuildKit (`POST /build?version=2`): what `RUN --mount=type=cache`
//! needs (a compiler cache that outlives the layer cache, issue 27). Same [`BuildRequest`] in,
//! same [`BuildEvent`]s out, same image id back and the same [`EngineError::Build`] for a
//! failing step as the classic driver in [`crate::build`], which stays the default.
//!
//! dockerd answers a BuildKit build with JSON items like the classic builder's, but its
//! progress comes as `{"id":"moby.buildkit.trace","aux":"<base64 protobuf>"}`: a
//! `moby.buildkit.v1.StatusResponse` per item, decoded here by hand (`status`: only the
//! fields a report needs) and turned into events (`events`). The image id is
//! the `{"id":"moby.image.id","aux":{"ID":…}}` item; a failure is an `errorDetail` item inside
//! the HTTP-200 stream, as in the classic protocol. No session is needed for a context sent
//! in the request body.
//!
//! Why not bollard's own BuildKit support (`buildkit_providerless`, measured for issue 27):
//! it alone does not compile (it needs `chrono` or `time` too), adds 56 crates (tonic, prost,
//! h2, chrono, …; 26 of them in no part of this workspace, so not in the offline registry
//! cache either) and roughly doubles the cold build's CPU time (3.0 → 6.6 min user on the
//! 2-core box), for a gRPC session this driver does not need. Why not bollard's request
//! modifier (`Docker::with_request_modifier`) on `build_image`: bollard then decodes the
//! answer with its non-BuildKit types, the first trace item fails to parse and its stream
//! ends there (dropping it aborts the build); re-aiming another endpoint's request at
//! `/build` works but rests on bollard's internal URI and body types. So `transport` sends
//! its own small HTTP/1 request with hyper, which bollard already links. It speaks to the
//! local unix socket only: a TCP or TLS `DOCKER_HOST` is refused with
//! [`BuildKitError::NeedsLocalSocket`] rather than half-supported.
//!
//! BuildKit's own rules the caller must know: `FROM sha256:<id>` is read as an image name on
//! Docker Hub (tag a local base and name the tag); step numbers are per stage
//! (`[builder 2/5]`), not per Dockerfile, and stages run in parallel, so a step's output and
//! its `Cached` follow its `Step` but not always right after it; `no_cache` also empties
//! every cache mount the build uses (change a build-arg the step reads to re-run it with its
//! cache kept).

mod events;
pub mod status;
mod transport;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use bytes::Bytes;
use futures_util::Stream;

use crate::build::{BuildEvent, BuildRequest};
use crate::client::Client;
use crate::error::EngineError;

pub use status::{DecodeError, DecodeErrorKind};

/// Why a BuildKit build failed. A failing step, a build without an image id and an unreadable
/// context are the classic driver's [`EngineError`]s, inside [`BuildKitError::Engine`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildKitError {
    /// The client talks to the engine over TCP (or TLS): the BuildKit request is sent on the
    /// local socket only.
    #[error(
        "BuildKit builds need the engine's local socket (unix://…); the engine address is `{host}`"
    )]
    NeedsLocalSocket {
        /// The engine address the client uses.
        host: String,
    },
    /// The engine socket could not be opened.
    #[error("Cannot connect to the engine socket `{}`", socket.display())]
    Connect {
        /// The socket path.
        socket: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed: the connection dropped, or the answer was not HTTP.
    #[error("The connection to the engine failed during the BuildKit build of `{tag}`")]
    Transport {
        /// The image tag being built.
        tag: String,
        /// The HTTP client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The engine refused the request (bad parameters, unsupported API).
    #[error("The engine refused to build `{tag}` (HTTP {status}): {message}")]
    Refused {
        /// The image tag being built.
        tag: String,
        /// The HTTP status.
        status: u16,
        /// The engine's message.
        message: String,
    },
    /// An item of the answer is not the JSON the engine sends.
    #[error("The engine sent a malformed build item for `{tag}`: {item}")]
    BadItem {
        /// The image tag being built.
        tag: String,
        /// The item as received (lossy UTF-8, at most 200 characters).
        item: String,
        /// Why it did not parse.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A progress record is not valid protobuf (`StatusResponse`).
    #[error("The engine sent a malformed BuildKit progress record for `{tag}`")]
    Decode {
        /// The image tag being built.
        tag: String,
        /// Where and why.
        #[source]
        source: DecodeError,
    },
    /// A failure the classic driver reports the same way.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// One item of the build answer.
#[derive(Debug, serde::Deserialize)]
struct Item {
    /// `moby.buildkit.trace` or `moby.image.id`.
    id: Option<String>,
    /// Base64 `StatusResponse` (trace) or `{"ID": …}` (image id).
    aux: Option<serde_json::Value>,
    /// Plain text (`Successfully tagged …`).
    stream: Option<String>,
    #[serde(rename = "errorDetail")]
    error_detail: Option<ErrorDetail>,
    error: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct ErrorDetail {
    message: Option<String>,
}

impl Client {
    /// Builds an image with BuildKit from a context tar stream, reporting events as they come,
    /// and returns the image id (`sha256:…`). Dropping the future closes the connection, which
    /// cancels the build. The engine must be on a local socket (see the module docs).
    pub async fn build_image_buildkit<S>(
        &self,
        request: &BuildRequest,
        context: S,
        on_event: impl FnMut(BuildEvent),
    ) -> Result<String, BuildKitError>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    {
        let socket = transport::socket_path(self.host())?;
        build_at(&socket, self.api_version(), request, context, on_event).await
    }
}

/// The build, given the socket and API version (a fake engine in the unit tests).
async fn build_at<S>(
    socket: &Path,
    api_version: &str,
    request: &BuildRequest,
    context: S,
    mut on_event: impl FnMut(BuildEvent),
) -> Result<String, BuildKitError>
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    let tag = &request.tag;
    let mut items = transport::post_build(socket, api_version, request, context).await?;
    let mut progress = events::Progress::default();
    let mut image_id = None;
    let failed = |progress: &events::Progress, message: &str| {
        BuildKitError::Engine(EngineError::Build {
            tag: tag.clone(),
            message: message.trim().to_string(),
            last_lines: progress.tail(),
        })
    };
    loop {
        let line = match items.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                progress.finish(&mut on_event);
                return Err(e);
            }
        };
        let item: Item = serde_json::from_slice(&line).map_err(|e| bad_item(tag, &line, e))?;
        if item.error_detail.is_some() || item.error.is_some() {
            progress.finish(&mut on_event);
            let message = item
                .error_detail
                .and_then(|d| d.message)
                .or(item.error)
                .unwrap_or_default();
            return Err(failed(&progress, &message));
        }
        match (item.id.as_deref(), item.aux) {
            (Some("moby.buildkit.trace"), Some(serde_json::Value::String(b64))) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(&b64)
                    .map_err(|e| bad_item(tag, &line, e))?;
                let record = status::StatusResponse::decode(&bytes).map_err(|source| {
                    BuildKitError::Decode {
                        tag: tag.clone(),
                        source,
                    }
                })?;
                progress.record(record, &mut on_event);
            }
            (Some("moby.image.id"), Some(aux)) => {
                image_id = aux.get("ID").and_then(|v| v.as_str()).map(str::to_string);
            }
            _ => {}
        }
        if let Some(text) = item.stream {
            progress.text(&text, &mut on_event);
        }
    }
    progress.finish(&mut on_event);
    if let Some(message) = progress.failure() {
        return Err(failed(&progress, message));
    }
    image_id.ok_or_else(|| EngineError::NoImageId { tag: tag.clone() }.into())
}

fn bad_item(
    tag: &str,
    line: &[u8],
    source: impl std::error::Error + Send + Sync + 'static,
) -> BuildKitError {
    BuildKitError::BadItem {
        tag: tag.to_string(),
        item: String::from_utf8_lossy(line).chars().take(200).collect(),
        source: Box::new(source),
    }
}
