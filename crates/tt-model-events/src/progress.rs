//! Where events and bytes go: the caller's [`Progress`], and one [`Transfer`] per byte
//! transfer (a Hub download or upload, a registry pull or push, an image load).

use std::sync::Mutex;

use crate::event::Event;

/// Where a use case's events and a transfer's bytes go.
pub trait Progress: Sync {
    /// One report, in the order the use case makes them.
    fn emit(&self, event: Event);
    /// A byte transfer labelled `what` (a repo id, an image) whose bytes are step `key`'s
    /// progress; the transfer is dropped after [`Transfer::finish`]. A caller that draws no
    /// bytes (the package pipeline's, tests) keeps the silent default.
    fn transfer(&self, _key: &str, _what: &str) -> Box<dyn Transfer> {
        Box::new(Silent)
    }
}

/// One byte transfer's progress. Every method defaults to nothing, so a view draws only what
/// it shows.
pub trait Transfer: Send + Sync {
    /// The bytes that will move (a download's missing bytes, an upload's missing blobs).
    fn total(&self, _bytes: u64) {}
    /// `name` (a file, a blob digest) starts moving.
    fn file(&self, _name: &str) {}
    /// `n` more bytes moved.
    fn bytes(&self, _n: u64) {}
    /// The transfer ended (the caller reports the outcome).
    fn finish(&self) {}
}

/// Reports nothing (tests, and callers that print the outcome themselves).
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Transfer for Silent {}

impl Progress for Silent {
    fn emit(&self, _event: Event) {}
}

/// Keeps every event, in order (tests read what a use case said).
#[derive(Debug, Default)]
pub struct Recorder(Mutex<Vec<Event>>);

impl Recorder {
    /// The events so far, in order.
    pub fn into_events(self) -> Vec<Event> {
        self.0
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Progress for Recorder {
    fn emit(&self, event: Event) {
        // A panic elsewhere while holding the lock leaves a whole Vec: keep recording.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(event);
    }
}
