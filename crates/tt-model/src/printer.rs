//! Every line the user sees goes through the [`Printer`], so the output conventions live in one
//! place:
//!
//! * `✓` done, `○` skipped / nothing to do, `✗` failed (followed by a [`DiagnosisCard`]),
//!   `!` actionable warning, `•` note, `→` next step;
//! * status lines go to stderr, machine-readable output ([`Printer::out`]) to stdout;
//! * no ANSI escapes when the stream is not a terminal, when `NO_COLOR` is set (to anything
//!   non-empty) or with `--no-color`.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use crate::events::{DiagnosisCard, Event, EventSink, StepState};

/// ANSI styles the printer uses.
#[derive(Debug, Clone, Copy)]
enum Style {
    Green,
    Red,
    Yellow,
    Cyan,
    Dim,
    Bold,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Green => "\x1b[32m",
            Style::Red => "\x1b[31m",
            Style::Yellow => "\x1b[33m",
            Style::Cyan => "\x1b[36m",
            Style::Dim => "\x1b[2m",
            Style::Bold => "\x1b[1m",
        }
    }
}

/// Writes status lines (stderr) and results (stdout) with the glyph conventions, and, when
/// tt asks for them, the progress events of the same steps ([`crate::events`]).
#[derive(Debug, Clone)]
pub struct Printer {
    verbose: bool,
    color_out: bool,
    color_err: bool,
    events: Option<Arc<EventSink>>,
}

impl Printer {
    /// A printer for this process: colour only on terminals, never with `NO_COLOR` or
    /// `--no-color`.
    pub fn new(verbose: bool, no_color: bool) -> Self {
        let env_off = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let allowed = !no_color && !env_off;
        Self {
            verbose,
            color_out: allowed && std::io::stdout().is_terminal(),
            color_err: allowed && std::io::stderr().is_terminal(),
            events: EventSink::from_env(),
        }
    }

    /// A printer that never colours (tests, pipes).
    pub fn plain(verbose: bool) -> Self {
        Self {
            verbose,
            color_out: false,
            color_err: false,
            events: None,
        }
    }

    /// This printer, also writing progress events to `sink`.
    pub fn with_events(mut self, sink: Arc<EventSink>) -> Self {
        self.events = Some(sink);
        self
    }

    /// This printer without progress events.
    pub fn without_events(mut self) -> Self {
        self.events = None;
        self
    }

    /// The progress events' sink, when tt asked for them.
    pub fn events(&self) -> Option<&Arc<EventSink>> {
        self.events.as_ref()
    }

    fn emit(&self, event: &Event) {
        if let Some(sink) = &self.events {
            sink.emit(event);
        }
    }

    /// A step of the checklist (`key`: `host`, `image`, `weights`, `container`, …) starts:
    /// a `start` event; under `-v` also `label…` (the original's verbose step line).
    pub fn step_start(&self, key: &str, label: &str) {
        self.emit(&Event::step(key, StepState::Start, Some(label), None));
        if self.verbose {
            self.err_line(&format!("{label}…"));
        }
    }

    /// `✓ message  detail`, and the step's `done` event.
    pub fn step_done(&self, key: &str, message: &str, detail: Option<&str>) {
        self.emit(&Event::step(key, StepState::Done, Some(message), detail));
        self.done(message, detail);
    }

    /// Settles step `key` in the stream only, when its human line was already printed (by a
    /// library, in its own words).
    pub fn step_end(&self, key: &str, detail: Option<&str>) {
        self.emit(&Event::step(key, StepState::Done, None, detail));
    }

    /// `○ message  detail`: the step had nothing to do; a `done` event (tt has no skipped).
    pub fn step_skipped(&self, key: &str, message: &str, detail: Option<&str>) {
        self.emit(&Event::step(key, StepState::Done, Some(message), detail));
        self.skipped(message, detail);
    }

    /// The step's progress, as an event only (the terminal has its own bars).
    pub fn step_progress(&self, key: &str, done: u64, total: u64, unit: crate::events::Unit) {
        self.emit(&Event::Progress {
            key: Some(key.to_string()),
            done,
            total,
            unit,
        });
    }

    /// The container serve started and where it will answer: the event tt follows.
    pub fn container_event(&self, id: &str, endpoint: &str) {
        self.emit(&Event::Container {
            id: id.to_string(),
            endpoint: endpoint.to_string(),
        });
    }

    /// A failure: the open step fails and the diagnosis becomes the `error` event.
    fn emit_failure(&self, event: Event) {
        if let Some(sink) = &self.events {
            sink.fail_active();
            sink.emit(&event);
        }
    }

    /// Whether `-v` was given.
    pub fn verbose(&self) -> bool {
        self.verbose
    }

    /// Whether stdout output may carry ANSI colour.
    pub fn color_stdout(&self) -> bool {
        self.color_out
    }

    /// Whether stderr output may carry ANSI colour.
    pub fn color_stderr(&self) -> bool {
        self.color_err
    }

    fn paint(&self, on: bool, style: Style, text: &str) -> String {
        if on {
            format!("{}{text}\x1b[0m", style.code())
        } else {
            text.to_owned()
        }
    }

    fn err_line(&self, line: &str) {
        // One write per line: stderr is unbuffered, and tt reads it merged with the events on
        // stdout, so a line written in pieces could be split by an event.
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(format!("{line}\n").as_bytes());
    }

