//! Supervision of the device under a ready runtime: a lost device (its ttnn worker died, or
//! missed the deadline `GR00T_MK_DEVICE_TIMEOUT_S` and was killed) turns the server
//! `Recovering` at once (`/health` 503, `/predict` 503 with `Retry-After`), and is reopened
//! (a new worker, the device opened, the arena uploaded again) with a growing backoff until it
//! serves again, without a restart of the server.
//!
//! Every loss and every failed reopen is logged with the worker's last lines: the evidence a
//! container's log carries for `tt-model serve`'s diagnosis.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::state::AppState;

/// How often the device's state is read.
const POLL: Duration = Duration::from_millis(100);
/// The first wait after a failed reopen; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two reopen attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Start supervising the device of `state`'s runtime (none for a host-only backend: the
/// thread then ends at once). It stops when [`AppState::stop`] is called.
pub fn spawn(state: AppState) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("device-supervisor".into())
        .spawn(move || run(&state))
}

fn run(state: &AppState) {
    let Some(rt) = state.loaded_runtime() else {
        return;
    };
    let Some(device) = rt.policy_device() else {
        return;
    };
    while !state.is_stopping() {
        let status = device.status();
        if status.usable {
            std::thread::sleep(POLL);
            continue;
        }
        let reason = status.lost.unwrap_or_else(|| "lost".into());
        tracing::error!(
            "device {} lost; reopening it (requests get 503 meanwhile): {reason}",
            status.device
        );
        state.set_recovering(format!("device {} lost: {reason}", status.device));
        let mut backoff = FIRST_BACKOFF;
        while !state.is_stopping() {
            let t = Instant::now();
            match device.reopen() {
                Ok(()) => {
                    let s = device.status();
                    tracing::info!(
                        "device {} reopened in {:.1} s (worker pid {}, reopened {} times): serving again",
                        s.device,
                        t.elapsed().as_secs_f64(),
                        s.worker_pid.map_or("?".into(), |p| p.to_string()),
                        s.reopened
                    );
                    state.set_recovered();
                    break;
                }
                Err(e) => {
                    tracing::error!(
                        "reopening the device failed (next try in {:.1} s): {e}",
                        backoff.as_secs_f64()
                    );
                    state.set_recovering(e.to_string());
                    sleep_unless_stopping(state, backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

fn sleep_unless_stopping(state: &AppState, d: Duration) {
    let end = Instant::now() + d;
    while !state.is_stopping() && Instant::now() < end {
        std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    }
}
