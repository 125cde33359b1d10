//! The BuildKit driver against a stand-in engine on a unix socket: what it sends, how it reads
//! a whole answer, and how it ends when the engine refuses, the connection drops or the
//! context cannot be read. The real engine's side is in `tests/buildkit_engine.rs`.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;

use super::status::encode::{log, vertex};
use super::*;

/// A one-connection engine at `dir/engine.sock`: reads the request (until its chunked body
/// ends or the client goes away), writes `answer`, closes. Returns the request as received.
fn stand_in(dir: &Path, answer: Vec<u8>) -> (PathBuf, tokio::task::JoinHandle<Vec<u8>>) {
    let socket = dir.join("engine.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let task = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.ends_with(b"0\r\n\r\n") {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        // The client may be gone already (the failing-context case).
        let _ = conn.write_all(&answer).await;
        request
    });
    (socket, task)
}

/// An HTTP answer with `status` and the given body chunks; `end` adds the last chunk.
fn answer(status: &str, chunks: &[String], end: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    for c in chunks {
        out.push_str(&format!("{:x}\r\n{c}\r\n", c.len()));
    }
    if end {
        out.push_str("0\r\n\r\n");
    }
    out.into_bytes()
}

fn trace(record: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(record);
    format!("{{\"id\":\"moby.buildkit.trace\",\"aux\":\"{b64}\"}}\n")
}

fn request() -> BuildRequest {
    BuildRequest {
        tag: "tt-model-test/bk:1".into(),
        dockerfile: "Dockerfile".into(),
        build_args: [("RUNID".to_string(), "a b&c".to_string())].into(),
        network_mode: Some("none".into()),
        ..Default::default()
    }
}

/// The context in two chunks, as a caller streams it.
fn context() -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures_util::stream::iter([
        Ok(Bytes::from_static(b"first-chunk-")),
        Ok(Bytes::from_static(b"second-chunk")),
    ])
}

const RUN: &str = "[stage-0 2/2] RUN echo hi";

#[tokio::test]
async fn a_whole_answer_gives_the_events_and_the_image_id() {
    let dir = tempfile::tempdir().unwrap();
    let items = [
        trace(&vertex("sha256:r", RUN, true, false, "")),
        // One JSON item split over two HTTP chunks, and a log line over two records.
        trace(&log("sha256:r", 1, b"h"))[..20].to_string(),
        trace(&log("sha256:r", 1, b"h"))[20..].to_string(),
        trace(&log("sha256:r", 1, b"i\n")),
        "{\"id\":\"moby.image.id\",\"aux\":{\"ID\":\"sha256:abc\"}}\n".to_string(),
        "{\"stream\":\"Successfully tagged tt-model-test/bk:1\\n\"}\n".to_string(),
    ];
    let (socket, engine) = stand_in(dir.path(), answer("200 OK", &items, true));
    let mut events = Vec::new();
    let id = build_at(&socket, "1.41", &request(), context(), |e| events.push(e))
        .await
        .unwrap();
    assert_eq!(id, "sha256:abc");
    assert_eq!(
        events[1..],
        [
            BuildEvent::Line("hi".into()),
            BuildEvent::Line("Successfully tagged tt-model-test/bk:1".into())
        ]
    );
    let sent = String::from_utf8_lossy(&engine.await.unwrap()).into_owned();
    let head = sent.lines().next().unwrap();
    assert!(
        head.starts_with(
            "POST /v1.41/build?version=2&dockerfile=Dockerfile&t=tt-model-test%2Fbk%3A1&"
        ),
        "{head}"
    );
    assert!(
        head.contains("buildargs=%7B%22RUNID%22%3A%22a%20b%26c%22%7D"),
        "{head}"
    );
    assert!(head.contains("&networkmode=none"), "{head}");
    assert!(
        !head.contains("nocache") && !head.contains("target"),
        "{head}"
    );
    // Streamed as chunks, each one as it came.
    assert!(
        sent.contains("C\r\nfirst-chunk-\r\nC\r\nsecond-chunk\r\n0\r\n\r\n"),
        "{sent}"
    );
}

