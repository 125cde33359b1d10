//! The host-side deadline and liveness watch of one ttnn worker process.
//!
//! A device program that deadlocks (a circular-buffer or NoC hang on silicon), a worker stopped
//! by a signal, or a simulator stuck in a loop never answers: the Rust side would block on its
//! pipe forever, holding the device lock, and every later request would queue behind it. The
//! watchdog thread owns the remedy: while an exchange is armed and its deadline passes, it kills
//! the worker (SIGKILL, which also ends a stopped process), which closes the pipes and unblocks
//! the reader and the writer. Between exchanges it polls the process, so a worker that dies
//! while idle is noticed at once (the server's `/health` reads [`Liveness::is_alive`]).
//!
//! Within an exchange the deadline follows the worker's progress lines: a program that starts
//! ([`Liveness::program_start`]) gets its own deadline ([`super::deadline`]), one that is done
//! ([`Liveness::program_done`]) gives the exchange deadline back to the host's work that
//! follows. Each line sets the deadline from the moment it is read, never from the deadline
//! before it: a worker is killed one deadline after its last line.

use std::collections::VecDeque;
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watch polls the process for an exit when nothing is armed.
const POLL: Duration = Duration::from_millis(100);

use super::deadline::{DeadlineRule, Expected, ProgramDeadlines, derive};
use super::worker::{TIMEOUT_VAR, WorkerError};

/// The exchange in flight.
struct Armed {
    op: String,
    /// The exchange deadline: the host's work outside the programs.
    exchange: Duration,
    /// The programs' deadlines; `None`: each program gets the exchange deadline per step.
    programs: Option<Arc<ProgramDeadlines>>,
    /// The deadline in force and what set it.
    applied: (Duration, String),
}

/// A deadline that passed: the exchange's op, the deadline and what set it.
pub type Missed = (String, Duration, String);

#[derive(Default)]
struct Watch {
    /// When the exchange in flight must have been answered (or its program have ended).
    deadline: Option<Instant>,
    /// The exchange in flight.
    armed: Option<Armed>,
    /// The deadline that passed, once the worker was killed for it.
    killed_for: Option<Missed>,
    /// A deadline passed and the worker was killed (for good).
    killed: bool,
    /// The deadline of the exchange armed last passed.
    expired: bool,
    /// The process ended: its exit status as text.
    exited: Option<String>,
    /// The worker is being dropped: the thread ends.
    stop: bool,
}

struct Shared {
    watch: Mutex<Watch>,
    wake: Condvar,
    child: Arc<Mutex<Child>>,
    pid: u32,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

/// A cheap, cloneable view of whether the worker still runs (for health checks that must not
/// wait for the exchange in flight).
#[derive(Clone)]
pub struct Liveness(Arc<Shared>);

impl Liveness {
    /// Whether the process runs and was not killed for a missed deadline.
    pub fn is_alive(&self) -> bool {
        let w = lock(&self.0.watch);
        w.exited.is_none() && !w.killed
    }

    /// The process's exit status, once it ended.
    pub fn exit_status(&self) -> Option<String> {
        lock(&self.0.watch).exited.clone()
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.0.pid
    }

    /// A program of the exchange in flight is done: the host's work that follows (the next
    /// program's build, the outputs read back) has the exchange deadline, from now.
    pub fn program_done(&self) {
        let mut w = lock(&self.0.watch);
        if w.deadline.is_none() {
            return;
        }
        if let Some(a) = w.armed.as_mut() {
            a.applied = (a.exchange, TIMEOUT_VAR.to_string());
            let limit = a.exchange;
            w.deadline = Some(Instant::now() + limit);
        }
        drop(w);
        self.0.wake.notify_all();
    }

    /// The worker starts program `label` of `steps` steps (a chain of a graph's steps, or one):
    /// its deadline, from now, is the one [`ProgramDeadlines::for_program`] derives (without
    /// them, the exchange deadline per step).
    pub fn program_start(&self, steps: u32, label: &str) {
        let mut w = lock(&self.0.watch);
        if w.deadline.is_none() {
            return;
        }
        if let Some(a) = w.armed.as_mut() {
            let d = match &a.programs {
                Some(p) => p.for_program(&a.op, label, steps),
                None => {
                    let rule = DeadlineRule {
                        floor: Duration::ZERO,
                        factor: DeadlineRule::FACTOR,
                        exchange: a.exchange,
                    };
                    derive(&rule, label, Expected::Unknown, steps, a.op != "replay")
                }
            };
            let limit = d.limit;
            a.applied = (d.limit, d.why);
            w.deadline = Some(Instant::now() + limit);
        }
        drop(w);
        self.0.wake.notify_all();
    }

