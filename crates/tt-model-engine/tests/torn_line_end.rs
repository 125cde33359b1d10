//! A JSON-lines answer whose last `\r\n` arrives in a read of its own.
//!
//! dockerd ends every progress message with `\r\n`, and nothing keeps a message and its line
//! end in one read: a CI run on 2 busy cores got `{"stream":"Successfully tagged …"}` in one
//! read and `\r\n` in the next. bollard 0.21's line decoder then keeps a lone `\r` and, at the
//! end of the body, reports `IOError("bytes remaining on stream")` though every message came.
//! These tests replay that answer from a fake engine on loopback (real HTTP, real bollard) and
//! pin that a build, an import and a pull whose work is done are not failed by it, while a
//! body cut inside a message still is.

use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tt_model_engine::build::BuildRequest;
use tt_model_engine::client::Client;
use tt_model_engine::error::EngineError;

const IMAGE_ID: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// How the fake ends the streamed answer of a build, an import or a pull.
#[derive(Clone, Copy)]
enum Ending {
    /// The last message, then its `\r\n` in a chunk of its own, a moment later; the image
    /// is there.
    TornLineEnd,
    /// The body stops inside the last message (the engine died mid-answer); no image.
    CutMessage,
}

/// Starts the fake engine and returns its `tcp://` address.
async fn fake_engine(ending: Ending) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve(conn, ending));
        }
    });
    format!("tcp://{addr}")
}

