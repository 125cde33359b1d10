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
    /// Read the sources: fetch and pin git sources, read the tt-metal facts, pin the base images.
    Resolve,
    /// Copy `code/`, build the `runtime.cargo` binary, render the templates, lay out the context.
    Stage,
    /// Stream the context to the engine and build the image under a provisional tag.
    Build,
    /// Run the checks inside the image (skipped when the previous output holds this image).
    Verify,
    /// Tag the image, write its OCI layout, the lock, the card and the wire manifest.
    Export,
}

impl Phase {
    /// Every phase, in pipeline order.
    pub const ALL: [Phase; 5] = [
        Phase::Resolve,
        Phase::Stage,
        Phase::Build,
        Phase::Verify,
        Phase::Export,
    ];

    /// The phase's display name (`Resolve`, `Stage`, …).
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
    /// A phase began.
    PhaseStarted(Phase),
    /// A phase succeeded, after this long.
    PhaseFinished(Phase, Duration),
    /// A fact worth a line (base image pinned, code digest, files ignored).
    Note(String),
    /// Something suspicious that does not stop the package.
    Warning(String),
    /// A base image is being pulled: bytes so far, over the layers announced so far.
    Pulling {
        /// The image as named (`--base-image` or the default).
        image: String,
        /// Bytes downloaded.
        done: u64,
        /// Bytes to download.
        total: u64,
    },
    /// A base image was pulled.
    Pulled {
        /// The image as named.
        image: String,
        /// Compressed bytes downloaded.
        bytes: u64,
        /// Layers downloaded (the engine already held the others).
        layers: usize,
        /// How long the pull took.
        took: Duration,
    },
    /// Something the inputs did not call for was left out (shown as `○`), e.g. OpenMPI on a
    /// base that has none.
    Skipped(String),
    /// The build context is being streamed.
    Context {
        /// Regular files in the context.
        files: usize,
        /// Sum of their sizes (tar overhead excluded).
        bytes: u64,
    },
    /// A Dockerfile step started.
    BuildStep {
        /// 1-based step number, as the engine reports it.
        index: usize,
        /// Steps in the Dockerfile.
        total: usize,
        /// The instruction, e.g. `COPY code/ /opt/tt-metal/`.
        instruction: String,
    },
    /// The current step came from the layer cache.
    BuildCached,
    /// A line of build output (also in the log file).
    BuildLine(String),
    /// Verify passed this many checks (or was skipped because this exact image passed before).
    Verified {
        /// Checks passed.
        checks: usize,
        /// Skipped: this exact image passed before.
        reused: bool,
    },
    /// The OCI layout was written, or reused from the previous output.
    Exported {
        /// Bytes written (0 when reused).
        bytes: u64,
        /// The previous output's layout was kept.
        reused: bool,
    },
}

/// Receives pipeline events.
pub trait Reporter: Send {
    /// Handles one event, in the order the pipeline emits them.
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
