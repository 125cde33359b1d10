//! The host-side deadline and liveness watch of one ttnn worker process.
//!
//! A device program that deadlocks (a circular-buffer or NoC hang on silicon), a worker stopped
//! by a signal, or a simulator stuck in a loop never answers: the Rust side would block on its
//! pipe forever, holding the device lock, and every later request would queue behind it. The
//! watchdog thread owns the remedy: while an exchange is armed and its deadline passes, it kills
//! the worker (SIGKILL, which also ends a stopped process), which closes the pipes and unblocks
//! the reader and the writer. Between exchanges it polls the process, so a worker that dies
//! while idle is noticed at once (the server's `/health` reads [`Liveness::is_alive`]).

use std::collections::VecDeque;
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watch polls the process for an exit when nothing is armed.
const POLL: Duration = Duration::from_millis(100);

use super::worker::WorkerError;

#[derive(Default)]
struct Watch {
    /// When the exchange in flight must have been answered.
    deadline: Option<Instant>,
    /// The exchange in flight: its op and deadline.
    armed_for: Option<(String, Duration)>,
    /// The exchange whose deadline passed, once the worker was killed for it.
    killed_for: Option<(String, Duration)>,
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

    /// The worker reported progress within its exchange (a `graph` finished one of its
    /// programs): the armed deadline starts again from now, so a long graph is bounded per
    /// program, not as a whole.
    pub fn progress(&self) {
        self.progress_for(1);
    }

    /// The worker starts a program that does the work of `steps` (a chain of a graph's steps):
    /// the deadline starts again from now, `steps` times the armed limit.
    pub fn progress_for(&self, steps: u32) {
        let mut w = lock(&self.0.watch);
        if let (Some(_), Some((_, limit))) = (w.deadline, w.armed_for.as_ref()) {
            w.deadline = Some(Instant::now() + *limit * steps.max(1));
        }
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
            Some((op, after)) => WorkerError::Timeout { op, after, tail },
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
    /// `limit`.
    pub fn arm(&self, op: &str, limit: Duration) {
        let mut w = lock(&self.shared.watch);
        w.deadline = Some(Instant::now() + limit);
        w.armed_for = Some((op.to_string(), limit));
        w.expired = false;
        drop(w);
        self.shared.wake.notify_all();
    }

    /// The worker's owner reaped the process: record its status now rather than at the next
    /// poll.
    pub fn note_exit(&self, status: String) {
        lock(&self.shared.watch).exited.get_or_insert(status);
    }

    /// The exchange ended. Returns whether the deadline had passed and the worker was killed.
    pub fn disarm(&self) -> bool {
        let mut w = lock(&self.shared.watch);
        w.deadline = None;
        w.expired
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
                w.killed_for = w.armed_for.clone();
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
