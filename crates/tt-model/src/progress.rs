//! The CLI's progress drawing, one style for each shape: a byte-transfer bar (downloads and
//! uploads), a spinner with a message, and byte counts as people read them. Commands draw with
//! these; libraries report through their own reporter traits and never draw.

use indicatif::{ProgressBar, ProgressStyle};
use tt_model_hub::DownloadReporter;
use tt_model_hub::download::DownloadPlan;

/// A spinner drawn with `template` (indicatif's syntax), ticking steadily.
pub(crate) fn spinner(template: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
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
    let bar = ProgressBar::new(0);
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

/// A byte progress bar for a Hub download (weights, a pulled package), sized by the plan.
pub(crate) struct ByteBar(ProgressBar);

impl ByteBar {
    /// A bar labelled `what` (a repo id); its length is set when the plan is known.
    pub(crate) fn new(what: &str) -> Self {
        Self(byte_progress_bar(what))
    }

    /// Removes the bar (the caller prints the outcome).
    pub(crate) fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl DownloadReporter for ByteBar {
    fn planned(&self, plan: &DownloadPlan) {
        self.0.set_length(plan.bytes_to_fetch());
    }
    fn file_started(&self, file: &str, _size: Option<u64>, _resumed_from: u64) {
        self.0.set_message(file.to_string());
    }
    fn bytes(&self, n: u64) {
        self.0.inc(n);
    }
}

impl tt_model_local::progress::Transfer for ByteBar {
    fn finish(&self) {
        ByteBar::finish(self);
    }
}

/// The library's progress, drawn by the printer (steps) and a byte bar (transfers).
impl tt_model_local::Progress for crate::printer::Printer {
    fn done(&self, message: &str, detail: Option<&str>) {
        crate::printer::Printer::done(self, message, detail);
    }
    fn note(&self, message: &str) {
        crate::printer::Printer::note(self, message);
    }
    fn warn(&self, message: &str) {
        crate::printer::Printer::warn(self, message);
    }
    fn next(&self, hint: &str) {
        crate::printer::Printer::next(self, hint);
    }
    fn transfer(&self, what: &str) -> Box<dyn tt_model_local::progress::Transfer> {
        Box::new(ByteBar::new(what))
    }
}
