//! How the crate reports progress: the caller (the CLI's printer and bars) draws; nothing here
//! writes to the terminal.

use tt_model_hub::DownloadReporter;

/// Where a step's outcome and a transfer's bytes go.
pub trait Progress: Sync {
    /// A step finished (`detail`: what it did, in a few words).
    fn done(&self, message: &str, detail: Option<&str>);
    /// A fact worth telling on the way.
    fn note(&self, message: &str);
    /// Something is not as it should be, and the command goes on.
    fn warn(&self, message: &str);
    /// What the user can run next.
    fn next(&self, hint: &str);
    /// A byte transfer labelled `what` (a repo id) starts; the reporter is dropped after
    /// [`Transfer::finish`].
    fn transfer(&self, what: &str) -> Box<dyn Transfer>;
    /// A step of serve's checklist starts (`key`: `host`, `image`, `weights`, `container`,
    /// the keys the progress stream shares with tt); nothing by default.
    fn step_start(&self, _key: &str, _label: &str) {}
    /// The step `key` finished: [`Progress::done`] by default.
    fn step_done(&self, _key: &str, message: &str, detail: Option<&str>) {
        self.done(message, detail);
    }
}

/// One byte transfer's reporter.
pub trait Transfer: DownloadReporter {
    /// The transfer ended (the caller reports the outcome).
    fn finish(&self);
    /// The transfer's total, for one that has no download plan (an image load); nothing by
    /// default.
    fn total(&self, _bytes: u64) {}
}

/// Reports nothing (tests, and callers that print the outcome themselves).
pub struct Silent;

impl Transfer for tt_model_hub::download::NoProgress {
    fn finish(&self) {}
}

impl Progress for Silent {
    fn done(&self, _message: &str, _detail: Option<&str>) {}
    fn note(&self, _message: &str) {}
    fn warn(&self, _message: &str) {}
    fn next(&self, _hint: &str) {}
    fn transfer(&self, _what: &str) -> Box<dyn Transfer> {
        Box::new(tt_model_hub::download::NoProgress)
    }
}

/// Decimal bytes (`12.1 MB`): the workspace's one formatter.
pub use tt_model_manifest::numfmt::human_bytes;
