//! The serve progress contract of Tenstorrent's `tt` CLI (tt-cli's
//! `docs/serve-progress-contract.md`): with `TT_MODEL_PROGRESS=ndjson`, serve and pull write one
//! JSON object per line, `step`, `progress`, `container` and `error` events, which `tt serve`
//! turns into its own checklist. tt reads stdout and stderr as one stream and ignores every
//! line that is not an event, so the events go to stdout, one `write` per line (a line is never
//! split by a status line on stderr), and the human lines stay on stderr.
//!
//! The [`EventSink`] sits behind the [`crate::printer::Printer`]: the same calls that draw the
//! human checklist (`step_start`, `step_done`, a failure card) emit the events, so the two
//! cannot tell different stories.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// An `error` event whose cause is one short clause: tt words a failed serve `<id> could not
/// start: <cause>.`, adding its own period. A longer first line is cut at its first sentence
/// or clause break (`. `, `; `, ` (`) and kept whole at the head of `detail`, so nothing is lost.
fn error(
    text: &str,
    detail: Option<String>,
    evidence: Option<String>,
    actions: Vec<String>,
) -> Event {
    let line = text.lines().next().unwrap_or_default().trim();
    let cut = [". ", "; ", " ("]
        .iter()
        .filter_map(|b| line.find(b))
        .min()
        .unwrap_or(line.len());
    let cause = line[..cut]
        .trim_end_matches(['.', ':', ',', ' '])
        .to_string();
    let whole = text.trim().trim_end_matches(['.', ':', ',', ' ']);
    let detail = if cause == whole {
        detail
    } else {
        Some(match detail {
            Some(d) => format!("{}\n{d}", text.trim()),
            None => text.trim().to_string(),
        })
    };
    Event::Error {
        cause,
        detail,
        evidence,
        actions,
    }
}

/// The variable tt sets to ask for the events (`ndjson`); anything else leaves them off.
pub const PROGRESS_ENV: &str = "TT_MODEL_PROGRESS";
/// The variable tt sets so that our live view (spinners, bars) does not fight its pipe.
pub const NO_PIN_ENV: &str = "TT_MODEL_NO_PIN";

/// Why something failed and what to do about it (the original's "diagnosis card").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiagnosisCard {
    /// One line: what went wrong, in the user's terms.
    pub cause: String,
    /// The facts that show it (a log line, a path, a value).
    pub evidence: Vec<String>,
    /// What happens because of it, if not obvious.
    pub consequence: Option<String>,
    /// Concrete things to try, most likely first.
    pub actions: Vec<String>,
}

/// Where a step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepState {
    /// The step began.
    Start,
    /// The step settled well (a `done` without a `start` reads as "already true").
    Done,
    /// The step failed.
    Fail,
}

/// What a `progress` event counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Bytes (downloads, image loads).
    Bytes,
    /// Anything counted (files, layers).
    Count,
}

/// One event of the contract; serialized with the discriminator first (`{"event":"step",…}`)
/// and absent optional fields left out, as tt's reference stream has them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    /// A step starts or settles. The keys `host`, `weights`, `image` and `container` are
    /// shared with tt-inference-server: tt words those rows itself.
    Step {
        /// The step's key.
        key: String,
        /// Where it is.
        state: StepState,
        /// Its label (while it runs for `start`, once settled for `done`/`fail`).
        #[serde(skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// A short fact for the row (`12.1 MB · 3 files`).
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// Progress of the active step; tt ignores one whose total is not positive.
    Progress {
        /// The step it belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// Done so far.
        done: u64,
        /// The whole.
        total: u64,
        /// What is counted.
        unit: Unit,
    },
    /// The container tt follows from here on; the endpoint's port is the one it probes.
    Container {
        /// The container's name.
        id: String,
        /// Where it serves (`http://127.0.0.1:20000`).
        endpoint: String,
    },
    /// A diagnosis: tt's error message when the serve fails.
    Error {
        /// What went wrong, one line.
        cause: String,
        /// What it means, when there is more to say.
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        /// The facts that show it, one per line (tt reads a string).
        #[serde(skip_serializing_if = "Option::is_none")]
        evidence: Option<String>,
        /// What to try, most likely first.
        actions: Vec<String>,
    },
}

