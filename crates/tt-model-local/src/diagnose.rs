//! The diagnosis card for a boot that did not become ready: a pure classifier over the log
//! evidence, tested on captured log texts.

use std::time::Duration;

/// What the boot left behind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Evidence {
    /// The last lines of the log.
    pub tail: Vec<String>,
    /// Lines that matched [`crate::bootlog::CAUSE_MARKERS`].
    pub causes: Vec<String>,
    /// The container exited (else: still running when the wait ended).
    pub exited: bool,
    /// The container's exit status, when it exited and the engine reported one.
    pub exit_code: Option<i64>,
}

/// Why the boot failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Still running when the wait for readiness ended.
    Timeout,
    /// The server refused a command-line flag (usually a passthrough argument).
    FlagRejected,
    /// The Tenstorrent device was held by another process.
    DeviceHeld,
    /// The server's port was already in use.
    PortTaken,
    /// The server lost its device (the gr00t server's ttnn worker died or missed its
    /// deadline) and says so in the log.
    DeviceLost,
    /// Exited for another reason (or none recognised) before becoming ready.
    ExitedBeforeReady,
}

/// A rendered-ready diagnosis: title, evidence line, consequence, actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// The classified cause, for callers that branch on it.
    pub cause: Cause,
    /// One line saying what happened.
    pub title: String,
    /// The log line that shows it (prefixes stripped); `None` when the log had nothing useful.
    pub evidence: Option<String>,
    /// Lines quoted under the evidence line (a lost device's worker's last output); often empty.
    pub evidence_lines: Vec<String>,
    /// What it means, in a sentence or two.
    pub detail: String,
    /// Commands to try next, one per entry.
    pub actions: Vec<String>,
}

impl Card {
    /// Plain text (no colour), for pipes and error messages.
    pub fn summarize(&self) -> String {
        let mut s = format!("✗ {}\n", self.title);
        if let Some(e) = &self.evidence {
            s.push_str(&format!("  evidence: {e}\n"));
        }
        for l in &self.evidence_lines {
            s.push_str(&format!("    | {l}\n"));
        }
        s.push_str(&format!("  {}\n", self.detail));
        if !self.actions.is_empty() {
            s.push_str("  Try:\n");
            for a in &self.actions {
                s.push_str(&format!("    → {a}\n"));
            }
        }
        s
    }
}

const DEVICE_HELD: &[&str] = &[
    "CHIP_IN_USE",
    "stale process holding",
    "Sysmem mapped at unexpected NOC address",
    "another PID holds the device lock",
    "Failed to allocate the TLB",
];
const FLAG_REJECTED: &[&str] = &[
    "unrecognized arguments",
    "error: argument",
    "no such option",
    "unexpected argument",
];
const PORT_TAKEN: &[&str] = &[
    "Address already in use",
    "address already in use",
    "Address in use",
];

/// What the gr00t server logs when its device is lost (`supervise.rs`: "device <name> lost;
/// reopening it …", then the worker's last output) or when a reopen fails.
const DEVICE_LOST: &[&str] = &["lost; reopening it", "reopening the device failed"];
/// Worker lines quoted under a lost device's evidence line, at most.
const WORKER_LINES: usize = 8;

/// The last device-loss line of the tail (else of the causes; a loss before a failed reopen,
/// which quotes the worker, before the reopen failure), and the worker's lines the server
/// printed after it (up to the next log record).
fn device_lost(ev: &Evidence) -> Option<(String, Vec<String>)> {
    let from_message = |l: &str| -> String {
        let l = strip_prefixes(l);
        // tracing's `<time> ERROR <target>: message` record: keep the message.
        match l.find("reopening the device").or_else(|| l.find("device ")) {
            Some(i) => l[i..].to_string(),
            None => l,
        }
    };
    for pat in DEVICE_LOST {
        if let Some(i) = ev.tail.iter().rposition(|l| l.contains(pat)) {
            let worker = ev.tail[i + 1..]
                .iter()
                .take_while(|l| !is_log_record(l))
                .filter(|l| !l.trim().is_empty())
                .take(WORKER_LINES)
                .map(|l| crate::bootlog::strip_ansi(l).trim_end().to_string())
                .collect();
            return Some((from_message(&ev.tail[i]), worker));
        }
    }
    DEVICE_LOST.iter().find_map(|pat| {
        ev.causes
            .iter()
            .rev()
            .find(|l| l.contains(pat))
            .map(|l| (from_message(l), Vec::new()))
    })
}

