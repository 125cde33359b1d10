//! Progress events: the pipeline reports, the CLI draws. Libraries never print.
//!
//! The pipeline speaks the workspace's one vocabulary (tt-model-events): its phases, pulls and
//! build lines are [`Event`] variants beside the ones every use case shares, emitted into the
//! caller's [`Progress`].
//!
//! ```text
//! Resolve ── Stage ── Build ── Verify ── Export
//! ```
//! Each phase emits `PhaseStarted`, its own events, then `PhaseFinished`. `PhaseFinished` is
//! not emitted for a phase that failed.

pub use tt_model_events::{Event, Phase, Progress, Recorder, Silent};
