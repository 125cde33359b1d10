//! The ttnn worker process: `python3 -c <ttnn_graph.py + ttnn_worker.py>` from the
//! simulator's or the card host's virtual environment, owning the device, spoken to over its
//! stdin/stdout with framed messages (`u32` header length, header JSON, `u64` payload length,
//! payload bytes).
//!
//! Why a process and not pyo3 embedding (`docs/blackhole.md` §8): tt-metal and ttnn print to
//! the process's stdout, where `gr00t-server predict` writes its JSON; a tt-metal fatal error
//! (`TT_THROW`, a simulator assert) aborts its process, which must not be the HTTP server; and
//! the binary stays independent of the Python build (any venv with ttnn serves).
//!
//! Every exchange has a deadline ([`WorkerConfig`]), and every program of a `graph` or `replay`
//! its own ([`super::deadline`]), enforced here on the host by the [`Watchdog`]: a worker that
//! does not answer in time is killed and the call fails with [`WorkerError::Timeout`] (naming
//! the deadline that passed), so a hung device never holds its caller forever.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tt_blackhole::device::{DeviceFault, FaultKind};

use super::deadline::{ProgramDeadlines, secs};
use super::protocol::{Op, Reply, WorkerFailure, WorkerOp, header, parse_reply, summary};
use super::watchdog::{Liveness, Watchdog};

/// The worker's Python source, shipped inside the binary: the graph ops' mixin
/// (`ttnn_graph.py`) first, then the worker that inherits it (`ttnn_worker.py`).
/// [`worker_source`] puts what it takes from the runtime before it.
pub const WORKER_SOURCE: &str = concat!(
    include_str!("ttnn_graph.py"),
    "\n",
    include_str!("ttnn_worker.py")
);

/// The worker's whole source: the protocol's schema ([`super::protocol::SCHEMA`], which it
/// checks every message against) first, then [`WORKER_SOURCE`]. Nothing else: every CB id,
/// word and bound of a program comes in the program itself (`lower.rs`).
pub fn worker_source() -> String {
    format!(
        "PROTOCOL_JSON = r'''{}'''\n{WORKER_SOURCE}",
        super::protocol::SCHEMA
    )
}

/// What the worker writes to its stderr after each program of a graph (not kept in the tail):
/// the host's work that follows has the exchange deadline again.
pub const PROGRESS_LINE: &str = "gr00t-worker: program done";
/// What the worker writes to its stderr before each program of a graph or replay: this, the
/// number of graph steps the program does (a chain's, else 1), ` steps`, then `: ` and the
/// program's label (its `by_label` key). The program gets the deadline derived for it
/// ([`super::deadline::ProgramDeadlines::for_program`]).
pub const CHAIN_LINE: &str = "gr00t-worker: program of ";

/// A program's start line ([`CHAIN_LINE`]): its steps and label (empty when the line has none).
pub fn program_start(line: &str) -> Option<(u32, &str)> {
    let (n, rest) = line.strip_prefix(CHAIN_LINE)?.split_once(" steps")?;
    let steps = n.parse::<u32>().ok()?;
    Some((steps, rest.strip_prefix(": ").unwrap_or(rest)))
}

/// Lines of the worker's stderr kept for error messages.
const STDERR_TAIL: usize = 40;

/// The setting that holds [`WorkerConfig::call_timeout`] (read by `gr00t-server`'s settings).
pub const TIMEOUT_VAR: &str = "GR00T_MK_DEVICE_TIMEOUT_S";

/// How the worker is started and how long each exchange may take.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// The Python interpreter with ttnn (default [`DEFAULT_PYTHON`]).
    pub python: String,
    /// Deadline of each exchange of a forward (a matmul program, a read-back, the host's work
    /// between a graph's programs; a graph's programs have their own, `super::deadline`):
    /// `GR00T_MK_DEVICE_TIMEOUT_S`, default [`WorkerConfig::DEFAULT_CALL_TIMEOUT`].
    pub call_timeout: Duration,
    /// Deadline of the boot exchanges (`open`: ttnn's import and the device's initialisation;
    /// `upload`: the whole arena), never shorter than `call_timeout`.
    pub boot_timeout: Duration,
}

