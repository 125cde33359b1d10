//! Readiness: the kind's ready line in the log AND an HTTP probe of the health endpoint
//! (two signals, because a log substring alone broke twice in the Python original), with a
//! deadline and cancellation (Ctrl-C detaches). Every log line is handed to the caller, which
//! reads boot phases and failure causes from them (`tt-model-local`'s boot watch).

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::Client;
use crate::error::EngineError;
use crate::logs::{self, LogLine};

/// The default readiness deadline (the original's 4 h detected hung boots far too late).
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What "ready" means for this container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadySpec {
    /// The kind's ready substring; `None` when the kind has none (HTTP alone decides).
    pub ready_line: Option<String>,
    /// `host:port` of the server as seen from the host.
    pub http_addr: String,
    /// The HTTP path probed (e.g. `/health`); ready needs a 2xx answer.
    pub health_path: String,
    /// The readiness deadline, from the start of the wait.
    pub timeout: Duration,
    /// How often the HTTP probe and the container state are checked.
    pub poll: Duration,
}

/// Progress of the wait, for the checklist renderer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitEvent {
    /// A new log line.
    Line(LogLine),
    /// The ready line was seen.
    LogReady,
    /// The health endpoint answered 2xx.
    HttpReady,
}

/// How the wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// The ready line (if the kind has one) and the health probe both succeeded.
    Ready {
        /// Time from the start of the wait until ready.
        elapsed: Duration,
        /// When the ready line was seen, from the start of the wait; `None` when the kind has no
        /// ready line.
        log_ready: Option<Duration>,
        /// When the health probe first answered 2xx, from the start of the wait.
        http_ready: Duration,
    },
    /// The container stopped before it was ready.
    Exited {
        /// Time from the start of the wait until the exit was seen.
        elapsed: Duration,
        /// The container's exit status, when the engine reported one.
        exit_code: Option<i64>,
    },
    /// Still running at the deadline.
    TimedOut {
        /// Time from the start of the wait until the deadline.
        elapsed: Duration,
    },
    /// The caller cancelled (Ctrl-C): the container keeps running.
    Detached {
        /// Time from the start of the wait until the cancel.
        elapsed: Duration,
    },
}

/// One HTTP/1.1 GET with a short timeout; true on a 2xx status.
pub async fn probe_http(addr: &str, path: &str, timeout: Duration) -> bool {
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: tt-model\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = [0u8; 64];
        let mut n = 0;
        while n < 12 {
            let r = s.read(&mut buf[n..]).await.ok()?;
            if r == 0 {
                break;
            }
            n += r;
        }
        let head = String::from_utf8_lossy(&buf[..n]).to_string();
        let code: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((200..300).contains(&code))
    };
    matches!(tokio::time::timeout(timeout, attempt).await, Ok(Some(true)))
}

/// Wait for `name` to become ready by both signals. `cancel` resolving detaches. Every log line
/// reaches `on_event` as [`WaitEvent::Line`] before the ready line's [`WaitEvent::LogReady`].
pub async fn wait_ready(
    client: &Client,
    name: &str,
    spec: &ReadySpec,
    mut on_event: impl FnMut(&WaitEvent),
    cancel: impl Future<Output = ()>,
) -> Result<WaitOutcome, EngineError> {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut log = Box::pin(logs::lines(client, name, true, None));
    let mut log_open = true;
    let mut log_ready: Option<Duration> = None;
    let mut tick = tokio::time::interval(spec.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Once the ready line is in, the server is usually a few ms from listening: probe often.
    let mut fast = tokio::time::interval(Duration::from_millis(25));
    fast.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(cancel);
    loop {
        tokio::select! {
            _ = fast.tick(), if log_ready.is_some() => {
                if probe_http(&spec.http_addr, &spec.health_path, Duration::from_secs(2)).await {
                    on_event(&WaitEvent::HttpReady);
                    return Ok(WaitOutcome::Ready { elapsed: start.elapsed(), log_ready, http_ready: start.elapsed() });
                }
            }
            _ = &mut cancel => return Ok(WaitOutcome::Detached { elapsed: start.elapsed() }),
            _ = tokio::time::sleep_until(deadline) => {
                return Ok(WaitOutcome::TimedOut { elapsed: start.elapsed() });
            }
            item = log.next(), if log_open => match item {
                Some(Ok(line)) => {
                    if log_ready.is_none()
                        && spec.ready_line.as_deref().is_some_and(|r| line.text.contains(r))
                    {
                        log_ready = Some(start.elapsed());
                        on_event(&WaitEvent::Line(line));
                        on_event(&WaitEvent::LogReady);
                        // Probe right away rather than on the next tick: most servers
                        // listen by the time they print their ready line.
                        if probe_http(&spec.http_addr, &spec.health_path, Duration::from_secs(2)).await {
                            on_event(&WaitEvent::HttpReady);
                            return Ok(WaitOutcome::Ready { elapsed: start.elapsed(), log_ready, http_ready: start.elapsed() });
                        }
                        continue;
                    }
                    on_event(&WaitEvent::Line(line));
                }
                Some(Err(e)) => return Err(e),
                None => log_open = false,
            },
            _ = tick.tick() => {
                let log_ok = spec.ready_line.is_none() || log_ready.is_some();
                if log_ok && probe_http(&spec.http_addr, &spec.health_path, Duration::from_secs(2)).await {
                    on_event(&WaitEvent::HttpReady);
                    return Ok(WaitOutcome::Ready { elapsed: start.elapsed(), log_ready, http_ready: start.elapsed() });
                }
                let info = client.container(name).await?;
                let running = info.as_ref().is_some_and(|i| i.running);
                if !running {
                    // Drain what the log still holds so the evidence is complete.
                    if log_open {
                        while let Ok(Some(Ok(line))) = tokio::time::timeout(Duration::from_secs(2), log.next()).await {
                            on_event(&WaitEvent::Line(line));
                        }
                    }
                    let code = info.and_then(|i| i.exit_code);
                    return Ok(WaitOutcome::Exited { elapsed: start.elapsed(), exit_code: code });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn http_probe_reads_the_status_line() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            for status in ["200 OK", "503 Service Unavailable"] {
                let (mut s, _) = l.accept().await.unwrap();
                let mut b = [0u8; 512];
                let _ = s.read(&mut b).await.unwrap();
                assert!(String::from_utf8_lossy(&b).starts_with("GET /health HTTP/1.1\r\n"));
                s.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
            }
        });
        assert!(probe_http(&addr, "/health", Duration::from_secs(2)).await);
        assert!(!probe_http(&addr, "/health", Duration::from_secs(2)).await);
        server.await.unwrap();
        assert!(
            !probe_http(&addr, "/health", Duration::from_millis(300)).await,
            "closed port"
        );
    }
}
