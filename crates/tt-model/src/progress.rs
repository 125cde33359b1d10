//! The CLI's progress drawing, one style for each shape: a byte-transfer bar (downloads and
//! uploads), a spinner with a message, and byte counts as people read them. Commands draw with
//! these; libraries report through the workspace's one `Progress` and `Transfer`
//! (tt-model-events) and never draw.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tt_model_local::progress::Transfer;

use crate::events::{self, ProgressEvents};

/// Whether the live view (spinners, byte bars) may draw: not under `TT_MODEL_NO_PIN` (tt sets
/// it when it renders our output itself) nor while progress events are written. indicatif
/// already draws nothing when stderr is not a terminal.
pub(crate) fn live_view() -> bool {
    !events::no_pin(std::env::var(events::NO_PIN_ENV).ok().as_deref())
        && !events::requested(std::env::var(events::PROGRESS_ENV).ok().as_deref())
}

/// `bar`, hidden when the live view is off.
fn drawn(bar: ProgressBar) -> ProgressBar {
    if !live_view() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

/// A spinner drawn with `template` (indicatif's syntax), ticking steadily.
pub(crate) fn spinner(template: &str) -> ProgressBar {
    let bar = drawn(ProgressBar::new_spinner());
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// Decimal bytes (`12.1 MB`), as the library reports them.
pub use tt_model_local::progress::human_bytes;

/// The one byte-transfer bar style (downloads and uploads), labelled `what`, length unknown yet.
pub(crate) fn byte_progress_bar(what: &str) -> ProgressBar {
    let bar = drawn(ProgressBar::new(0));
    bar.set_style(
        ProgressStyle::with_template(
            "  {spinner} {prefix}  ▕{bar:24}▏ {bytes}/{total_bytes}  {bytes_per_sec}  {wide_msg}",
        )
        .expect("static template")
        .progress_chars("█▉▊▋▌▍▎▏ "),
    );
    bar.set_prefix(what.to_string());
    bar
}

/// A byte progress bar for a Hub download (weights, a pulled package), sized by the plan, and
/// the same bytes as `progress` events of a step when tt asked for them.
pub(crate) struct ByteBar(ProgressBar, Option<ProgressEvents>);

impl ByteBar {
    /// A bar labelled `what` (a repo id; its length is set when the plan is known) whose
    /// bytes are also step `key`'s progress events.
    pub(crate) fn for_step(what: &str, key: &str, printer: &crate::printer::Printer) -> Self {
        let events = printer
            .events()
            .map(|sink| ProgressEvents::new(sink.clone(), key));
        Self(byte_progress_bar(what), events)
    }

    /// Removes the bar (the caller prints the outcome).
    pub(crate) fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Transfer for ByteBar {
    fn total(&self, bytes: u64) {
        self.0.set_length(bytes);
        if let Some(e) = &self.1 {
            e.total(bytes);
        }
    }
    fn file(&self, name: &str) {
        self.0.set_message(name.to_string());
    }
    fn bytes(&self, n: u64) {
        self.0.inc(n);
        if let Some(e) = &self.1 {
            e.add(n);
        }
    }
    fn finish(&self) {
        ByteBar::finish(self);
    }
}

/// The library's progress, drawn by the printer (its events) and a byte bar (transfers).
impl tt_model_local::Progress for crate::printer::Printer {
    fn emit(&self, event: tt_model_local::event::Event) {
        self.show(&event);
    }
    fn transfer(&self, key: &str, what: &str) -> Box<dyn Transfer> {
        Box::new(ByteBar::for_step(what, key, self))
    }
}
