//! From BuildKit progress records to the classic driver's [`BuildEvent`]s.
//!
//! BuildKit reports a graph, not a list: each vertex (step) is sent whole every time its state
//! changes (queued, started, completed, cached), and output comes as chunks keyed by the
//! vertex digest, not aligned on lines, stdout and stderr apart. Callers of `build_image` see
//! the same events either way, so this keeps what spans records: which vertexes were already
//! announced, the partial line of each (vertex, stream), and the failure tail.

use std::collections::{HashMap, HashSet, VecDeque};

use super::status::StatusResponse;
use crate::build::{BuildEvent, FAILURE_TAIL_LINES, strip_ansi};

/// The step number and instruction of a Dockerfile vertex: `[stage-0 2/3] RUN …`,
/// `[builder 1/4] FROM …` or (newer engines, one unnamed stage) `[2/3] RUN …`. Internal
/// vertexes (`[internal] load build context`, `exporting to image`) are not steps.
pub fn step(name: &str) -> Option<BuildEvent> {
    let (label, instruction) = name.strip_prefix('[')?.split_once("] ")?;
    let counts = label.rsplit(' ').next()?;
    let (index, total) = counts.split_once('/')?;
    Some(BuildEvent::Step {
        index: index.parse().ok()?,
        total: total.parse().ok()?,
        instruction: instruction.to_string(),
    })
}

/// The state carried from one record to the next.
#[derive(Debug, Default)]
pub struct Progress {
    /// Vertexes whose `Step` was sent (a vertex is announced once it starts, not while queued,
    /// so its output follows it).
    announced: HashSet<String>,
    /// Vertexes whose `Cached` was sent.
    cached: HashSet<String>,
    /// The unfinished last line of each (vertex, stream).
    partial: HashMap<(String, u64), Vec<u8>>,
    /// The unfinished last line of plain `stream` items.
    partial_text: String,
    /// The last lines sent, for a failure report.
    tail: VecDeque<String>,
    /// The first vertex error seen: the failure when the engine sends no error item.
    failure: Option<String>,
}

impl Progress {
    /// Turns one decoded record into events.
    pub fn record(&mut self, record: StatusResponse, on_event: &mut impl FnMut(BuildEvent)) {
        let mut finished = Vec::new();
        for v in &record.vertexes {
            let active = v.started || v.completed || v.cached || !v.error.is_empty();
            if active
                && let Some(event) = step(&v.name)
                && self.announced.insert(v.digest.clone())
            {
                self.push_tail(v.name.clone());
                on_event(event);
            }
            if v.cached
                && self.announced.contains(&v.digest)
                && self.cached.insert(v.digest.clone())
            {
                on_event(BuildEvent::Cached);
            }
            if !v.error.is_empty() && self.failure.is_none() {
                self.failure = Some(v.error.clone());
            }
            if v.completed || !v.error.is_empty() {
                finished.push(v.digest.clone());
            }
        }
        for log in record.logs {
            let key = (log.vertex, log.stream);
            let buf = self.partial.entry(key.clone()).or_default();
            buf.extend_from_slice(&log.msg);
            let mut lines = Vec::new();
            while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                lines.push(buf.drain(..=pos).collect::<Vec<u8>>());
            }
            if buf.is_empty() {
                self.partial.remove(&key);
            }
            for line in lines {
                self.line(&line, on_event);
            }
        }
        for w in record.warnings {
            let text = format!("WARNING: {}", String::from_utf8_lossy(&w.short));
            self.line(text.as_bytes(), on_event);
        }
        // A finished vertex writes no more: its unterminated last line is complete.
        for digest in finished {
            for stream in [1, 2] {
                if let Some(rest) = self.partial.remove(&(digest.clone(), stream)) {
                    self.line(&rest, on_event);
                }
            }
        }
    }

    /// Plain text items (`Successfully tagged …`), split into lines like the classic output.
    pub fn text(&mut self, text: &str, on_event: &mut impl FnMut(BuildEvent)) {
        self.partial_text.push_str(text);
        while let Some(pos) = self.partial_text.find('\n') {
            let line: String = self.partial_text.drain(..=pos).collect();
            self.line(line.as_bytes(), on_event);
        }
    }

    /// The stream ended (or failed): every unterminated line is complete.
    pub fn finish(&mut self, on_event: &mut impl FnMut(BuildEvent)) {
        let mut rest: Vec<_> = self.partial.drain().collect();
        rest.sort();
        for (_, line) in rest {
            self.line(&line, on_event);
        }
        let text = std::mem::take(&mut self.partial_text);
        if !text.is_empty() {
            self.line(text.as_bytes(), on_event);
        }
    }

    /// The first step error the engine reported, if any.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// The last lines sent (step names and output), oldest first.
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }

    fn line(&mut self, raw: &[u8], on_event: &mut impl FnMut(BuildEvent)) {
        let line = strip_ansi(String::from_utf8_lossy(raw).trim_end_matches(['\r', '\n']));
        self.push_tail(line.clone());
        on_event(BuildEvent::Line(line));
    }

    fn push_tail(&mut self, line: String) {
        if self.tail.len() == FAILURE_TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }
}