impl Event {
    /// A `step` event.
    pub fn step(key: &str, state: StepState, label: Option<&str>, detail: Option<&str>) -> Self {
        Event::Step {
            key: key.to_string(),
            state,
            label: label.filter(|l| !l.is_empty()).map(str::to_string),
            detail: detail.filter(|d| !d.is_empty()).map(str::to_string),
        }
    }

    /// The `error` event for a diagnosis card.
    pub fn from_card(card: &DiagnosisCard) -> Self {
        error(
            &card.cause,
            card.consequence.clone(),
            (!card.evidence.is_empty()).then(|| card.evidence.join("\n")),
            card.actions.clone(),
        )
    }

    /// The `error` event for an unexpected error: its message, its causes as the evidence.
    pub fn from_chain(err: &anyhow::Error) -> Self {
        let chain: Vec<String> = err.chain().skip(1).map(|c| c.to_string()).collect();
        error(
            &err.to_string(),
            None,
            (!chain.is_empty()).then(|| chain.join("\n")),
            Vec::new(),
        )
    }

    /// The `error` event for a one-message refusal: its first line is the cause, `→` lines are
    /// actions, the rest is detail.
    pub fn from_message(message: &str) -> Self {
        let mut lines = message.lines();
        let cause = lines.next().unwrap_or_default();
        let (mut actions, mut detail) = (Vec::new(), Vec::new());
        for line in lines.map(str::trim).filter(|l| !l.is_empty()) {
            match line.strip_prefix('→') {
                Some(action) => actions.push(action.trim().to_string()),
                None => detail.push(line.to_string()),
            }
        }
        error(
            cause,
            (!detail.is_empty()).then(|| detail.join("\n")),
            None,
            actions,
        )
    }

    /// The event as one NDJSON line (with its newline).
    pub fn to_line(&self) -> String {
        // Serializing these plain types cannot fail.
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }
}

/// Where the events go, and what the stream has said so far.
pub struct EventSink {
    out: Mutex<Box<dyn Write + Send>>,
    state: Mutex<StreamState>,
}

/// One row per key: tt draws a row per `start`, so a step that runs again after it settled
/// (serve checks the image a first-serve pull just loaded; a second weights repo) is muted
/// in the stream (its failure still is not).
#[derive(Default)]
struct StreamState {
    /// The open step (a failure closes it as `fail`).
    active: Option<String>,
    /// Steps that settled `done`.
    settled: std::collections::HashSet<String>,
    /// A re-run of a settled step, left out of the stream.
    muted: Option<String>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
}

/// Whether `TT_MODEL_PROGRESS` asks for the events (`ndjson`, any case).
pub fn requested(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("ndjson"))
}

/// Whether `TT_MODEL_NO_PIN` turns the live view off (set, and not empty, `0` or `false`).
pub fn no_pin(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim();
        !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
    })
}

impl EventSink {
    /// The sink this process's environment asks for: stdout under `TT_MODEL_PROGRESS=ndjson`.
    pub fn from_env() -> Option<Arc<EventSink>> {
        requested(std::env::var(PROGRESS_ENV).ok().as_deref())
            .then(|| EventSink::to_writer(Box::new(std::io::stdout())))
    }

    /// A sink writing to `out`.
    pub fn to_writer(out: Box<dyn Write + Send>) -> Arc<EventSink> {
        Arc::new(EventSink {
            out: Mutex::new(out),
            state: Mutex::new(StreamState::default()),
        })
    }

    /// Writes `event` as one line in one write, flushed (tt reads as we go).
    pub fn emit(&self, event: &Event) {
        let mut st = lock(&self.state);
        match event {
            Event::Step {
                key,
                state: StepState::Start,
                ..
            } => {
                let open = st.active.replace(key.clone());
                let muted = st.muted.take();
                // A step left open (a download that fell back to the container) settles
                // when the next one starts, as tt settles an open row itself.
                if let Some(open) = open.filter(|o| o != key && muted.as_ref() != Some(o)) {
                    self.write(&Event::step(&open, StepState::Done, None, None));
                    st.settled.insert(open);
                }
                if st.settled.contains(key) {
                    st.muted = Some(key.clone());
                    return;
                }
            }
            Event::Step { key, state, .. } => {
                if st.active.as_ref() == Some(key) {
                    st.active = None;
                }
                if st.muted.as_ref() == Some(key) {
                    st.muted = None;
                    if *state == StepState::Done {
                        return;
                    }
                }
                if *state == StepState::Done {
                    st.settled.insert(key.clone());
                }
            }
            Event::Progress { key: Some(k), .. } if st.muted.as_ref() == Some(k) => return,
            _ => {}
        }
        drop(st);
        self.write(event);
    }

