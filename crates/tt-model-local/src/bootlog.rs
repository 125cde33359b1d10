//! The boot checklist: a pure parser that turns container log lines into ordered phases with
//! progress (from tqdm fragments, recomputed from the counts) and details, and keeps the lines
//! that explain a failure for [`crate::diagnose`].

use std::collections::VecDeque;

use tt_model_manifest::numfmt::group_thousands;

/// One phase of a boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseDef {
    /// Stable identifier of the phase (e.g. `"engine"`, `"device"`), used in [`BootEvent`]s.
    pub key: &'static str,
    /// Human-readable text for the checklist row (e.g. `"engine initialised"`).
    pub label: &'static str,
    /// Any of these substrings starts the phase (and finishes every earlier one).
    pub start: &'static [&'static str],
    /// Any of these substrings finishes it.
    pub done: &'static [&'static str],
}

/// vLLM (plugin and fork) boot phases.
pub const VLLM_PHASES: &[PhaseDef] = &[
    PhaseDef {
        key: "engine",
        label: "engine initialised",
        start: &[
            "Available plugins for group vllm.platform_plugins",
            "Platform plugin tt is activated",
            "vLLM server version",
            "Initializing a V1 LLM engine",
        ],
        done: &[],
    },
    PhaseDef {
        key: "device",
        label: "Tenstorrent device opened",
        start: &[
            "Opening user mode device driver",
            "Attempting to open mesh device",
            "Starting devices in cluster",
        ],
        done: &["devices and grid"],
    },
    PhaseDef {
        key: "weights",
        label: "weights loaded",
        start: &[
            "Checkpoint directory:",
            "Loading checkpoint shards",
            "Loading safetensors",
            "Loading weights",
        ],
        done: &[],
    },
    PhaseDef {
        key: "kv",
        label: "KV cache configured",
        start: &["KV cache size", "Allocating TT kv caches", "num_gpu_blocks"],
        done: &[],
    },
    PhaseDef {
        key: "warmup",
        label: "warming up the model",
        start: &[
            "Warming up prefill",
            "Warming up decode",
            "Starting decode warmup",
            "Done Compiling Model",
            "Capturing ",
        ],
        done: &["init engine"],
    },
    PhaseDef {
        key: "server",
        label: "API server started",
        start: &[
            "Starting vLLM API server",
            "Uvicorn running on",
            "Started server process",
        ],
        done: &[],
    },
];

/// tt-dit-server (diffusion, uvicorn) phases.
pub const TT_DIT_PHASES: &[PhaseDef] = &[
    PhaseDef {
        key: "server",
        label: "server process started",
        start: &["Started server process", "Waiting for application startup"],
        done: &[],
    },
    PhaseDef {
        key: "device",
        label: "Tenstorrent device opened",
        start: &[
            "Opening user mode device driver",
            "Starting devices in cluster",
        ],
        done: &["Fabric initialized on"],
    },
    PhaseDef {
        key: "weights",
        label: "weights loaded",
        start: &[
            "Loading checkpoint shards",
            "Loading pipeline components",
            "Loading weights",
        ],
        done: &[],
    },
    PhaseDef {
        key: "warmup",
        label: "warming up the pipeline",
        start: &["Warming up", "Compiling"],
        done: &["Application startup complete"],
    },
];

/// A model's own HTTP server (`http-server`, GR00T): generic phases.
pub const HTTP_PHASES: &[PhaseDef] = &[
    PhaseDef {
        key: "server",
        label: "server process started",
        start: &[
            "Started server process",
            "listening on",
            "Listening on",
            "starting",
        ],
        done: &[],
    },
    PhaseDef {
        key: "device",
        label: "device opened",
        start: &[
            "Opening user mode device driver",
            "Starting devices in cluster",
            "backend:",
        ],
        done: &[],
    },
    PhaseDef {
        key: "weights",
        label: "weights loaded",
        start: &["Loading weights", "Loading checkpoint", "loading weights"],
        done: &[],
    },
];

/// The phase table of a runtime kind.
pub fn phases_for(kind: &str) -> &'static [PhaseDef] {
    match kind {
        "vllm-plugin" | "vllm-fork" => VLLM_PHASES,
        "tt-dit-server" => TT_DIT_PHASES,
        _ => HTTP_PHASES,
    }
}

/// Lines that explain failures: kept apart from the rolling tail.
pub const CAUSE_MARKERS: &[&str] = &[
    "Sysmem mapped at unexpected NOC address",
    "CHIP_IN_USE",
    "stale process holding",
    "another PID holds the device lock",
    "Failed to allocate the TLB",
    "unrecognized arguments",
    "error: argument",
    "no such option",
    "Address already in use",
    "address already in use",
    "EngineCore failed to start",
    "out of memory",
    "OutOfMemory",
    "Timed out while waiting for active ethernet core",
    // The gr00t server's device supervisor (a worker that died or missed its deadline).
    "lost; reopening it",
    "reopening the device failed",
    "Traceback (most recent call last)",
    "Error",
    "error:",
    "FATAL",
    "panicked at",
];

