//! Progress events: the pipeline reports, the CLI draws. Libraries never print.
//!
//! ```text
//! Resolve ── Stage ── Build ── Verify ── Export
//! ```
//! Each phase emits `PhaseStarted`, its own events, then `PhaseFinished`. `PhaseFinished` is
//! not emitted for a phase that failed.

use std::time::Duration;

/// The pipeline phases, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Resolve,
    Stage,
    Build,
    Verify,
    Export,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Resolve,
        Phase::Stage,
        Phase::Build,
        Phase::Verify,
        Phase::Export,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Resolve => "Resolve",
            Phase::Stage => "Stage",
            Phase::Build => "Build",
            Phase::Verify => "Verify",
            Phase::Export => "Export",
        }
    }
}

/// Something the pipeline wants the user to know.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The manifest's warnings, before anything else happens (shown as `lint` shows them).
    Findings(Vec<tt_model_manifest::Diagnostic>),
    /// Where the full build log goes.
    Log(std::path::PathBuf),
    PhaseStarted(Phase),
    PhaseFinished(Phase, Duration),
    /// A fact worth a line (base image pinned, code digest, files ignored).
    Note(String),
    /// Something suspicious that does not stop the package.
    Warning(String),
    /// The build context is being streamed.
    Context {
        files: usize,
        bytes: u64,
    },
    /// A Dockerfile step started.
    BuildStep {
        index: usize,
        total: usize,
        instruction: String,
    },
    /// The current step came from the layer cache.
    BuildCached,
    /// A line of build output (also in the log file).
    BuildLine(String),
    /// Verify passed this many checks (or was skipped because this exact image passed before).
    Verified {
        checks: usize,
        reused: bool,
    },
    /// The OCI layout was written, or reused from the previous output.
    Exported {
        bytes: u64,
        reused: bool,
    },
}

/// Receives pipeline events.
pub trait Reporter: Send {
    fn event(&mut self, event: Event);
}

/// A reporter that drops everything (tests, quiet runs).
#[derive(Debug, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn event(&mut self, _: Event) {}
}

/// Collects events (tests).
#[derive(Debug, Default)]
pub struct Recorder(pub Vec<Event>);

impl Reporter for Recorder {
    fn event(&mut self, event: Event) {
        self.0.push(event);
    }
}