    /// Why the worker is gone, worded as the call that met it would have been (a missed
    /// deadline or an exit, with the worker's last lines); `None` while it runs.
    pub fn loss(&self) -> Option<WorkerError> {
        let (killed_for, exited) = {
            let w = lock(&self.0.watch);
            if w.exited.is_none() && !w.killed {
                return None;
            }
            (w.killed_for.clone(), w.exited.clone())
        };
        let tail = lock(&self.0.stderr_tail)
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        Some(match killed_for {
            Some((op, after, deadline)) => WorkerError::Timeout {
                op,
                after,
                deadline,
                tail,
            },
            None => WorkerError::Exited {
                what: format!("between requests; {}", exited.unwrap_or_default()),
                tail,
            },
        })
    }
}

/// The watch thread of one worker; stopped (and joined) on drop.
pub struct Watchdog {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watchdog {
    /// Watch `child` (shared with the worker, which reaps it); `stderr_tail` is the worker's
    /// last stderr lines, for the reports of [`Liveness::loss`].
    pub fn start(
        child: Arc<Mutex<Child>>,
        stderr_tail: Arc<Mutex<VecDeque<String>>>,
    ) -> std::io::Result<Self> {
        let pid = lock(&child).id();
        let shared = Arc::new(Shared {
            watch: Mutex::new(Watch::default()),
            wake: Condvar::new(),
            child,
            pid,
            stderr_tail,
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("ttnn-watchdog-{pid}"))
            .spawn(move || run(&s))?;
        Ok(Watchdog {
            shared,
            thread: Some(thread),
        })
    }

    /// The liveness view of this worker.
    pub fn liveness(&self) -> Liveness {
        Liveness(Arc::clone(&self.shared))
    }

    /// An exchange (`op`) starts: kill the worker unless [`Watchdog::disarm`] comes within
    /// `limit` (what set it: `why`), or, once a program starts, within that program's
    /// deadline from `programs` ([`Liveness::program_start`]).
    pub fn arm(
        &self,
        op: &str,
        limit: Duration,
        why: &str,
        programs: Option<Arc<ProgramDeadlines>>,
    ) {
        let mut w = lock(&self.shared.watch);
        w.deadline = Some(Instant::now() + limit);
        w.armed = Some(Armed {
            op: op.to_string(),
            exchange: limit,
            programs,
            applied: (limit, why.to_string()),
        });
        w.expired = false;
        drop(w);
        self.shared.wake.notify_all();
    }

    /// The worker's owner reaped the process: record its status now rather than at the next
    /// poll.
    pub fn note_exit(&self, status: String) {
        lock(&self.shared.watch).exited.get_or_insert(status);
    }

    /// The exchange ended. Returns the deadline that passed when the worker was killed for it.
    pub fn disarm(&self) -> Option<Missed> {
        let mut w = lock(&self.shared.watch);
        w.deadline = None;
        w.armed = None;
        if w.expired {
            w.killed_for.clone()
        } else {
            None
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        lock(&self.shared.watch).stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(s: &Shared) {
    let mut w = lock(&s.watch);
    loop {
        if w.stop {
            return;
        }
        if w.exited.is_none()
            && let Ok(Some(status)) = lock(&s.child).try_wait()
        {
            w.exited = Some(status.to_string());
        }
        let now = Instant::now();
        let wait = match w.deadline {
            Some(d) if now >= d => {
                // SIGKILL: ends a hung or stopped worker; its pipes close and the caller's
                // blocked read or write returns.
                let _ = lock(&s.child).kill();
                w.killed = true;
                w.expired = true;
                w.killed_for = w
                    .armed
                    .as_ref()
                    .map(|a| (a.op.clone(), a.applied.0, a.applied.1.clone()));
                w.deadline = None;
                POLL
            }
            Some(d) => (d - now).min(POLL),
            None => POLL,
        };
        w = s
            .wake
            .wait_timeout(w, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}