    fn write(&self, event: &Event) {
        let mut out = lock(&self.out);
        let _ = out.write_all(event.to_line().as_bytes());
        let _ = out.flush();
    }

    /// Closes the open step as failed, if one is open.
    pub fn fail_active(&self) {
        let key = lock(&self.state).active.take();
        if let Some(key) = key {
            self.emit(&Event::step(&key, StepState::Fail, None, None));
        }
    }
}

/// A poisoned lock still holds a usable writer: a panic elsewhere must not silence the events.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Byte progress as `progress` events: at most one per percent (and the last), so a 50 GB
/// download is ~100 lines, not millions.
pub struct ProgressEvents {
    sink: Arc<EventSink>,
    key: String,
    state: Mutex<(u64, u64, Option<u64>)>,
}

impl ProgressEvents {
    /// Progress of step `key` into `sink`.
    pub fn new(sink: Arc<EventSink>, key: &str) -> Self {
        Self {
            sink,
            key: key.to_string(),
            state: Mutex::new((0, 0, None)),
        }
    }

    /// The whole is known (`total` bytes); reports the start.
    pub fn total(&self, total: u64) {
        let mut s = lock(&self.state);
        *s = (0, total, None);
        self.report(&mut s);
    }

    /// `n` more bytes arrived.
    pub fn add(&self, n: u64) {
        let mut s = lock(&self.state);
        s.0 = s.0.saturating_add(n);
        self.report(&mut s);
    }