/// Chatter that is never a cause or a phase.
const IGNORE: &[&str] = &["utils.prompt_client", "utils.cache_monitor"];

const TAIL_LINES: usize = 40;
const MAX_CAUSES: usize = 50;

/// State of one phase row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowState {
    /// Not reached yet.
    Pending,
    /// The current phase: its start marker was seen and no later phase has started.
    Active,
    /// Finished: its done marker was seen, or a later phase started.
    Done,
}

/// One row of the checklist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The phase's [`PhaseDef::key`].
    pub key: &'static str,
    /// The phase's [`PhaseDef::label`].
    pub label: &'static str,
    /// Where the phase is.
    pub state: RowState,
    /// `(done, total)` from the last tqdm fragment.
    pub progress: Option<(u64, u64)>,
    /// A short fact pulled from the log for this phase (e.g. `vLLM 0.10.1`, device count); `None`
    /// until one is seen.
    pub detail: Option<String>,
}

/// What a fed line changed, for the renderer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootEvent {
    /// The phase with this key became active.
    Started(&'static str),
    /// The phase with this key finished.
    Finished(&'static str),
    /// A tqdm fragment updated the active phase's progress.
    Progress {
        /// Key of the active phase.
        key: &'static str,
        /// Units done, from the tqdm fragment.
        done: u64,
        /// Units in total, from the tqdm fragment.
        total: u64,
    },
    /// A detail was extracted for the active phase.
    Detail {
        /// Key of the active phase.
        key: &'static str,
        /// The new [`Row::detail`] text.
        detail: String,
    },
}

/// The pure boot-log parser.
#[derive(Debug, Clone)]
pub struct BootTracker {
    defs: &'static [PhaseDef],
    /// One row per phase of the server kind, in boot order.
    pub rows: Vec<Row>,
    /// The last 40 lines seen (ANSI stripped, chatter ignored), oldest first.
    pub tail: VecDeque<String>,
    /// Lines matching [`CAUSE_MARKERS`], in order, at most 50: what explains a failure.
    pub causes: Vec<String>,
    /// Number of lines fed so far, ignored chatter included.
    pub lines_seen: usize,
}

impl BootTracker {
    /// A tracker for a server `kind` (`vllm-plugin`, `vllm-fork`, `tt-dit-server`, else the generic
    /// HTTP phases), every phase pending.
    pub fn new(kind: &str) -> Self {
        let defs = phases_for(kind);
        BootTracker {
            defs,
            rows: defs
                .iter()
                .map(|d| Row {
                    key: d.key,
                    label: d.label,
                    state: RowState::Pending,
                    progress: None,
                    detail: None,
                })
                .collect(),
            tail: VecDeque::new(),
            causes: Vec::new(),
            lines_seen: 0,
        }
    }

    fn active(&self) -> Option<usize> {
        self.rows.iter().position(|r| r.state == RowState::Active)
    }

    /// Feed one log line; returns what changed.
    pub fn feed(&mut self, raw: &str) -> Vec<BootEvent> {
        let line = strip_ansi(raw.trim_end_matches(['\r', '\n']));
        // tqdm redraws with \r: the last segment is the current state.
        let line = line.rsplit('\r').next().unwrap_or("").to_string();
        self.lines_seen += 1;
        if IGNORE.iter().any(|i| line.contains(i)) {
            return Vec::new();
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line.clone());
        if self.causes.len() < MAX_CAUSES && CAUSE_MARKERS.iter().any(|m| line.contains(m)) {
            self.causes.push(line.clone());
        }
        let mut ev = Vec::new();
        // A later phase's start finishes everything before it.
        let start = self
            .defs
            .iter()
            .position(|d| d.start.iter().any(|p| line.contains(p)) && !false_start(d.key, &line));
        if let Some(i) = start
            && self.rows[i].state == RowState::Pending
        {
            for j in 0..i {
                if self.rows[j].state == RowState::Active {
                    self.rows[j].state = RowState::Done;
                    ev.push(BootEvent::Finished(self.rows[j].key));
                }
            }
            self.rows[i].state = RowState::Active;
            ev.push(BootEvent::Started(self.rows[i].key));
        }
        if let Some(a) = self.active() {
            if let Some((done, total)) = tqdm_counts(&line) {
                self.rows[a].progress = Some((done, total));
                ev.push(BootEvent::Progress {
                    key: self.rows[a].key,
                    done,
                    total,
                });
            }
            if let Some(d) = detail(self.rows[a].key, &line) {
                self.rows[a].detail = Some(d.clone());
                ev.push(BootEvent::Detail {
                    key: self.rows[a].key,
                    detail: d,
                });
            }
            if self.defs[a].done.iter().any(|p| line.contains(p)) {
                self.rows[a].state = RowState::Done;
                ev.push(BootEvent::Finished(self.rows[a].key));
            }
        }
        ev
    }

    /// Mark every active row done (the server reported ready).
    pub fn finish_all(&mut self) -> Vec<BootEvent> {
        let mut ev = Vec::new();
        for r in &mut self.rows {
            if r.state == RowState::Active {
                r.state = RowState::Done;
                ev.push(BootEvent::Finished(r.key));
            }
        }
        ev
    }
}

/// `Warming up chat template processing...` must not open the warmup phase.
fn false_start(key: &str, line: &str) -> bool {
    key == "warmup" && line.contains("Warming up chat template")
}

/// `NN%|███  | a/b` → (a, b). The percentage is recomputed by the renderer.
pub fn tqdm_counts(line: &str) -> Option<(u64, u64)> {
    let bar = line.find("%|")?;
    let after = &line[bar + 2..];
    let close = after.find('|')?;
    let rest = after[close + 1..].trim_start();
    let frac: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '/')
        .collect();
    let (a, b) = frac.split_once('/')?;
    let (a, b) = (a.parse().ok()?, b.parse().ok()?);
    (b > 0 && a <= b).then_some((a, b))
}