#[tokio::test]
async fn an_error_item_is_the_classic_build_error_with_the_output_tail() {
    let dir = tempfile::tempdir().unwrap();
    let message = "executor failed running [/bin/sh -c exit 3]: exit code: 3";
    let items = [
        trace(
            &[
                vertex("sha256:r", RUN, true, false, ""),
                log("sha256:r", 2, b"to-stderr"),
            ]
            .concat(),
        ),
        trace(&vertex("sha256:r", RUN, true, false, message)),
        format!("{{\"errorDetail\":{{\"message\":\"{message}\"}},\"error\":\"{message}\"}}\n"),
    ];
    let (socket, _engine) = stand_in(dir.path(), answer("200 OK", &items, true));
    let err = build_at(&socket, "1.41", &request(), context(), |_| {})
        .await
        .unwrap_err();
    let BuildKitError::Engine(EngineError::Build {
        tag,
        message: got,
        last_lines,
    }) = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (tag.as_str(), got.as_str()),
        ("tt-model-test/bk:1", message)
    );
    assert_eq!(last_lines, [RUN, "to-stderr"]);
}

#[tokio::test]
async fn a_connection_dropped_mid_answer_ends_the_build_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let items = [trace(
        &[
            vertex("sha256:r", RUN, true, false, ""),
            log("sha256:r", 1, b"partial"),
        ]
        .concat(),
    )];
    // No last chunk: the engine died mid-build.
    let (socket, _engine) = stand_in(dir.path(), answer("200 OK", &items, false));
    let mut events = Vec::new();
    let err = build_at(&socket, "1.41", &request(), context(), |e| events.push(e))
        .await
        .unwrap_err();
    assert!(matches!(err, BuildKitError::Transport { .. }), "{err:?}");
    // What did arrive was reported, the unterminated line included.
    assert_eq!(events.last(), Some(&BuildEvent::Line("partial".into())));
}

#[tokio::test]
async fn an_unreadable_context_is_the_classic_context_error() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, _engine) = stand_in(dir.path(), Vec::new());
    let broken = futures_util::stream::iter([
        Ok(Bytes::from_static(b"first")),
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "ctx.tar",
        )),
    ]);
    let err = build_at(&socket, "1.41", &request(), broken, |_| {})
        .await
        .unwrap_err();
    let BuildKitError::Engine(EngineError::Context { source, .. }) = err else {
        panic!("{err:?}")
    };
    assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn a_refusal_carries_the_engines_message() {
    let dir = tempfile::tempdir().unwrap();
    let body = ["{\"message\":\"dockerfile parse error line 2\"}\n".to_string()];
    let (socket, _engine) = stand_in(dir.path(), answer("400 Bad Request", &body, true));
    let err = build_at(&socket, "1.41", &request(), context(), |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BuildKitError::Refused { status: 400, message, .. } if message == "dockerfile parse error line 2"),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_answer_without_an_image_id_is_the_classic_error() {
    let dir = tempfile::tempdir().unwrap();
    let items = [trace(&vertex("sha256:r", RUN, true, false, ""))];
    let (socket, _engine) = stand_in(dir.path(), answer("200 OK", &items, true));
    let err = build_at(&socket, "1.41", &request(), context(), |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuildKitError::Engine(EngineError::NoImageId { .. })),
        "{err:?}"
    );
}

#[test]
fn only_a_unix_socket_address_is_accepted() {
    assert_eq!(
        transport::socket_path("unix:///var/run/docker.sock").unwrap(),
        PathBuf::from("/var/run/docker.sock")
    );
    for host in [
        "tcp://127.0.0.1:2375",
        "http://engine:2375",
        "https://engine:2376",
        "unix://",
    ] {
        let err = transport::socket_path(host).unwrap_err();
        assert!(
            matches!(&err, BuildKitError::NeedsLocalSocket { host: h } if h == host),
            "{err:?}"
        );
        assert!(err.to_string().contains("local socket"), "{err}");
    }
}
