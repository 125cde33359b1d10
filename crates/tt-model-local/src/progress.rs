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
}

/// One byte transfer's reporter.
pub trait Transfer: DownloadReporter {
    /// The transfer ended (the caller reports the outcome).
    fn finish(&self);
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

/// Decimal bytes (`12.1 MB`).
pub fn human_bytes(n: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1000.0 && i < units.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}