    fn glyph_line(&self, glyph: &str, style: Style, message: &str, detail: Option<&str>) {
        let mut line = format!("{} {message}", self.paint(self.color_err, style, glyph));
        if let Some(detail) = detail.filter(|d| !d.is_empty()) {
            line.push_str("  ");
            line.push_str(&self.paint(self.color_err, Style::Dim, detail));
        }
        self.err_line(&line);
    }

    /// `✓ message  detail`: a step finished.
    pub fn done(&self, message: &str, detail: Option<&str>) {
        self.glyph_line("✓", Style::Green, message, detail);
    }

    /// `○ message  detail`: a benign skip or no-op.
    pub fn skipped(&self, message: &str, detail: Option<&str>) {
        self.glyph_line("○", Style::Dim, message, detail);
    }

    /// A library use case's report, drawn as its kind says (`✓`, `○`, `•`, `!`, `→`), with
    /// the step events tt follows.
    pub fn show(&self, event: &tt_model_local::event::Event) {
        use tt_model_local::event::Event;
        match event {
            Event::StepStart { key, label } => self.step_start(key, label),
            Event::StepDone { key, what, detail } => self.step_done(key, what, detail.as_deref()),
            Event::StepEnd { key, detail } => self.step_end(key, detail.as_deref()),
            Event::Done { what, detail } => self.done(what, detail.as_deref()),
            Event::Skipped { what, detail } => self.skipped(what, detail.as_deref()),
            Event::Note(text) => self.note(text),
            Event::Warning(text) => self.warn(text),
            Event::Next(text) => self.next(text),
            Event::Detail(text) => {
                if self.verbose() {
                    self.note(text);
                }
            }
            Event::Container { name, endpoint } => self.container_event(name, endpoint),
            // The package pipeline's phases, pulls and build lines need the stepper that
            // counts them; only `package` runs the pipeline and draws them
            // (commands/package.rs).
            Event::Findings(_)
            | Event::Log(_)
            | Event::PhaseStarted(_)
            | Event::PhaseFinished(..)
            | Event::Pulling { .. }
            | Event::Pulled { .. }
            | Event::Context { .. }
            | Event::BuildStep { .. }
            | Event::BuildCached
            | Event::BuildLine(_)
            | Event::Verified { .. }
            | Event::Exported { .. } => {}
        }
    }

    /// `! message`: an actionable warning.
    pub fn warn(&self, message: &str) {
        self.glyph_line("!", Style::Yellow, message, None);
    }

    /// `• message`: an informational note.
    pub fn note(&self, message: &str) {
        self.glyph_line("•", Style::Dim, message, None);
    }

    /// `→ hint`: what to run next.
    pub fn next(&self, hint: &str) {
        self.glyph_line("→", Style::Cyan, hint, None);
    }

    /// `✗ message`: a handled failure without a card.
    pub fn error(&self, message: &str) {
        self.emit_failure(Event::from_message(message));
        self.glyph_line("✗", Style::Red, message, None);
    }

    /// `✗ cause`, then the card: evidence, consequence and `Try:` actions.
    pub fn fail(&self, card: &DiagnosisCard) {
        self.emit_failure(Event::from_card(card));
        self.glyph_line("✗", Style::Red, &card.cause, None);
        for line in render_card_body(card) {
            self.err_line(&line);
        }
    }

    /// An unexpected error with its cause chain (`Caused by:`), printed once.
    pub fn error_chain(&self, err: &anyhow::Error) {
        self.emit_failure(Event::from_chain(err));
        self.glyph_line("✗", Style::Red, &err.to_string(), None);
        for cause in err.chain().skip(1) {
            self.err_line(&format!("  Caused by: {cause}"));
        }
    }

    /// A line of machine-readable or primary output on stdout (never wrapped, no markup).
    pub fn out(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
    }

    /// Text on stdout as-is (the caller supplies the newlines).
    pub fn out_raw(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// Text on stderr as-is (the caller supplies the newlines).
    pub fn err_raw(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }

    /// Paints `text` for stdout when colour is allowed there.
    pub fn style_out_bold(&self, text: &str) -> String {
        self.paint(self.color_out, Style::Bold, text)
    }
}

/// The lines under a card's `✗ cause` line (pure, so tests can pin the layout).
pub fn render_card_body(card: &DiagnosisCard) -> Vec<String> {
    let mut lines = Vec::new();
    for evidence in &card.evidence {
        lines.push(format!("  {evidence}"));
    }
    if let Some(consequence) = &card.consequence {
        lines.push(format!("  {consequence}"));
    }
    if !card.actions.is_empty() {
        lines.push("  Try:".to_owned());
        for action in &card.actions {
            lines.push(format!("    → {action}"));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_body_lists_evidence_consequence_and_actions() {
        let card = DiagnosisCard {
            cause: "the device is busy".into(),
            evidence: vec!["/dev/tenstorrent/0 held by pid 42".into()],
            consequence: Some("the server cannot open the chip".into()),
            actions: vec!["tt-model stop org/x".into()],
        };
        assert_eq!(
            render_card_body(&card),
            vec![
                "  /dev/tenstorrent/0 held by pid 42",
                "  the server cannot open the chip",
                "  Try:",
                "    → tt-model stop org/x",
            ]
        );
    }

    #[test]
    fn plain_printer_never_paints() {
        let p = Printer::plain(false);
        assert_eq!(p.paint(p.color_err, Style::Red, "x"), "x");
        assert!(!p.color_stdout() && !p.color_stderr());
    }
}