#[cfg(test)]
mod tests {
    use super::super::status::encode::{log, vertex};
    use super::*;

    fn run(records: &[Vec<u8>]) -> (Vec<BuildEvent>, Progress) {
        let mut events = Vec::new();
        let mut progress = Progress::default();
        for r in records {
            let record = StatusResponse::decode(r).unwrap();
            progress.record(record, &mut |e| events.push(e));
        }
        progress.finish(&mut |e| events.push(e));
        (events, progress)
    }

    fn line(s: &str) -> BuildEvent {
        BuildEvent::Line(s.into())
    }

    #[test]
    fn step_names_per_stage_with_and_without_a_stage_name() {
        let step3 = |instruction: &str| BuildEvent::Step {
            index: 2,
            total: 3,
            instruction: instruction.into(),
        };
        assert_eq!(step("[stage-0 2/3] RUN make"), Some(step3("RUN make")));
        assert_eq!(step("[builder 2/3] COPY a /b"), Some(step3("COPY a /b")));
        assert_eq!(step("[2/3] RUN x=[1] y"), Some(step3("RUN x=[1] y")));
        assert_eq!(step("[internal] load build context"), None);
        assert_eq!(step("exporting to image"), None);
        assert_eq!(step("[stage-0 x/3] RUN make"), None);
    }

    #[test]
    fn a_log_line_split_across_two_records_is_one_line_after_its_step() {
        let run_step = "[stage-0 2/2] RUN sh -c 'echo x >> /c/f; wc -l < /c/f'";
        let (events, _) = run(&[
            // Queued: not announced yet.
            vertex("sha256:run", run_step, false, false, ""),
            vertex(
                "sha256:from",
                "[stage-0 1/2] FROM docker.io/local/busybox:tt-model",
                true,
                true,
                "",
            ),
            [
                vertex("sha256:run", run_step, true, false, ""),
                log("sha256:run", 1, b"fir"),
            ]
            .concat(),
            [
                log("sha256:run", 1, b"st\nsec"),
                log("sha256:run", 2, b"err\n"),
            ]
            .concat(),
            log("sha256:run", 1, b"ond\n"),
            vertex("sha256:run", run_step, true, false, ""), // sent again: no second Step
        ]);
        assert_eq!(
            events,
            vec![
                BuildEvent::Step {
                    index: 1,
                    total: 2,
                    instruction: "FROM docker.io/local/busybox:tt-model".into()
                },
                BuildEvent::Cached,
                BuildEvent::Step {
                    index: 2,
                    total: 2,
                    instruction: "RUN sh -c 'echo x >> /c/f; wc -l < /c/f'".into()
                },
                line("first"),
                line("err"),
                line("second"),
            ]
        );
    }

    #[test]
    fn a_failed_vertex_ends_its_last_line_and_is_the_failure_with_the_tail() {
        let name = "[2/2] RUN echo before; exit 3";
        let (events, progress) = run(&[
            [
                vertex("sha256:r", name, true, false, ""),
                log("sha256:r", 1, b"\x1b[31mbefore\x1b[0m\r\nno newline"),
            ]
            .concat(),
            vertex("sha256:r", name, true, false, "exit code: 3"),
        ]);
        assert_eq!(events[1..], [line("before"), line("no newline")]);
        assert_eq!(progress.failure(), Some("exit code: 3"));
        assert_eq!(progress.tail(), [name, "before", "no newline"]);
    }

