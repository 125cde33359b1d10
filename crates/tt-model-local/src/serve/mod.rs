//! The `serve` use case on this machine: [`plan`] (what the user asked for, checked, and the
//! container composed from it; `--print` stops there) and [`start`] (preflight, image,
//! weights, port, and the chips chosen and the container created under the allocation lock),
//! and [`refresh`] (`--refresh`, and the update advisory of an unpinned pulled package).
//! The readiness watch that follows is [`crate::watch`].

pub mod plan;
pub mod refresh;
pub mod start;

pub use plan::{Plan, ServeOptions, Settings, print_spec, request, settings};
pub use start::{Started, endpoint_for_events, precheck, start};
