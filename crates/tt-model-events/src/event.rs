//! What a library says as it goes, for the CLI to draw: one vocabulary for every use case, so
//! the terminal printer and the NDJSON stream tt reads render each kind of report one way,
//! wherever it came from. The steps' keys are the ones the stream shares with tt (`host`,
//! `bundle`, `image`, `weights`, `container`). The package pipeline's reports are here too:
//!
//! ```text
//! Resolve ── Stage ── Build ── Verify ── Export
//! ```
//! Each phase emits [`Event::PhaseStarted`], its own events, then [`Event::PhaseFinished`]
//! (not emitted for a phase that failed).

use std::path::PathBuf;
use std::time::Duration;

/// One report of a use case.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Step `key` starts (`label`: what it does, shown with `-v`).
    StepStart {
        /// The step's key.
        key: String,
        /// What the step does.
        label: String,
    },
    /// Step `key` finished (`✓ what  detail`).
    StepDone {
        /// The step's key.
        key: String,
        /// What was done.
        what: String,
        /// A short fact about it, if any.
        detail: Option<String>,
    },
    /// Step `key` finished, its line already told by an earlier event: the stream settles it.
    StepEnd {
        /// The step's key.
        key: String,
        /// A short fact about it, if any.
        detail: Option<String>,
    },
    /// Something was done outside a step (`✓ what  detail`).
    Done {
        /// What was done, in the user's terms.
        what: String,
        /// A short fact about it (a size, a path), if any.
        detail: Option<String>,
    },
    /// Nothing was done, on purpose: already so, or kept as asked (`○ what  detail`).
    Skipped {
        /// What was not done.
        what: String,
        /// Why, or what would do it.
        detail: Option<String>,
    },
    /// A fact worth telling on the way (`• text`).
    Note(String),
    /// The use case went on, but the user should know (`! text`).
    Warning(String),
    /// What the user can run next (`→ text`).
    Next(String),
    /// A fact only a verbose run shows (`• text` with `-v`): the container's `docker run` line.
    Detail(String),
    /// A container started and answers at `endpoint` (the stream's `container` event, which
    /// `tt` reads to find the server).
    Container {
        /// The container's name.
        name: String,
        /// Where it answers, on loopback.
        endpoint: String,
    },
    // The package pipeline's reports (a `Skipped`, a `Note` or a `Warning` there is the
    // shared one above).
    /// The manifest's warnings, before anything else happens (shown as `lint` shows them).
    Findings(Vec<tt_model_manifest::Diagnostic>),
    /// Where the full build log goes.
    Log(PathBuf),
    /// A phase began.
    PhaseStarted(Phase),
    /// A phase succeeded, after this long.
    PhaseFinished(Phase, Duration),
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

impl Event {
    /// [`Event::Done`] with an optional detail.
    pub fn done(what: impl Into<String>, detail: Option<String>) -> Self {
        Event::Done {
            what: what.into(),
            detail,
        }
    }

    /// [`Event::Skipped`] with an optional detail.
    pub fn skipped(what: impl Into<String>, detail: Option<String>) -> Self {
        Event::Skipped {
            what: what.into(),
            detail,
        }
    }

    /// [`Event::StepStart`].
    pub fn step_start(key: &str, label: impl Into<String>) -> Self {
        Event::StepStart {
            key: key.to_string(),
            label: label.into(),
        }
    }

    /// [`Event::StepDone`] with an optional detail.
    pub fn step_done(key: &str, what: impl Into<String>, detail: Option<String>) -> Self {
        Event::StepDone {
            key: key.to_string(),
            what: what.into(),
            detail,
        }
    }
}

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
