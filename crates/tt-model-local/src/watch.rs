//! The boot watch: readiness by two signals, the kind's ready line in the log AND an HTTP
//! probe of the health endpoint (a log substring alone broke twice in the Python original),
//! with a deadline and cancellation (Ctrl-C detaches). Every log line is read by the kind's
//! [`BootTracker`] first, so the caller sees boot phases as they change and gets the log
//! evidence [`crate::diagnose`] needs when the container exits or the deadline passes.
//!
//! The engine calls it makes are the log stream ([`tt_model_engine::logs::lines`]) and the
//! container's state ([`Client::container`]); the probe is plain HTTP, not the engine.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tt_model_engine::logs::{self, LogLine};
use tt_model_engine::{Client, EngineError};

use crate::bootlog::{BootEvent, BootTracker};
use crate::diagnose::Evidence;

/// The default readiness deadline, the original's 4 h: a cold first boot of a large model
/// (kernel compilation, a download inside the container) can take hours; `--timeout` or
/// `TT_MODEL_READY_TIMEOUT` shortens it.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(4 * 60 * 60);

/// How long one health probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What "ready" means for this container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadySpec {
    /// The kind's ready substring; `None` when the kind has none (HTTP alone decides).
    pub ready_line: Option<String>,
    /// `host:port` of the server as seen from the host.
    pub http_addr: String,
    /// The HTTP path probed (e.g. `/health`); ready needs a 2xx answer. `None`: the package
    /// declares no health endpoint and its kind has a ready line, which alone decides (the
    /// original's rule for its packages).
    pub health_path: Option<String>,
    /// The readiness deadline, from the start of the wait.
    pub timeout: Duration,
    /// How often the HTTP probe and the container state are checked.
    pub poll: Duration,
}

/// Progress of the watch, for the checklist renderer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitEvent {
    /// A new log line (after the boot events it caused).
    Line(LogLine),
    /// A boot phase changed (fed from the log line that follows).
    Boot(BootEvent),
    /// The ready line was seen.
    LogReady,
    /// The health endpoint answered 2xx.
    HttpReady,
}

/// How the watch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// The ready line (if the kind has one) and the health probe both succeeded.
    Ready {
        /// Time from the start of the wait until ready.
        elapsed: Duration,
        /// When the ready line was seen, from the start of the wait; `None` when the kind has no
        /// ready line.
        log_ready: Option<Duration>,
        /// When the health probe first answered 2xx, from the start of the wait (when the
        /// ready line was seen, for a spec without a probe).
        http_ready: Duration,
    },
    /// The container stopped before it was ready.
    Exited {
        /// Time from the start of the wait until the exit was seen.
        elapsed: Duration,
        /// The log evidence and exit status, for [`crate::diagnose`].
        evidence: Evidence,
    },
    /// Still running at the deadline.
    TimedOut {
        /// Time from the start of the wait until the deadline.
        elapsed: Duration,
        /// The log evidence, for [`crate::diagnose`].
        evidence: Evidence,
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
        // The status line's first 12 bytes (`HTTP/1.1 200`) are all the probe needs.
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

/// The watch's state: the tracker every line goes through, the caller's sink, the clock.
struct Watch<'t, F> {
    tracker: &'t mut BootTracker,
    on_event: F,
    start: Instant,
    log_ready: Option<Duration>,
}

impl<F: FnMut(&WaitEvent)> Watch<'_, F> {
    fn line(&mut self, line: LogLine) {
        for b in self.tracker.feed(&line.text) {
            (self.on_event)(&WaitEvent::Boot(b));
        }
        (self.on_event)(&WaitEvent::Line(line));
    }

    /// Probes the health endpoint; on a 2xx, the `Ready` outcome (at once when there is no
    /// endpoint to probe: the ready line decided).
    async fn probe(&mut self, spec: &ReadySpec) -> Option<WaitOutcome> {
        if let Some(path) = &spec.health_path {
            if !probe_http(&spec.http_addr, path, PROBE_TIMEOUT).await {
                return None;
            }
            (self.on_event)(&WaitEvent::HttpReady);
        }
        let elapsed = self.start.elapsed();
        Some(WaitOutcome::Ready {
            elapsed,
            log_ready: self.log_ready,
            http_ready: elapsed,
        })
    }

    fn evidence(&self, exited: bool, exit_code: Option<i64>) -> Evidence {
        Evidence {
            tail: self.tracker.tail.iter().cloned().collect(),
            causes: self.tracker.causes.clone(),
            exited,
            exit_code,
        }
    }
}

/// Waits for `name` to become ready by both signals, feeding every log line to `tracker`
/// (its boot events reach `on_event` before the line, every line before the ready line's
/// [`WaitEvent::LogReady`]). `cancel` resolving detaches.
pub async fn wait_ready(
    client: &Client,
    name: &str,
    spec: &ReadySpec,
    tracker: &mut BootTracker,
    on_event: impl FnMut(&WaitEvent),
    cancel: impl Future<Output = ()>,
) -> Result<WaitOutcome, EngineError> {
    let mut w = Watch {
        tracker,
        on_event,
        start: Instant::now(),
        log_ready: None,
    };
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut log = Box::pin(logs::lines(client, name, true, None));
    let mut log_open = true;
    let mut tick = tokio::time::interval(spec.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Once the ready line is in, the server is usually a few ms from listening: probe often.
    let mut fast = tokio::time::interval(Duration::from_millis(25));
    fast.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(cancel);
    loop {
        tokio::select! {
            _ = fast.tick(), if w.log_ready.is_some() => {
                if let Some(ready) = w.probe(spec).await {
                    return Ok(ready);
                }
            }
            _ = &mut cancel => return Ok(WaitOutcome::Detached { elapsed: w.start.elapsed() }),
            _ = tokio::time::sleep_until(deadline) => {
                return Ok(WaitOutcome::TimedOut {
                    elapsed: w.start.elapsed(),
                    evidence: w.evidence(false, None),
                });
            }
            item = log.next(), if log_open => match item {
                Some(Ok(line)) => {
                    let is_ready_line = w.log_ready.is_none()
                        && spec.ready_line.as_deref().is_some_and(|r| line.text.contains(r));
                    w.line(line);
                    if is_ready_line {
                        w.log_ready = Some(w.start.elapsed());
                        (w.on_event)(&WaitEvent::LogReady);
                        // Probe right away rather than on the next tick: most servers
                        // listen by the time they print their ready line.
                        if let Some(ready) = w.probe(spec).await {
                            return Ok(ready);
                        }
                    }
                }
                Some(Err(e)) => return Err(e),
                None => log_open = false,
            },
            _ = tick.tick() => {
                if (spec.ready_line.is_none() || w.log_ready.is_some())
                    && let Some(ready) = w.probe(spec).await
                {
                    return Ok(ready);
                }
                let info = client.container(name).await?;
                if !info.as_ref().is_some_and(|i| i.running) {
                    // Drain what the log still holds so the evidence is complete.
                    if log_open {
                        while let Ok(Some(Ok(line))) =
                            tokio::time::timeout(PROBE_TIMEOUT, log.next()).await
                        {
                            w.line(line);
                        }
                    }
                    let exit_code = info.and_then(|i| i.exit_code);
                    return Ok(WaitOutcome::Exited {
                        elapsed: w.start.elapsed(),
                        evidence: w.evidence(true, exit_code),
                    });
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
