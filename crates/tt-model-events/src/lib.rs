//! tt-model-events: the one vocabulary every library reports in. The Hub client's transfers,
//! the package pipeline and the local use cases emit [`Event`]s and byte counts into their
//! caller's [`Progress`]; the CLI's printer and its NDJSON stream are the two views of them.
//! It sits below every crate that reports (it needs only the manifest's diagnostics), so no
//! library keeps a reporter trait of its own.

#![warn(missing_docs)]

mod event;
mod progress;

pub use event::{Event, Phase};
pub use progress::{Progress, Recorder, Silent, Transfer};