/// A new record of the server's own log (`2026-12-02T23:00:00.123Z ERROR …`), not a quoted line.
fn is_log_record(l: &str) -> bool {
    let l = crate::bootlog::strip_ansi(l);
    let b = l.trim_start().as_bytes();
    b.len() > 11 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[10] == b'T'
}

/// Classify. `target` is what the user served; `passthrough` the extra args they gave.
pub fn diagnose(
    ev: &Evidence,
    target: &str,
    passthrough: &[String],
    port: u16,
    timeout: Duration,
) -> Card {
    let all: Vec<&String> = ev.causes.iter().chain(ev.tail.iter()).collect();
    let find = |pats: &[&str]| {
        all.iter()
            .find(|l| pats.iter().any(|p| l.contains(p)))
            .map(|l| strip_prefixes(l))
    };
    if let Some((line, worker)) = device_lost(ev) {
        let name = line
            .strip_prefix("device ")
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("")
            .trim_end_matches(';');
        let name = if name.is_empty() {
            "the device".to_string()
        } else {
            format!("device {name}")
        };
        return Card {
            cause: Cause::DeviceLost,
            evidence_lines: worker,
            title: if ev.exited {
                format!("the container exited — {name} was lost")
            } else {
                format!("{name} was lost — the server is reopening it")
            },
            evidence: Some(line),
            detail: "The worker that drives the card died or did not answer within its deadline \
                     (GR00T_MK_DEVICE_TIMEOUT_S); the server killed it and reopens the device, \
                     answering 503 with Retry-After meanwhile. The worker's last lines are above."
                .into(),
            actions: vec![
                format!("watch it recover: tt-model logs {target} -f"),
                "check the card: tt-smi".into(),
                format!("if it keeps failing, stop it: tt-model stop {target}"),
                "then reset the chips: tt-smi -r".into(),
                format!("and serve it again: tt-model serve {target}"),
            ],
        };
    }
    if !ev.exited {
        return Card {
            cause: Cause::Timeout,
            evidence_lines: Vec::new(),
            title: format!("the server did not report ready within {}", human(timeout)),
            evidence: ev
                .tail
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| strip_prefixes(l)),
            detail:
                "The container is still running; a first boot that compiles kernels can take long."
                    .into(),
            actions: vec![
                format!("keep watching: tt-model logs {target} -f"),
                format!("give up: tt-model stop {target}"),
                format!("wait longer next time: tt-model serve --timeout 2h {target}"),
            ],
        };
    }
    if let Some(line) = find(FLAG_REJECTED) {
        let flag = rejected_flag(&line, passthrough);
        return Card {
            cause: Cause::FlagRejected,
            evidence_lines: Vec::new(),
            title: "the container exited — the engine rejected a flag".into(),
            detail: match &flag {
                Some(f) => format!(
                    "`{f}` was passed through to the server, which does not accept it. tt-model's own flags go BEFORE the target."
                ),
                None => {
                    "An argument passed to the server was refused. tt-model's own flags go BEFORE the target.".into()
                }
            },
            evidence: Some(line),
            actions: vec![
                format!("check the server's flags: tt-model logs {target}"),
                format!("put tt-model flags first: tt-model serve --port N {target} [server args…]"),
            ],
        };
    }
    if let Some(line) = find(DEVICE_HELD) {
        return Card {
            cause: Cause::DeviceHeld,
            evidence_lines: Vec::new(),
            title: "the container exited — another process is holding the Tenstorrent device".into(),
            evidence: Some(line),
            detail:
                "The chip is open in another container or host process (the UMD lock is shared through --ipc host)."
                    .into(),
            actions: vec![
                "see who holds it: docker ps   (and /proc/driver/tenstorrent/*/pids)".into(),
                "see which models run: tt-model ps".into(),
                "stop one of them: tt-model stop <target>".into(),
                "if nothing holds it, reset the chips: tt-smi -r".into(),
            ],
        };
    }
    if let Some(line) = find(PORT_TAKEN) {
        return Card {
            cause: Cause::PortTaken,
            evidence_lines: Vec::new(),
            title: format!("the container exited — port {port} is already taken"),
            evidence: Some(line),
            detail: "Another process listens on the port the server wanted.".into(),
            actions: vec![
                format!("find it: lsof -i :{port}"),
                format!("serve elsewhere: tt-model serve --port N {target}"),
            ],
        };
    }
    let last = ev
        .causes
        .iter()
        .rev()
        .chain(ev.tail.iter().rev())
        .find(|l| looks_like_error(l))
        .or_else(|| ev.tail.iter().rev().find(|l| !l.trim().is_empty()))
        .map(|l| strip_prefixes(l));
    Card {
        cause: Cause::ExitedBeforeReady,
        evidence_lines: Vec::new(),
        title: "the container exited before the server was ready".into(),
        evidence: last,
        detail: match ev.exit_code {
            Some(c) => format!("The server process ended with exit code {c}."),
            None => "The server process ended.".into(),
        },
        actions: vec![
            format!("read the whole log: tt-model logs {target}"),
            format!("retry: tt-model serve {target}"),
        ],
    }
}

