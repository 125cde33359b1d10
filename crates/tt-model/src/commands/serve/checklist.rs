//! The boot checklist on the terminal: finished phases print once (`✓ label  detail  time`),
//! the active one is a live spinner row with real progress; a piped run prints each finished
//! row once, without escapes. `-v` also streams the container's log lines. Each phase is also
//! a step of the progress stream (its key is the boot phase's), through the same printer calls.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use tt_model_local::bootlog::{self, BootEvent};
use tt_model_local::watch::WaitEvent;

use crate::printer::Printer;

pub struct Checklist<'p> {
    printer: &'p Printer,
    spinner: ProgressBar,
    labels: HashMap<&'static str, &'static str>,
    details: HashMap<&'static str, String>,
    started: HashMap<&'static str, Instant>,
    progress: Option<(u64, u64)>,
    active: Option<&'static str>,
    /// Whether readiness also waits on a health endpoint after the ready line (the original's
    /// kinds without a declared `health_path` are ready by the line alone).
    probes_health: bool,
}

/// `▕████░░░░▏ 12/32 · 38%`, percentage recomputed from the counts.
pub fn progress_bar(done: u64, total: u64) -> String {
    if total == 0 {
        return String::new();
    }
    let width = 8u64;
    let filled = (done * width / total).min(width);
    format!(
        "▕{}{}▏ {done}/{total} · {}%",
        "█".repeat(filled as usize),
        "░".repeat((width - filled) as usize),
        done * 100 / total
    )
}

fn elapsed(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m {:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// A boot phase's key in the progress stream: `boot-<phase>`, apart from the host steps (the
/// boot's `weights` is loading them, not serve's download).
fn stream_key(phase: &str) -> String {
    format!("boot-{phase}")
}

impl<'p> Checklist<'p> {
    pub fn new(printer: &'p Printer, kind: &str, probes_health: bool) -> Self {
        let spinner = crate::progress::spinner("{spinner} {msg}  {elapsed}");
        Checklist {
            printer,
            spinner,
            labels: bootlog::phases_for(kind)
                .iter()
                .map(|d| (d.key, d.label))
                .collect(),
            details: HashMap::new(),
            started: HashMap::new(),
            progress: None,
            active: None,
            probes_health,
        }
    }

    fn redraw(&self) {
        let Some(k) = self.active else {
            self.spinner.set_message("waiting for the server");
            return;
        };
        let mut m = self.labels.get(k).copied().unwrap_or(k).to_string();
        if let Some((d, t)) = self.progress {
            m.push_str("  ");
            m.push_str(&progress_bar(d, t));
        }
        if let Some(d) = self.details.get(k) {
            m.push_str("  ");
            m.push_str(d);
        }
        self.spinner.set_message(m);
    }

    fn println(&self, line: String) {
        self.spinner
            .suspend(|| self.printer.err_raw(&format!("{line}\n")));
    }

    pub fn on_event(&mut self, e: &WaitEvent) {
        match e {
            WaitEvent::Boot(BootEvent::Started(k)) => {
                let label = self.labels.get(k).copied().unwrap_or(k);
                self.spinner
                    .suspend(|| self.printer.step_start(&stream_key(k), label));
                self.active = Some(k);
                self.progress = None;
                self.started.insert(k, Instant::now());
            }
            WaitEvent::Boot(BootEvent::Finished(k)) => {
                let label = self.labels.get(k).copied().unwrap_or(k);
                let mut detail = self.details.get(k).cloned().unwrap_or_default();
                if let Some(t) = self
                    .started
                    .get(k)
                    .map(Instant::elapsed)
                    .filter(|t| t.as_millis() >= 800)
                {
                    detail = format!("{detail}  {}", elapsed(t)).trim().to_string();
                }
                self.spinner
                    .suspend(|| self.printer.step_done(&stream_key(k), label, Some(&detail)));
                if self.active == Some(*k) {
                    self.active = None;
                }
            }
            WaitEvent::Boot(BootEvent::Progress { done, total, .. }) => {
                if let Some(k) = self.active {
                    self.printer.step_progress(
                        &stream_key(k),
                        *done,
                        *total,
                        crate::events::Unit::Count,
                    );
                }
                self.progress = Some((*done, *total))
            }
            WaitEvent::Boot(BootEvent::Detail { key, detail }) => {
                self.details.insert(key, detail.clone());
            }
            WaitEvent::Line(l) => {
                if self.printer.verbose() {
                    self.println(format!("  │ {}", l.text));
                }
            }
            WaitEvent::LogReady => {
                if self.printer.verbose() {
                    let note = if self.probes_health {
                        "ready line seen; probing the health endpoint"
                    } else {
                        "ready line seen"
                    };
                    self.spinner.suspend(|| self.printer.note(note));
                }
            }
            WaitEvent::HttpReady => {}
        }
        self.redraw();
    }

    pub fn clear(&self) {
        self.spinner.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bar_is_recomputed_from_counts() {
        assert_eq!(super::progress_bar(12, 32), "▕███░░░░░▏ 12/32 · 37%");
        assert_eq!(super::progress_bar(1, 0), "");
    }
}