impl WorkerConfig {
    /// A card answers a DiT matmul in microseconds and JIT-compiles our three kernels in
    /// seconds; 30 s only ever fires on a hang.
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
    /// Opening a card (firmware load, ttnn's import) and writing a 1.15 GB arena.
    pub const DEFAULT_BOOT_TIMEOUT: Duration = Duration::from_secs(300);

    /// `python` with the default deadlines.
    pub fn new(python: impl Into<String>) -> Self {
        WorkerConfig {
            python: python.into(),
            call_timeout: Self::DEFAULT_CALL_TIMEOUT,
            boot_timeout: Self::DEFAULT_BOOT_TIMEOUT,
        }
    }

    /// The same with an exchange deadline of `call` (the boot deadline grows with it).
    pub fn with_call_timeout(mut self, call: Duration) -> Self {
        self.call_timeout = call;
        self.boot_timeout = self.boot_timeout.max(call);
        self
    }
}

/// A failure of the worker or of the device behind it.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The worker process could not be started.
    #[error("cannot start the ttnn worker with `{python}`: {source}")]
    Spawn {
        /// The interpreter that was tried.
        python: String,
        /// The spawn error.
        source: std::io::Error,
    },
    /// The worker process ended, or its pipes broke, while a request was in flight.
    #[error("the ttnn worker exited ({what}); its last output:\n{tail}")]
    Exited {
        /// What was being done, and the exit status if known.
        what: String,
        /// The last lines of the worker's stderr.
        tail: String,
    },
    /// The worker gave no answer within the deadline and was killed (a hung device program, a
    /// stopped process).
    #[error(
        "the ttnn worker gave no answer to `{op}` within {} s ({deadline}); it was killed; its last output:\n{tail}",
        secs(*after)
    )]
    Timeout {
        /// The request's `"op"`.
        op: String,
        /// The deadline that passed.
        after: Duration,
        /// What set it: the exchange deadline's setting, or a program's derivation.
        deadline: String,
        /// The last lines of the worker's stderr.
        tail: String,
    },
    /// The worker answered a request with an error: it refused it (the schema) or running it
    /// failed (a ttnn or tt-metal exception).
    #[error("device op `{op}` failed ({}): {error}", match kind {
        WorkerFailure::Schema => "refused by the protocol schema",
        WorkerFailure::Op => "raised",
    })]
    Op {
        /// The request's `"op"`.
        op: String,
        /// Refused or failed.
        kind: WorkerFailure,
        /// The worker's error text.
        error: String,
        /// The request, its long strings shortened ([`summary`]).
        request: String,
    },
    /// The framing or JSON of a message was not what the protocol expects.
    #[error("ttnn worker protocol: {0}")]
    Protocol(String),
}

/// The interpreter the worker runs with unless told otherwise: `python3` on `PATH` (an
/// activated virtual environment, the simulator's or the image's, puts its own first). The
/// runtime reads no environment of its own: `gr00t-server`'s settings pass
/// `GR00T_TTNN_PYTHON` (else `$VIRTUAL_ENV/bin/python3`) down in [`WorkerConfig::python`].
pub const DEFAULT_PYTHON: &str = "python3";

impl WorkerError {
    /// Whether the worker is gone or unusable after this error (it died, was killed, or broke
    /// the protocol), as opposed to one request failing on a live worker.
    pub fn is_fatal(&self) -> bool {
        self.kind().is_fatal()
    }