fn detail(key: &str, line: &str) -> Option<String> {
    match key {
        "engine" => {
            let v = line
                .split("vLLM server version ")
                .nth(1)
                .or_else(|| line.split("vLLM API server version ").nth(1))?;
            Some(format!("vLLM {}", v.split_whitespace().next()?))
        }
        "device" => {
            // "multidevice with 2 devices and grid ..." / "Fabric initialized on 4 devices"
            let n = line
                .split(" with ")
                .nth(1)
                .or_else(|| line.split("initialized on ").nth(1))?;
            let n: u64 = n.split_whitespace().next()?.parse().ok()?;
            Some(format!("{n} chips"))
        }
        "kv" => {
            let t = line.split("KV cache size:").nth(1)?;
            let digits: String = t.chars().filter(|c| c.is_ascii_digit()).collect();
            Some(format!("{} tokens", group_thousands(digits.parse().ok()?)))
        }
        "warmup" => {
            let t = line.split(" took ").nth(1)?;
            let n: f64 = t
                .split_whitespace()
                .next()?
                .trim_end_matches('s')
                .parse()
                .ok()?;
            Some(format!("{n:.0}s of warmup"))
        }
        _ => None,
    }
}

/// Removes ANSI CSI escapes (colour codes in server logs): the engine crate's one
/// implementation.
pub use tt_model_engine::build::strip_ansi;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tqdm_fragments_give_counts() {
        assert_eq!(
            tqdm_counts("Loading safetensors:  38%|███▊      | 12/32 [00:42<01:10]"),
            Some((12, 32))
        );
        assert_eq!(tqdm_counts("no bar here 3/4"), None);
        assert_eq!(tqdm_counts("100%|██████████| 5/5"), Some((5, 5)));
    }

    #[test]
    fn vllm_boot_walks_the_phases() {
        let log = [
            "INFO vLLM server version 0.24.0",
            "Opening user mode device driver",
            "\u{1b}[32mINFO\u{1b}[0m multidevice with 2 devices and grid (1, 2) is created",
            "Loading safetensors checkpoint shards:  25%|██▌       | 8/32",
            "Loading safetensors checkpoint shards:  100%|██████████| 32/32",
            "utils.prompt_client noise Error",
            "INFO KV cache size: 133120 tokens",
            "Warming up chat template processing...",
            "Warming up prefill",
            "init engine (profile, create kv cache, warmup model) took 42.3 seconds",
            "Starting vLLM API server on http://0.0.0.0:8000",
        ];
        let mut t = BootTracker::new("vllm-plugin");
        for l in log {
            t.feed(l);
        }
        let s: Vec<_> = t
            .rows
            .iter()
            .map(|r| (r.key, r.state.clone(), r.detail.clone()))
            .collect();
        assert_eq!(s[0], ("engine", RowState::Done, Some("vLLM 0.24.0".into())));
        assert_eq!(s[1], ("device", RowState::Done, Some("2 chips".into())));
        assert_eq!(t.rows[2].progress, Some((32, 32)));
        assert_eq!(s[3].2, Some("133,120 tokens".into()));
        assert_eq!(
            s[4],
            ("warmup", RowState::Done, Some("42s of warmup".into()))
        );
        assert_eq!(s[5].1, RowState::Active);
        assert!(
            t.causes.is_empty(),
            "ignored chatter is not a cause: {:?}",
            t.causes
        );
    }
}
