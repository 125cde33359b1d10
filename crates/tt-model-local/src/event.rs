//! What a use case says as it goes: the workspace's one [`Event`] (tt-model-events), re-exported
//! where the use cases and the CLI have always named it.

pub use tt_model_events::{Event, Phase};
