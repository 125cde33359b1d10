//! How the crate reports progress: its use cases emit [`Event`]s and byte counts into the
//! caller's [`Progress`] (the CLI's printer and bars, or its NDJSON stream); nothing here
//! writes to the terminal.

use tt_model_hub::DownloadReporter;
use tt_model_hub::upload::UploadReporter;

use crate::event::Event;

/// Where a use case's events and a transfer's bytes go.
pub trait Progress: Sync {
    /// One report, in the order the use case makes them.
    fn emit(&self, event: Event);
    /// A byte transfer labelled `what` (a repo id, an image) whose bytes are step `key`'s
    /// progress; the reporter is dropped after [`Transfer::finish`].
    fn transfer(&self, key: &str, what: &str) -> Box<dyn Transfer>;
}

/// One byte transfer's reporter.
pub trait Transfer: DownloadReporter {
    /// The transfer ended (the caller reports the outcome).
    fn finish(&self);
    /// The transfer's total, for one that has no download plan (an image load, a registry
    /// pull); nothing by default.
    fn total(&self, _bytes: u64) {}
}

/// A transfer seen as a registry client's byte reporter (a registry pull reports as an
/// upload does: a total, then bytes).
pub(crate) struct AsUpload<'a>(pub(crate) &'a dyn Transfer);

impl UploadReporter for AsUpload<'_> {
    fn planned(&self, bytes: u64) {
        self.0.total(bytes);
    }
    fn file_started(&self, path: &str) {
        self.0.file_started(path, None, 0);
    }
    fn bytes(&self, n: u64) {
        DownloadReporter::bytes(self.0, n);
    }
}

/// A transfer owned as an upload's reporter (an upload holds its reporter in an `Arc`).
pub(crate) struct UploadOf(pub(crate) Box<dyn Transfer>);

impl UploadReporter for UploadOf {
    fn planned(&self, bytes: u64) {
        AsUpload(self.0.as_ref()).planned(bytes);
    }
    fn file_started(&self, path: &str) {
        AsUpload(self.0.as_ref()).file_started(path);
    }
    fn bytes(&self, n: u64) {
        AsUpload(self.0.as_ref()).bytes(n);
    }
}

/// Reports nothing (tests, and callers that print the outcome themselves).
pub struct Silent;

impl Transfer for tt_model_hub::download::NoProgress {
    fn finish(&self) {}
}

impl Progress for Silent {
    fn emit(&self, _event: Event) {}
    fn transfer(&self, _key: &str, _what: &str) -> Box<dyn Transfer> {
        Box::new(tt_model_hub::download::NoProgress)
    }
}

/// Decimal bytes (`12.1 MB`): the workspace's one formatter.
pub use tt_model_manifest::numfmt::human_bytes;