    fn report(&self, s: &mut (u64, u64, Option<u64>)) {
        let (done, total, last) = *s;
        if total == 0 {
            return;
        }
        let pct = done.min(total) * 100 / total;
        if last == Some(pct) {
            return;
        }
        s.2 = Some(pct);
        self.sink.emit(&Event::Progress {
            key: Some(self.key.clone()),
            done: done.min(total),
            total,
            unit: Unit::Bytes,
        });
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    pub(crate) struct Captured(pub Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn lines_match_the_contracts_reference_stream() {
        let lines = [
            Event::step(
                "host",
                StepState::Done,
                None,
                Some("docker 28.1 · hugepages"),
            ),
            Event::step("weights", StepState::Start, None, None),
            Event::Progress {
                key: None,
                done: 3221225472,
                total: 16000000000,
                unit: Unit::Bytes,
            },
            Event::Container {
                id: "tt-model-qwen3-coder-30b-a3b-p300x2".into(),
                endpoint: "http://127.0.0.1:20000/v1".into(),
            },
        ]
        .map(|e| e.to_line());
        assert_eq!(
            lines.concat(),
            concat!(
                r#"{"event":"step","key":"host","state":"done","detail":"docker 28.1 · hugepages"}"#,
                "\n",
                r#"{"event":"step","key":"weights","state":"start"}"#,
                "\n",
                r#"{"event":"progress","done":3221225472,"total":16000000000,"unit":"bytes"}"#,
                "\n",
                r#"{"event":"container","id":"tt-model-qwen3-coder-30b-a3b-p300x2","endpoint":"http://127.0.0.1:20000/v1"}"#,
                "\n",
            )
        );
    }

    #[test]
    fn errors_carry_the_cards_fields_and_evidence_as_one_string() {
        let card = DiagnosisCard {
            cause: "the device is busy".into(),
            evidence: vec!["chip 0 held by tt-model-x".into(), "pid 42".into()],
            consequence: Some("nothing was started".into()),
            actions: vec!["tt-model stop org/x".into()],
        };
        assert_eq!(
            Event::from_card(&card).to_line(),
            "{\"event\":\"error\",\"cause\":\"the device is busy\",\"detail\":\"nothing was started\",\
             \"evidence\":\"chip 0 held by tt-model-x\\npid 42\",\"actions\":[\"tt-model stop org/x\"]}\n"
        );
        let refusal = Event::from_message(
            "image acme/x:1 is missing.\n  it was never loaded\n  → tt-model pull acme/x",
        );
        assert_eq!(
            refusal,
            Event::Error {
                cause: "image acme/x:1 is missing".into(),
                detail: Some("it was never loaded".into()),
                evidence: None,
                actions: vec!["tt-model pull acme/x".into()],
            }
        );
    }

    #[test]
    fn the_cause_is_one_clause_without_a_period_and_the_rest_is_detail() {
        // tt writes `<id> could not start: <cause>.` and shows `detail` as the reason.
        let long = "the Hub: acme/nope@main was not found on http://127.0.0.1:9 (401): no such repo; check the id.";
        let card = DiagnosisCard {
            cause: long.into(),
            evidence: vec![],
            consequence: Some("nothing was installed".into()),
            actions: vec![],
        };
        let Event::Error { cause, detail, .. } = Event::from_card(&card) else {
            unreachable!()
        };
        assert_eq!(
            cause,
            "the Hub: acme/nope@main was not found on http://127.0.0.1:9"
        );
        assert_eq!(detail.unwrap(), format!("{long}\nnothing was installed"));
        for text in [
            "the device is busy.",
            "chips 3 are held. Stop them first; or wait",
        ] {
            let Event::Error { cause, .. } = Event::from_message(text) else {
                unreachable!()
            };
            assert!(!cause.ends_with('.') && !cause.contains(". "), "{cause}");
        }
        let chain = anyhow::anyhow!("no such file").context("cannot read x.json (line 1)");
        let Event::Error {
            cause,
            detail,
            evidence,
            ..
        } = Event::from_chain(&chain)
        else {
            unreachable!()
        };
        assert_eq!(
            (cause.as_str(), detail.as_deref(), evidence.as_deref()),
            (
                "cannot read x.json",
                Some("cannot read x.json (line 1)"),
                Some("no such file")
            )
        );
    }

    #[test]
    fn a_failure_closes_the_open_step_and_progress_is_one_line_per_percent() {
        let out = Captured::default();
        let sink = EventSink::to_writer(Box::new(out.clone()));
        sink.emit(&Event::step(
            "weights",
            StepState::Start,
            Some("weights a/b"),
            None,
        ));
        let p = ProgressEvents::new(sink.clone(), "weights");
        p.total(1000);
        for _ in 0..100 {
            p.add(10);
        }
        sink.fail_active();
        sink.fail_active();
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        // start, 0 %, 1 % … 100 %, one fail
        assert_eq!(lines.len(), 1 + 101 + 1, "{text}");
        assert_eq!(
            lines[lines.len() - 2],
            r#"{"event":"progress","key":"weights","done":1000,"total":1000,"unit":"bytes"}"#
        );
        assert_eq!(
            lines[lines.len() - 1],
            r#"{"event":"step","key":"weights","state":"fail"}"#
        );
        for l in lines {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v["event"].is_string());
        }
    }

    #[test]
    fn a_settled_step_that_runs_again_is_one_row() {
        let out = Captured::default();
        let sink = EventSink::to_writer(Box::new(out.clone()));
        let step = |k: &str, s| sink.emit(&Event::step(k, s, None, None));
        // A first serve: pull loads the image, serve checks it again, then a second
        // weights repo, then the container step fails.
        step("image", StepState::Start);
        step("image", StepState::Done);
        step("image", StepState::Start);
        step("image", StepState::Done);
        step("weights", StepState::Start);
        step("weights", StepState::Done);
        step("weights", StepState::Start);
        ProgressEvents::new(sink.clone(), "weights").total(10);
        step("weights", StepState::Done);
        step("container", StepState::Start);
        sink.fail_active();
        let states: Vec<String> = out
            .text()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!(
                    "{} {}",
                    v["key"].as_str().unwrap(),
                    v["state"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            states,
            [
                "image start",
                "image done",
                "weights start",
                "weights done",
                "container start",
                "container fail"
            ]
        );
    }

    #[test]
    fn the_variables_read_as_tt_sets_them() {
        assert!(requested(Some("ndjson")) && requested(Some("NDJSON")));
        assert!(!requested(Some("")) && !requested(Some("json")) && !requested(None));
        assert!(no_pin(Some("1")) && no_pin(Some("yes")));
        assert!(!no_pin(Some("0")) && !no_pin(Some("")) && !no_pin(None));
    }
}
