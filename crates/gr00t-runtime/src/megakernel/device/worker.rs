//! The ttnn worker process: `python3 -c <ttnn_worker.py>` from the simulator's or the card
//! host's virtual environment, owning the device, spoken to over its stdin/stdout with framed
//! messages (`u32` header length, header JSON, `u64` payload length, payload bytes).
//!
//! Why a process and not pyo3 embedding (`docs/blackhole.md` §8): tt-metal and ttnn print to
//! the process's stdout, where `gr00t-server predict` writes its JSON; a tt-metal fatal error
//! (`TT_THROW`, a simulator assert) aborts its process, which must not be the HTTP server; and
//! the binary stays independent of the Python build (any venv with ttnn serves).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The worker's Python source, shipped inside the binary.
pub const WORKER_SOURCE: &str = include_str!("ttnn_worker.py");

/// Lines of the worker's stderr kept for error messages.
const STDERR_TAIL: usize = 40;

/// A failure of the worker or of the device behind it.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The worker process could not be started.
    #[error("cannot start the ttnn worker with `{python}`: {source}")]
    Spawn {
        /// The interpreter that was tried (see [`python_path`]).
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
    /// The worker answered a request with an error (a ttnn or tt-metal exception).
    #[error("device op `{op}` failed: {error}")]
    Op {
        /// The request's `"op"`.
        op: String,
        /// The worker's error text.
        error: String,
    },
    /// The framing or JSON of a message was not what the protocol expects.
    #[error("ttnn worker protocol: {0}")]
    Protocol(String),
}

/// The Python interpreter to run the worker with: `GR00T_TTNN_PYTHON`, else the active virtual
/// environment's (`VIRTUAL_ENV`, what the simulator's and tt-metal's set-ups activate), else
/// `python3` on `PATH`.
pub fn python_path() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    var("GR00T_TTNN_PYTHON")
        .or_else(|| var("VIRTUAL_ENV").map(|v| format!("{v}/bin/python3")))
        .unwrap_or_else(|| "python3".into())
}

/// A running worker. Not `Sync` by itself: the device backend keeps it behind a mutex.
pub struct TtnnWorker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// The worker's working directory: tt-metal writes `generated/` (inspector logs, fabric
    /// maps) under its cwd, which must not be the caller's (a checkout, an image's `/`).
    workdir: std::path::PathBuf,
}

impl TtnnWorker {
    /// Start the worker with [`python_path`] (it imports ttnn before reading its first
    /// request).
    pub fn spawn() -> Result<Self, WorkerError> {
        Self::spawn_with(&python_path())
    }

    /// Start the worker with the interpreter `python`.
    pub fn spawn_with(python: &str) -> Result<Self, WorkerError> {
        let python = python.to_string();
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
            .arg(WORKER_SOURCE)
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
        // Drain stderr (tt-metal logs a lot; a full pipe would stall the worker), keep the end.
        std::thread::Builder::new()
            .name("ttnn-worker-stderr".into())
            .spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
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
            stdin,
            stdout: BufReader::new(stdout),
            stderr_tail,
            workdir,
        })
    }

    fn exited(&mut self, what: &str) -> WorkerError {
        // Give the stderr thread a moment to take the last lines of a dying worker.
        let status = (0..50).find_map(|_| match self.child.try_wait() {
            Ok(Some(s)) => Some(s.to_string()),
            _ => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        WorkerError::Exited {
            what: format!(
                "{what}; {}",
                status.unwrap_or_else(|| "still running".into())
            ),
            tail,
        }
    }

    /// One request, one answer. `header` must carry `"op"`.
    pub fn call(
        &mut self,
        header: &Value,
        payload: &[u8],
    ) -> Result<(Value, Vec<u8>), WorkerError> {
        let op = header["op"].as_str().unwrap_or("?").to_string();
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
                op,
                error: ans["error"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_string(),
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
    /// Close the device cleanly (the worker closes it on end of input too), then reap.
    fn drop(&mut self) {
        let _ = self.call(&serde_json::json!({"op": "close"}), &[]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}