/// Answers one request per connection (`Connection: close`).
async fn serve(mut conn: TcpStream, ending: Ending) {
    let Some((head, _body)) = read_request(&mut conn).await else {
        return;
    };
    let line = head.lines().next().unwrap_or_default().to_string();
    let path = line.split(' ').nth(1).unwrap_or_default();
    let path = path.split('?').next().unwrap_or_default();
    let json = |body: String| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if path.ends_with("/_ping") {
        let _ = conn
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK")
            .await;
    } else if path.ends_with("/version") {
        let body = r#"{"Version":"20.10.24","ApiVersion":"1.41","MinAPIVersion":"1.12"}"#;
        let _ = conn.write_all(json(body.to_string()).as_bytes()).await;
    } else if path.ends_with("/build") {
        stream_answer(&mut conn, Answer::Build, ending).await;
    } else if path.ends_with("/images/create") {
        let import = line.contains("fromsrc="); // the head is lowercased
        let answer = if import { Answer::Import } else { Answer::Pull };
        stream_answer(&mut conn, answer, ending).await;
    } else if path.contains("/images/")
        && path.ends_with("/json")
        && matches!(ending, Ending::TornLineEnd)
    {
        // The work was done: the engine holds the image (a cut answer left none).
        let body = format!(r#"{{"Id":"{IMAGE_ID}","RepoTags":["fake/image:1"],"Size":1}}"#);
        let _ = conn.write_all(json(body).as_bytes()).await;
    } else {
        let body = r#"{"message":"not in the fake"}"#;
        let _ = conn
            .write_all(
                format!(
                    "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
            .await;
    }
    let _ = conn.shutdown().await;
}

/// Which engine answer the fake streams.
#[derive(Clone, Copy)]
enum Answer {
    Build,
    Import,
    Pull,
}

/// A chunked progress stream as dockerd writes it, ended as `ending` says.
async fn stream_answer(conn: &mut TcpStream, answer: Answer, ending: Ending) {
    let messages: Vec<String> = match answer {
        Answer::Build => vec![
            r#"{"stream":"Step 1/1 : FROM scratch\n"}"#.into(),
            format!(r#"{{"aux":{{"ID":"{IMAGE_ID}"}}}}"#),
            r#"{"stream":"Successfully built 111111111111\n"}"#.into(),
            r#"{"stream":"Successfully tagged fake/image:1\n"}"#.into(),
        ],
        Answer::Import => vec![format!(r#"{{"status":"{IMAGE_ID}"}}"#)],
        Answer::Pull => vec![
            r#"{"status":"Pulling from fake/image","id":"1"}"#.into(),
            r#"{"status":"Status: Downloaded newer image for fake/image:1"}"#.into(),
        ],
    };
    let _ = conn
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        .await;
    let (last, earlier) = messages.split_last().expect("messages");
    let mut first = String::new();
    for m in earlier {
        first.push_str(m);
        first.push_str("\r\n");
    }
    let chunk = |data: &str| format!("{:x}\r\n{data}\r\n", data.len());
    match ending {
        Ending::TornLineEnd => {
            first.push_str(last);
            let _ = conn.write_all(chunk(&first).as_bytes()).await;
            let _ = conn.flush().await;
            // Long enough for the client to read and decode the first chunk on its own.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _ = conn.write_all(chunk("\r\n").as_bytes()).await;
        }
        Ending::CutMessage => {
            first.push_str(&last[..last.len() / 2]);
            let _ = conn.write_all(chunk(&first).as_bytes()).await;
        }
    }
    let _ = conn.write_all(b"0\r\n\r\n").await;
}

/// Reads a request's head and its body (by `Content-Length`, or chunked to the last chunk).
async fn read_request(conn: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = conn.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let mut body = buf.split_off(head_end);
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        while body.len() < len {
            let n = conn.read(&mut byte).await.ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&byte[..n]);
        }
    } else if head.contains("transfer-encoding: chunked") {
        while !body.ends_with(b"0\r\n\r\n") {
            let n = conn.read(&mut byte).await.ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&byte[..n]);
        }
    }
    Some((head, body))
}

fn context() -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    let dockerfile = b"FROM scratch\n";
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "Dockerfile", &dockerfile[..])
        .expect("tar");
    let bytes = Bytes::from(tar.into_inner().expect("tar"));
    futures_util::stream::iter([Ok(bytes)])
}

fn request() -> BuildRequest {
    BuildRequest {
        tag: "fake/image:1".into(),
        dockerfile: "Dockerfile".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_build_whose_last_line_end_comes_alone_returns_its_image() {
    let host = fake_engine(Ending::TornLineEnd).await;
    let client = Client::connect_to(&host).await.expect("connect");
    let mut lines = Vec::new();
    let id = client
        .build_image(&request(), context(), |e| lines.push(e))
        .await
        .expect("every message came: the build succeeded");
    assert_eq!(id, IMAGE_ID);
    assert!(
        lines
            .iter()
            .any(|e| format!("{e:?}").contains("Successfully tagged")),
        "the last message was read: {lines:?}"
    );
}

#[tokio::test]
async fn a_build_cut_inside_a_message_still_fails() {
    let host = fake_engine(Ending::CutMessage).await;
    let client = Client::connect_to(&host).await.expect("connect");
    let err = client
        .build_image(&request(), context(), |_| {})
        .await
        .expect_err("a cut body is not a finished build");
    assert!(
        matches!(err, EngineError::BuildRequest { .. }),
        "a transport error, not a success: {err:?}"
    );
}

#[tokio::test]
async fn an_import_whose_last_line_end_comes_alone_is_done() {
    let host = fake_engine(Ending::TornLineEnd).await;
    let client = Client::connect_to(&host).await.expect("connect");
    let id = client
        .import_rootfs(context(), "fake/image", "1", &[])
        .await
        .expect("the import finished and the image is there");
    assert_eq!(id, IMAGE_ID);
}

#[tokio::test]
async fn a_pull_whose_last_line_end_comes_alone_is_done() {
    let host = fake_engine(Ending::TornLineEnd).await;
    let client = Client::connect_to(&host).await.expect("connect");
    client
        .pull_image(
            "fake/image:1",
            &tt_model_engine::pull::CredentialSource::anonymous(),
            &mut |_| {},
        )
        .await
        .expect("the pull finished and the image is there");
}

#[tokio::test]
async fn an_import_or_a_pull_cut_inside_a_message_still_fails() {
    let host = fake_engine(Ending::CutMessage).await;
    let client = Client::connect_to(&host).await.expect("connect");
    let err = client
        .import_rootfs(context(), "fake/image", "1", &[])
        .await
        .expect_err("no image: the import did not finish");
    assert!(matches!(err, EngineError::Import { .. }), "{err:?}");
    let err = client
        .pull_image(
            "fake/image:1",
            &tt_model_engine::pull::CredentialSource::anonymous(),
            &mut |_| {},
        )
        .await
        .expect_err("no image: the pull did not finish");
    assert!(
        matches!(&err, EngineError::Pull { answer, .. } if answer.contains("bytes remaining")),
        "the transport's answer is kept: {err:?}"
    );
}