    #[test]
    fn text_items_are_lines_and_the_tail_keeps_the_last_lines_only() {
        let mut events = Vec::new();
        let mut progress = Progress::default();
        let text: String = (0..FAILURE_TAIL_LINES + 5)
            .map(|i| format!("l{i}\n"))
            .collect();
        let (a, b) = text.split_at(7);
        progress.text(a, &mut |e| events.push(e));
        progress.text(b, &mut |e| events.push(e));
        progress.text("Successfully tagged t:1", &mut |e| events.push(e));
        progress.finish(&mut |e| events.push(e));
        assert_eq!(events.len(), FAILURE_TAIL_LINES + 6);
        assert_eq!(events[1], line("l1"));
        let tail = progress.tail();
        assert_eq!(tail.len(), FAILURE_TAIL_LINES);
        assert_eq!(tail[0], "l6");
        assert_eq!(tail.last().unwrap(), "Successfully tagged t:1");
    }
    /// Four records dockerd 20.10.24 sent for `RUN echo before-failure; echo to-stderr >&2;
    /// exit 3` (captured for issue 27): started, a stdout chunk, a stderr chunk, failed.
    const REAL_FAILURE: [&str; 4] = [
        concat!(
            "CtsBCkdzaGEyNTY6OWFiNjU2YWRhMzQwNjQxYzUwZmNiZDg1ZDQwZTUyMzRiY2VmYjMxYWI0OWVkYTgyZmFhZGZi",
            "YzUzNDk3MzMxNBJHc2hhMjU2OmJmNTIxOGE3MWExNDA1NWYxOGU5MGQ5OTMzMTQ2YmFkMjRjNzU3NGZhMDIwYzdj",
            "ZWJjMmZhOTdmZjIxMWI2MGYaOVsyLzJdIFJVTiBlY2hvIGJlZm9yZS1mYWlsdXJlOyBlY2hvIHRvLXN0ZGVyciA+",
            "JjI7IGV4aXQgMyoMCLrJxNgGEJ/RqZwB",
        ),
        concat!(
            "GmoKR3NoYTI1Njo5YWI2NTZhZGEzNDA2NDFjNTBmY2JkODVkNDBlNTIzNGJjZWZiMzFhYjQ5ZWRhODJmYWFkZmJj",
            "NTM0OTczMzE0EgwIusnE2AYQrKreoAIYASIPYmVmb3JlLWZhaWx1cmUK",
        ),
        concat!(
            "GmUKR3NoYTI1Njo5YWI2NTZhZGEzNDA2NDFjNTBmY2JkODVkNDBlNTIzNGJjZWZiMzFhYjQ5ZWRhODJmYWFkZmJj",
            "NTM0OTczMzE0EgwIusnE2AYQ16ztoAIYAiIKdG8tc3RkZXJyCg==",
        ),
        concat!(
            "Cs0CCkdzaGEyNTY6OWFiNjU2YWRhMzQwNjQxYzUwZmNiZDg1ZDQwZTUyMzRiY2VmYjMxYWI0OWVkYTgyZmFhZGZi",
            "YzUzNDk3MzMxNBJHc2hhMjU2OmJmNTIxOGE3MWExNDA1NWYxOGU5MGQ5OTMzMTQ2YmFkMjRjNzU3NGZhMDIwYzdj",
            "ZWJjMmZhOTdmZjIxMWI2MGYaOVsyLzJdIFJVTiBlY2hvIGJlZm9yZS1mYWlsdXJlOyBlY2hvIHRvLXN0ZGVyciA+",
            "JjI7IGV4aXQgMyoMCLrJxNgGEJ/RqZwBMgwIusnE2AYQiPf/qwI6YmV4ZWN1dG9yIGZhaWxlZCBydW5uaW5nIFsv",
            "YmluL3NoIC1jIGVjaG8gYmVmb3JlLWZhaWx1cmU7IGVjaG8gdG8tc3RkZXJyID4mMjsgZXhpdCAzXTogZXhpdCBj",
            "b2RlOiAz",
        ),
    ];

    #[test]
    fn records_from_the_real_engine_give_the_step_its_output_and_the_failure() {
        use base64::Engine as _;
        let records: Vec<Vec<u8>> = REAL_FAILURE
            .iter()
            .map(|r| base64::engine::general_purpose::STANDARD.decode(r).unwrap())
            .collect();
        let (events, progress) = run(&records);
        let run_step = "RUN echo before-failure; echo to-stderr >&2; exit 3";
        assert_eq!(
            events,
            [
                BuildEvent::Step {
                    index: 2,
                    total: 2,
                    instruction: run_step.into()
                },
                line("before-failure"),
                line("to-stderr"),
            ]
        );
        assert_eq!(
            progress.failure(),
            Some(
                "executor failed running [/bin/sh -c echo before-failure; echo to-stderr >&2; \
                 exit 3]: exit code: 3"
            )
        );
    }
}