fn looks_like_error(l: &str) -> bool {
    [
        "Error",
        "error",
        "FATAL",
        "Traceback",
        "panicked",
        "failed",
        "Failed",
        "exception",
        "Exception",
    ]
    .iter()
    .any(|p| l.contains(p))
        && !l.contains("Traceback (most recent call last)")
}

/// The passthrough flag named in a rejection line, if any.
fn rejected_flag(line: &str, passthrough: &[String]) -> Option<String> {
    passthrough
        .iter()
        .filter(|a| a.starts_with('-'))
        .map(|a| a.split('=').next().unwrap_or(a).to_string())
        .find(|f| line.contains(f.as_str()))
        .or_else(|| {
            line.split_whitespace()
                .find(|w| w.starts_with("--"))
                .map(|w| {
                    w.trim_matches(|c: char| c == '\'' || c == '"' || c == ',')
                        .to_string()
                })
        })
}

/// Drop log prefixes (timestamps, levels, `(EngineCore pid=…)`) so the quoted line is the message.
pub fn strip_prefixes(line: &str) -> String {
    let mut s = crate::bootlog::strip_ansi(line).trim().to_string();
    loop {
        let before = s.clone();
        if let Some(rest) = s.strip_prefix('(').and_then(|r| r.split_once(") ")) {
            s = rest.1.trim_start().to_string();
        }
        for lvl in ["ERROR", "WARNING", "INFO", "DEBUG", "CRITICAL", "FATAL"] {
            if let Some(r) = s.strip_prefix(lvl) {
                s = r.trim_start_matches([' ', ':', '|']).to_string();
            }
        }
        // `2026-11-30 12:00:01.123 | ` or `12-01 10:00:00 ` timestamps.
        let ts: String = s
            .chars()
            .take_while(|c| c.is_ascii_digit() || "-:. T,|".contains(*c))
            .collect();
        if ts.chars().filter(|c| c.is_ascii_digit()).count() >= 4 && ts.len() < s.len() {
            s = s[ts.len()..].trim_start().to_string();
        }
        if s == before {
            return s;
        }
    }
}

