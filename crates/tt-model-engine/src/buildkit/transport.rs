//! The raw request: `POST /v<api>/build?version=2&…` over the engine's unix socket with hyper's
//! HTTP/1 client, the context streamed as the request body, the answer read back as one JSON
//! item per line.
//!
//! The connection is ours alone (one request), driven by a task that is aborted when the
//! [`Items`] reader is dropped: dropping a build closes the socket, which makes the engine
//! cancel it. A connection that drops mid-build surfaces as an error of the next read; it can
//! never leave the reader waiting.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;

use super::BuildKitError;
use crate::build::BuildRequest;
use crate::error::EngineError;

/// The socket path of a `unix://` engine address; any other scheme is refused (the raw
/// request speaks to a local socket only: TLS and remote engines are bollard's business).
pub fn socket_path(host: &str) -> Result<PathBuf, BuildKitError> {
    match host.strip_prefix("unix://") {
        Some(path) if !path.is_empty() => Ok(PathBuf::from(path)),
        _ => Err(BuildKitError::NeedsLocalSocket {
            host: host.to_string(),
        }),
    }
}

/// The `/build` query for BuildKit: the classic driver's parameters with `version=2`.
pub fn query(request: &BuildRequest) -> String {
    let json = |map| serde_json::to_string(map).unwrap_or_else(|_| "{}".into());
    let mut q = vec![
        ("version", "2".to_string()),
        ("dockerfile", request.dockerfile.clone()),
        ("t", request.tag.clone()),
        ("buildargs", json(&request.build_args)),
        ("labels", json(&request.labels)),
    ];
    if request.no_cache {
        q.push(("nocache", "1".into()));
    }
    if let Some(network) = &request.network_mode {
        q.push(("networkmode", network.clone()));
    }
    if let Some(target) = &request.target {
        q.push(("target", target.clone()));
    }
    q.iter()
        .map(|(k, v)| format!("{k}={}", percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// RFC 3986 percent-encoding of a query value (everything but the unreserved characters).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Aborts the connection task when the reader goes away.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Where the context stream's own error is kept: hyper only reports that the body failed, and
/// the caller must tell "your context could not be read" from "the engine went away".
type ContextFailure = Arc<Mutex<Option<std::io::Error>>>;

/// The answer of a build request, read one JSON line at a time.
pub struct Items {
    tag: String,
    body: Incoming,
    pending: Vec<u8>,
    context_failure: ContextFailure,
    _connection: AbortOnDrop,
}

/// Sends the build request and waits for the answer's headers. A non-2xx answer is an error
/// carrying the engine's message.
pub async fn post_build<S>(
    socket: &Path,
    api_version: &str,
    request: &BuildRequest,
    context: S,
) -> Result<Items, BuildKitError>
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    let tag = request.tag.clone();
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|source| BuildKitError::Connect {
            socket: socket.to_path_buf(),
            source,
        })?;
    let http = |source: hyper::Error| BuildKitError::Transport {
        tag: tag.clone(),
        source: source.into(),
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(http)?;
    // The connection's own result reaches us through the request and body futures.
    let connection = AbortOnDrop(tokio::spawn(async move {
        let _ = connection.await;
    }));

    let context_failure = ContextFailure::default();
    let slot = context_failure.clone();
    // Chunks go out as they come (chunked encoding): the context is never held whole here.
    let body = StreamBody::new(context.map(move |chunk| match chunk {
        Ok(bytes) => Ok(Frame::data(bytes)),
        Err(e) => {
            let message = e.to_string();
            if let Ok(mut slot) = slot.lock() {
                slot.get_or_insert(e);
            }
            Err(std::io::Error::other(message))
        }
    }));
    let uri = format!("/v{api_version}/build?{}", query(request));
    let req = hyper::Request::post(uri)
        .header(hyper::header::HOST, "docker")
        .header(hyper::header::CONTENT_TYPE, "application/x-tar")
        .body(body)
        .map_err(|source| BuildKitError::Transport {
            tag: tag.clone(),
            source: source.into(),
        })?;
    let response = match sender.send_request(req).await {
        Ok(response) => response,
        Err(e) => return Err(context_error(&context_failure, &tag).unwrap_or_else(|| http(e))),
    };
    let status = response.status();
    let mut items = Items {
        tag: tag.clone(),
        body: response.into_body(),
        pending: Vec::new(),
        context_failure,
        _connection: connection,
    };
    if !status.is_success() {
        let mut text = Vec::new();
        while let Some(line) = items.next_line().await? {
            text.extend_from_slice(&line);
        }
        text.extend_from_slice(&items.pending);
        let message = serde_json::from_slice::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("message")?.as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&text).trim().to_string());
        return Err(BuildKitError::Refused {
            tag,
            status: status.as_u16(),
            message,
        });
    }
    Ok(items)
}

/// The context's own read error, if that is why the request failed.
fn context_error(slot: &ContextFailure, tag: &str) -> Option<BuildKitError> {
    let source = slot.lock().ok()?.take()?;
    Some(BuildKitError::Engine(EngineError::Context {
        tag: tag.to_string(),
        source,
    }))
}

impl Items {
    /// The next non-empty line of the answer, without its newline; `None` at its end.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, BuildKitError> {
        loop {
            if let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                if line.trim_ascii().is_empty() {
                    continue;
                }
                return Ok(Some(line));
            }
            let Some(frame) = self.body.frame().await else {
                // A last item without a newline is still an item.
                let rest = std::mem::take(&mut self.pending);
                return Ok((!rest.trim_ascii().is_empty()).then_some(rest));
            };
            match frame {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        self.pending.extend_from_slice(&data);
                    }
                }
                Err(e) => {
                    return Err(context_error(&self.context_failure, &self.tag).unwrap_or(
                        BuildKitError::Transport {
                            tag: self.tag.clone(),
                            source: e.into(),
                        },
                    ));
                }
            }
        }
    }
}
