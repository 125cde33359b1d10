//! The boot watch: the engine's readiness wait ([`tt_model_engine::wait`]) with every log line
//! read by the kind's [`BootTracker`], so the caller sees boot phases as they change and gets
//! the log evidence [`crate::diagnose`] needs when the container exits or the deadline passes.

use std::future::Future;
use std::time::Duration;

use tt_model_engine::logs::LogLine;
use tt_model_engine::wait::{self as engine_wait, ReadySpec};
use tt_model_engine::{Client, EngineError};

use crate::bootlog::{BootEvent, BootTracker};
use crate::diagnose::Evidence;

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
        /// When the health probe first answered 2xx, from the start of the wait.
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

fn evidence(t: &BootTracker, exited: bool, exit_code: Option<i64>) -> Evidence {
    Evidence {
        tail: t.tail.iter().cloned().collect(),
        causes: t.causes.clone(),
        exited,
        exit_code,
    }
}

/// Wait for `name` to become ready by both signals (see [`engine_wait::wait_ready`]), feeding
/// every log line to `tracker`. `cancel` resolving detaches.
pub async fn wait_ready(
    client: &Client,
    name: &str,
    spec: &ReadySpec,
    tracker: &mut BootTracker,
    mut on_event: impl FnMut(&WaitEvent),
    cancel: impl Future<Output = ()>,
) -> Result<WaitOutcome, EngineError> {
    let outcome = engine_wait::wait_ready(
        client,
        name,
        spec,
        |e| match e {
            engine_wait::WaitEvent::Line(line) => {
                for b in tracker.feed(&line.text) {
                    on_event(&WaitEvent::Boot(b));
                }
                on_event(&WaitEvent::Line(line.clone()));
            }
            engine_wait::WaitEvent::LogReady => on_event(&WaitEvent::LogReady),
            engine_wait::WaitEvent::HttpReady => on_event(&WaitEvent::HttpReady),
        },
        cancel,
    )
    .await?;
    Ok(match outcome {
        engine_wait::WaitOutcome::Ready {
            elapsed,
            log_ready,
            http_ready,
        } => WaitOutcome::Ready {
            elapsed,
            log_ready,
            http_ready,
        },
        engine_wait::WaitOutcome::Exited { elapsed, exit_code } => WaitOutcome::Exited {
            elapsed,
            evidence: evidence(tracker, true, exit_code),
        },
        engine_wait::WaitOutcome::TimedOut { elapsed } => WaitOutcome::TimedOut {
            elapsed,
            evidence: evidence(tracker, false, None),
        },
        engine_wait::WaitOutcome::Detached { elapsed } => WaitOutcome::Detached { elapsed },
    })
}
