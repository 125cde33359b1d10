//! Container logs as lines, for running and exited containers alike.

use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use futures_util::{Stream, StreamExt};

use crate::client::Client;
use crate::error::EngineError;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStream {
    /// The container's standard output.
    Stdout,
    /// The container's standard error.
    Stderr,
}

/// One log line (without its newline; invalid UTF-8 replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Which stream the line was written to.
    pub stream: LogStream,
    /// The line's text, without its newline.
    pub text: String,
}

fn options(follow: bool, tail: Option<usize>) -> LogsOptions {
    LogsOptions {
        follow,
        stdout: true,
        stderr: true,
        tail: tail.map(|n| n.to_string()).unwrap_or_else(|| "all".into()),
        ..Default::default()
    }
}

/// Splits frames into lines per stream; frames can hold partial or several lines.
#[derive(Default)]
struct Splitter {
    out: Vec<u8>,
    err: Vec<u8>,
}

impl Splitter {
    fn push(&mut self, stream: LogStream, bytes: &[u8]) -> Vec<LogLine> {
        let buf = match stream {
            LogStream::Stdout => &mut self.out,
            LogStream::Stderr => &mut self.err,
        };
        buf.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let rest = buf.split_off(i + 1);
            let mut line = std::mem::replace(buf, rest);
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            lines.push(LogLine {
                stream,
                text: String::from_utf8_lossy(&line).into_owned(),
            });
        }
        lines
    }

    fn flush(&mut self) -> Vec<LogLine> {
        let mut v = Vec::new();
        for (stream, buf) in [
            (LogStream::Stdout, &mut self.out),
            (LogStream::Stderr, &mut self.err),
        ] {
            if !buf.is_empty() {
                v.push(LogLine {
                    stream,
                    text: String::from_utf8_lossy(buf).into_owned(),
                });
                buf.clear();
            }
        }
        v
    }
}

/// Log lines of `name`: the last `tail` lines (all when `None`), then new ones while
/// `follow` and the container runs. The stream ends when the container stops.
pub fn lines(
    client: &Client,
    name: &str,
    follow: bool,
    tail: Option<usize>,
) -> impl Stream<Item = Result<LogLine, EngineError>> + Send + 'static {
    let name = name.to_string();
    let raw = client.docker().logs(&name, Some(options(follow, tail)));
    let mut split = Splitter::default();
    let mut raw = Box::pin(raw);
    async_stream(move |tx| async move {
        while let Some(frame) = raw.next().await {
            let frame = match frame {
                Ok(f) => f,
                Err(source) => {
                    let _ = tx
                        .send(Err(EngineError::Logs {
                            name: name.clone(),
                            source,
                        }))
                        .await;
                    return;
                }
            };
            let (stream, bytes) = match frame {
                LogOutput::StdErr { message } => (LogStream::Stderr, message),
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    (LogStream::Stdout, message)
                }
                LogOutput::StdIn { .. } => continue,
            };
            for l in split.push(stream, &bytes) {
                if tx.send(Ok(l)).await.is_err() {
                    return;
                }
            }
        }
        for l in split.flush() {
            let _ = tx.send(Ok(l)).await;
        }
    })
}

/// Run a producer task and expose its channel as a stream (no extra dependency needed).
fn async_stream<T, F, Fut>(f: F) -> impl Stream<Item = T> + Send + 'static
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(256);
    let task = tokio::spawn(f(tx));
    let guard = AbortOnDrop(task);
    futures_util::stream::poll_fn(move |cx| {
        let _keep = &guard;
        rx.poll_recv(cx)
    })
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);
impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The whole log (or its last `tail` lines) as text.
pub async fn collect(
    client: &Client,
    name: &str,
    tail: Option<usize>,
) -> Result<String, EngineError> {
    let mut s = Box::pin(lines(client, name, false, tail));
    let mut out = String::new();
    while let Some(l) = s.next().await {
        out.push_str(&l?.text);
        out.push('\n');
    }
    Ok(out)
}

/// [`lines`] behind a plain async `next()`, so callers need no stream library.
pub struct LogLines(std::pin::Pin<Box<dyn Stream<Item = Result<LogLine, EngineError>> + Send>>);

impl LogLines {
    /// Lines of container `name`, as [`lines`] gives them: the last `tail` (all when `None`), then
    /// new ones while `follow`.
    pub fn new(client: &Client, name: &str, follow: bool, tail: Option<usize>) -> Self {
        LogLines(Box::pin(lines(client, name, follow, tail)))
    }

    /// The next line; `None` at the end of the log (or when the container stopped, when following).
    pub async fn next(&mut self) -> Option<Result<LogLine, EngineError>> {
        self.0.next().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_joins_partial_frames_per_stream() {
        let mut s = Splitter::default();
        assert!(s.push(LogStream::Stdout, b"hel").is_empty());
        assert!(s.push(LogStream::Stderr, b"e1\ne2").len() == 1);
        let v = s.push(LogStream::Stdout, b"lo\r\nworld\n");
        assert_eq!(
            v.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
            ["hello", "world"]
        );
        let rest = s.flush();
        assert_eq!(
            rest,
            vec![LogLine {
                stream: LogStream::Stderr,
                text: "e2".into()
            }]
        );
    }
}