    /// What happened, as the typed fault the runtime's callers get.
    pub fn kind(&self) -> FaultKind {
        match self {
            WorkerError::Spawn { .. } => FaultKind::Spawn,
            WorkerError::Exited { .. } => FaultKind::Exited,
            WorkerError::Timeout { .. } => FaultKind::Timeout,
            WorkerError::Op {
                kind: WorkerFailure::Schema,
                ..
            } => FaultKind::Schema,
            WorkerError::Op { .. } => FaultKind::Failed,
            WorkerError::Protocol(_) => FaultKind::Protocol,
        }
    }

    /// This error as a [`DeviceFault`] of the request `op` (its header shortened: `request`).
    pub fn into_fault(self, op: &str, request: String) -> DeviceFault {
        DeviceFault {
            kind: self.kind(),
            op: op.to_string(),
            message: self.to_string(),
            request,
        }
    }
}

/// A running worker. Not `Sync` by itself: the device backend keeps it behind a mutex.
pub struct TtnnWorker {
    child: Arc<Mutex<Child>>,
    watchdog: Watchdog,
    config: WorkerConfig,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// The worker's working directory: tt-metal writes `generated/` (inspector logs, fabric
    /// maps) under its cwd, which must not be the caller's (a checkout, an image's `/`).
    workdir: std::path::PathBuf,
}

impl TtnnWorker {
    /// Start the worker with [`DEFAULT_PYTHON`] and the default deadlines (it imports ttnn
    /// before reading its first request).
    pub fn spawn() -> Result<Self, WorkerError> {
        Self::spawn_with(DEFAULT_PYTHON)
    }

    /// Start the worker with the interpreter `python` and the default deadlines.
    pub fn spawn_with(python: &str) -> Result<Self, WorkerError> {
        Self::start(&WorkerConfig::new(python))
    }

    /// Start the worker as `config` says.
    pub fn start(config: &WorkerConfig) -> Result<Self, WorkerError> {
        Self::start_program(config, &worker_source())
    }

    /// Start `config.python -u -c source`: the worker, or (tests) another program speaking
    /// the same protocol.
    pub(crate) fn start_program(config: &WorkerConfig, source: &str) -> Result<Self, WorkerError> {
        let python = config.python.clone();
        let workdir = std::env::temp_dir().join(format!(
            "gr00t-ttnn-worker-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&workdir).map_err(|source| WorkerError::Spawn {
            python: python.clone(),
            source,
        })?;
        let mut child = Command::new(&python)
            .current_dir(&workdir)
            .env("GR00T_TTNN_WORKDIR", &workdir)
            .arg("-u")
            .arg("-c")
            .arg(source)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| {
                let _ = std::fs::remove_dir_all(&workdir);
                WorkerError::Spawn {
                    python: python.clone(),
                    source,
                }
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(WorkerError::Protocol("worker pipes missing".into()));
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr_tail);
        let child = Arc::new(Mutex::new(child));
        let watchdog =
            Watchdog::start(Arc::clone(&child), Arc::clone(&stderr_tail)).map_err(|source| {
                WorkerError::Spawn {
                    python: python.clone(),
                    source,
                }
            })?;
        let live = watchdog.liveness();
        // Drain stderr (tt-metal logs a lot; a full pipe would stall the worker), keep the end;
        // the worker's progress lines (before and after each program of a graph) set the
        // deadline.
        std::thread::Builder::new()
            .name("ttnn-worker-stderr".into())
            .spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if line == PROGRESS_LINE {
                        live.program_done();
                        continue;
                    }
                    if let Some((steps, label)) = program_start(&line) {
                        live.program_start(steps, label);
                        continue;
                    }
                    if let Ok(mut t) = tail.lock() {
                        if t.len() == STDERR_TAIL {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            })
            .map_err(|source| WorkerError::Spawn {
                python: python.clone(),
                source,
            })?;
        Ok(TtnnWorker {
            child,
            watchdog,
            config: config.clone(),
            stdin,
            stdout: BufReader::new(stdout),
            stderr_tail,
            workdir,
        })
    }

