//! How the crate reports progress: its use cases emit [`Event`](crate::event::Event)s and byte
//! counts into the caller's [`Progress`] (the CLI's printer and bars, or its NDJSON stream);
//! nothing here writes to the terminal. The traits are the workspace's one pair
//! (tt-model-events), which the Hub client's transfers take too.

pub use tt_model_events::{Progress, Silent, Transfer};

/// Decimal bytes (`12.1 MB`): the workspace's one formatter.
pub use tt_model_manifest::numfmt::human_bytes;