fn human(d: Duration) -> String {
    let m = d.as_secs() / 60;
    if m >= 60 && m.is_multiple_of(60) {
        format!("{} h", m / 60)
    } else if m > 0 {
        format!("{m} min")
    } else {
        format!("{} s", d.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(log: &str, exited: bool) -> Evidence {
        let mut t = crate::bootlog::BootTracker::new("vllm-plugin");
        for l in log.lines() {
            t.feed(l);
        }
        Evidence {
            tail: t.tail.into(),
            causes: t.causes,
            exited,
            exit_code: exited.then_some(1),
        }
    }

    const T: Duration = Duration::from_secs(1800);

    #[test]
    fn rejected_flag_is_named() {
        let log = "INFO vLLM server version 0.24.0\nusage: vllm serve [-h] ...\nvllm serve: error: unrecognized arguments: --max-tokenz 5\n";
        let c = diagnose(
            &ev(log, true),
            "acme/m",
            &["--max-tokenz".into(), "5".into()],
            20000,
            T,
        );
        assert_eq!(c.cause, Cause::FlagRejected);
        assert!(c.detail.contains("`--max-tokenz`"), "{}", c.detail);
        assert_eq!(
            c.evidence.as_deref(),
            Some("vllm serve: error: unrecognized arguments: --max-tokenz 5")
        );
    }

    #[test]
    fn held_device_wins_over_generic_errors() {
        let log = "2026-11-30 10:00:01.000 | INFO | Opening user mode device driver\n\
                   2026-11-30 10:00:02.000 | ERROR | Device 0: CHIP_IN_USE held by pid 4242\n\
                   RuntimeError: failed to open device\n";
        let c = diagnose(&ev(log, true), "acme/m", &[], 20000, T);
        assert_eq!(c.cause, Cause::DeviceHeld);
        assert_eq!(
            c.evidence.as_deref(),
            Some("Device 0: CHIP_IN_USE held by pid 4242")
        );
    }

    #[test]
    fn port_clash() {
        let log = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 20000): address already in use\n";
        let c = diagnose(&ev(log, true), "acme/m", &[], 20000, T);
        assert_eq!(c.cause, Cause::PortTaken);
        assert!(c.title.contains("port 20000"));
        assert!(c.actions.iter().any(|a| a.contains("lsof -i :20000")));
    }

    #[test]
    fn generic_exit_quotes_the_last_error_line_without_prefixes() {
        let log = "(EngineCore_0 pid=77) INFO loading\nTraceback (most recent call last):\n  File \"x.py\", line 3\n(EngineCore_0 pid=77) ERROR ValueError: bad config\nshutting down\n";
        let c = diagnose(&ev(log, true), "acme/m", &[], 20000, T);
        assert_eq!(c.cause, Cause::ExitedBeforeReady);
        assert_eq!(c.evidence.as_deref(), Some("ValueError: bad config"));
        assert!(c.detail.contains("exit code 1"));
    }

    /// What the gr00t server printed when its worker hung (captured shape of `supervise.rs`'s
    /// record followed by the worker's stderr tail).
    const LOST: &str = "2026-12-02T22:40:01.101Z  INFO gr00t_server: ready on 0.0.0.0:8000\n\
        2026-12-02T22:41:07.532Z ERROR gr00t_server::supervise: device p150a lost; reopening it (requests get 503 meanwhile): the ttnn worker gave no answer to `run` within 30 s (GR00T_MK_DEVICE_TIMEOUT_S); it was killed; its last output:\n\
        worker: uploaded arena (1149763584 B) to DRAM\n\
        worker: op run step 3\n\
        \n\
        2026-12-02T22:41:09.002Z ERROR gr00t_server::supervise: reopening the device failed (next try in 1.0 s): the ttnn worker exited (status 1)\n";

    #[test]
    fn lost_device_quotes_the_loss_and_the_workers_last_lines() {
        let c = diagnose(&ev(LOST, false), "nvidia/gr00t", &[], 8000, T);
        assert_eq!(c.cause, Cause::DeviceLost);
        assert_eq!(
            c.title,
            "device p150a was lost — the server is reopening it"
        );
        assert_eq!(
            c.evidence.as_deref(),
            Some(
                "device p150a lost; reopening it (requests get 503 meanwhile): the ttnn worker gave no answer to `run` within 30 s (GR00T_MK_DEVICE_TIMEOUT_S); it was killed; its last output:"
            )
        );
        assert_eq!(
            c.evidence_lines,
            vec![
                "worker: uploaded arena (1149763584 B) to DRAM",
                "worker: op run step 3"
            ]
        );
        let text = c.summarize();
        assert!(text.contains("    | worker: op run step 3\n"), "{text}");
        assert!(
            text.contains("→ watch it recover: tt-model logs nvidia/gr00t -f"),
            "{text}"
        );

        // The same log from a container that then exited.
        let c = diagnose(&ev(LOST, true), "nvidia/gr00t", &[], 8000, T);
        assert_eq!(
            (c.cause, c.title.as_str()),
            (
                Cause::DeviceLost,
                "the container exited — device p150a was lost"
            )
        );
        // Only a failed reopen in the log: still a lost device, quoted from that line.
        let only_reopen = LOST.lines().last().unwrap();
        let c = diagnose(&ev(only_reopen, true), "nvidia/gr00t", &[], 8000, T);
        assert_eq!(c.cause, Cause::DeviceLost);
        assert_eq!(
            c.evidence.as_deref(),
            Some(
                "reopening the device failed (next try in 1.0 s): the ttnn worker exited (status 1)"
            )
        );
        assert!(c.evidence_lines.is_empty());
    }

    #[test]
    fn still_running_is_a_timeout() {
        let c = diagnose(&ev("Warming up prefill\n", false), "acme/m", &[], 20000, T);
        assert_eq!(c.cause, Cause::Timeout);
        assert_eq!(c.title, "the server did not report ready within 30 min");
        assert!(
            c.summarize()
                .contains("→ keep watching: tt-model logs acme/m -f")
        );
    }
}