    /// Whether the process runs, for callers that must not wait for the exchange in flight.
    pub fn liveness(&self) -> Liveness {
        self.watchdog.liveness()
    }

    /// The deadlines this worker runs under.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The last lines the worker wrote to its stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    fn try_wait(&self) -> Option<std::process::ExitStatus> {
        let status = self
            .child
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .try_wait()
            .ok()
            .flatten();
        if let Some(s) = status {
            self.watchdog.note_exit(s.to_string());
        }
        status
    }

    fn exited(&mut self, what: &str) -> WorkerError {
        // Give the stderr thread a moment to take the last lines of a dying worker.
        let status = (0..50).find_map(|_| match self.try_wait() {
            Some(s) => Some(s.to_string()),
            None => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        let tail = self.stderr_tail();
        WorkerError::Exited {
            what: format!(
                "{what}; {}",
                status.unwrap_or_else(|| "still running".into())
            ),
            tail,
        }
    }

    /// One request, one typed answer, within the exchange deadline (`open` and `upload` within
    /// the boot deadline); each program of a graph has the exchange deadline per step
    /// ([`TtnnWorker::call_programs`] gives them theirs).
    pub fn call<R: WorkerOp>(
        &mut self,
        request: &R,
        payload: &[u8],
    ) -> Result<(Reply<R::Answer>, Vec<u8>), WorkerError> {
        self.call_typed(request, payload, None)
    }

    /// [`TtnnWorker::call`] for a `graph` or `replay`: each program the worker announces gets
    /// the deadline `programs` derives for it, the host's work before, between and after them
    /// the exchange deadline.
    pub fn call_programs<R: WorkerOp>(
        &mut self,
        request: &R,
        payload: &[u8],
        programs: Arc<ProgramDeadlines>,
    ) -> Result<(Reply<R::Answer>, Vec<u8>), WorkerError> {
        self.call_typed(request, payload, Some(programs))
    }

    fn call_typed<R: WorkerOp>(
        &mut self,
        request: &R,
        payload: &[u8],
        programs: Option<Arc<ProgramDeadlines>>,
    ) -> Result<(Reply<R::Answer>, Vec<u8>), WorkerError> {
        let op = R::OP.name();
        let h =
            header(request).map_err(|e| WorkerError::Protocol(format!("request `{op}`: {e}")))?;
        let (ans, data) = self.call_with(&h, payload, programs)?;
        let reply = parse_reply(ans).map_err(|e| {
            WorkerError::Protocol(format!(
                "the answer to `{op}` does not match the protocol: {e}"
            ))
        })?;
        Ok((reply, data))
    }

    /// One request as it is (any header with an `"op"`), one untyped answer: for tests that
    /// speak to stand-in workers, or send what the protocol's types cannot.
    pub fn call_value(
        &mut self,
        header: &Value,
        payload: &[u8],
    ) -> Result<(Value, Vec<u8>), WorkerError> {
        self.call_with(header, payload, None)
    }

    /// [`TtnnWorker::call_value`] with the programs' deadlines of [`TtnnWorker::call_programs`].
    pub fn call_value_programs(
        &mut self,
        header: &Value,
        payload: &[u8],
        programs: Arc<ProgramDeadlines>,
    ) -> Result<(Value, Vec<u8>), WorkerError> {
        self.call_with(header, payload, Some(programs))
    }

    fn call_with(
        &mut self,
        header: &Value,
        payload: &[u8],
        programs: Option<Arc<ProgramDeadlines>>,
    ) -> Result<(Value, Vec<u8>), WorkerError> {
        let boot = serde_json::from_value::<Op>(header["op"].clone()).is_ok_and(Op::is_boot);
        let (limit, why) = match boot {
            true => (
                self.config.boot_timeout,
                format!(
                    "the boot deadline: {TIMEOUT_VAR}, at least {} s",
                    secs(WorkerConfig::DEFAULT_BOOT_TIMEOUT)
                ),
            ),
            false => (self.config.call_timeout, TIMEOUT_VAR.to_string()),
        };
        self.call_armed(header, payload, limit, &why, programs)
    }

    /// One request, one answer within `limit`, else the worker is killed and the call fails
    /// with [`WorkerError::Timeout`].
    pub fn call_within(
        &mut self,
        header: &Value,
        payload: &[u8],
        limit: Duration,
    ) -> Result<(Value, Vec<u8>), WorkerError> {
        self.call_armed(header, payload, limit, TIMEOUT_VAR, None)
    }

    fn call_armed(
        &mut self,
        header: &Value,
        payload: &[u8],
        limit: Duration,
        why: &str,
        programs: Option<Arc<ProgramDeadlines>>,
    ) -> Result<(Value, Vec<u8>), WorkerError> {
        let op = header["op"].as_str().unwrap_or("?").to_string();
        self.watchdog.arm(&op, limit, why, programs);
        let answer = self.exchange(&op, header, payload);
        if let Some((_, after, deadline)) = self.watchdog.disarm() {
            let _ = self.try_wait();
            return Err(WorkerError::Timeout {
                op,
                after,
                deadline,
                tail: self.stderr_tail(),
            });
        }
        answer
    }

    fn exchange(
        &mut self,
        op: &str,
        header: &Value,
        payload: &[u8],
    ) -> Result<(Value, Vec<u8>), WorkerError> {
        let h = serde_json::to_vec(header).map_err(|e| WorkerError::Protocol(e.to_string()))?;
        let mut frame = Vec::with_capacity(12 + h.len());
        frame.extend_from_slice(&(h.len() as u32).to_le_bytes());
        frame.extend_from_slice(&h);
        frame.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        let sent = self
            .stdin
            .write_all(&frame)
            .and_then(|()| self.stdin.write_all(payload))
            .and_then(|()| self.stdin.flush());
        if let Err(e) = sent {
            return Err(self.exited(&format!("writing `{op}`: {e}")));
        }
        let answer = match read_frame(&mut self.stdout) {
            Ok(a) => a,
            Err(e) => return Err(self.exited(&format!("reading the answer to `{op}`: {e}"))),
        };
        let (ans, data) = answer;
        if ans["ok"].as_bool() == Some(true) {
            Ok((ans, data))
        } else {
            Err(WorkerError::Op {
                op: op.to_string(),
                kind: serde_json::from_value(ans["kind"].clone()).unwrap_or(WorkerFailure::Op),
                error: ans["error"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
                request: summary(header),
            })
        }
    }
}

fn read_frame(r: &mut impl Read) -> std::io::Result<(Value, Vec<u8>)> {
    let mut n4 = [0u8; 4];
    r.read_exact(&mut n4)?;
    let mut h = vec![0u8; u32::from_le_bytes(n4) as usize];
    r.read_exact(&mut h)?;
    let header: Value = serde_json::from_slice(&h)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut n8 = [0u8; 8];
    r.read_exact(&mut n8)?;
    let mut payload = vec![0u8; u64::from_le_bytes(n8) as usize];
    r.read_exact(&mut payload)?;
    Ok((header, payload))
}

impl Drop for TtnnWorker {
    /// Close the device cleanly (the worker closes it on end of input too), then reap; bounded:
    /// the close has its own short deadline and a worker that does not exit is killed.
    fn drop(&mut self) {
        let grace = self.config.call_timeout.min(CLOSE_GRACE);
        if self.liveness().is_alive() {
            let why = format!("closing: at most {} s", secs(CLOSE_GRACE));
            let close = header(&super::protocol::Close {}).unwrap_or_default();
            let _ = self.call_armed(&close, &[], grace, &why, None);
        }
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline && self.try_wait().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        {
            let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
            if !matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}

/// The longest a dropped worker gets to close its device and exit before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
