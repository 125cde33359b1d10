//! tt-model-local: what this machine holds and runs, which every command reads.
//!
//! * the use cases the CLI runs with one call: login and logout ([`account`]), the record of
//!   a push ([`push_record`]), `push` ([`push`]) and `pull` ([`pull`]), a registry image
//!   through [`registry`], the Hub client and a failure's consequence ([`hub_access`]),
//!   `rm` ([`remove`]), `stop` ([`stop`]), `logs` ([`logs`]), `list`'s readiness of each
//!   installed package ([`readiness`]), `serve`'s plan, start and refresh ([`serve`]), the
//!   community catalog's `publish`/`unpublish`/`search` ([`catalog`]), the review copy
//!   ([`whitelist`]), `info`'s read of a published package ([`published`]) and `curl`'s one
//!   request to the served model ([`curl`]); they report their steps as [`event::Event`]s
//!   into [`Progress`];
//! * a package's containers and every tt-model container (`ps`) ([`containers`]);
//! * the state root and the settings every command shares ([`state::Local`]);
//! * the installed-packages database ([`localdb`]) and the CLI's view of it ([`installed`]);
//! * staged and pulled packages ([`package`], [`target`]) and their images ([`image`]);
//! * the weights in the HF cache ([`weights`]), and `tt-model weights`, which fills or checks
//!   them for a package ([`fill`]);
//! * the host: its card, devices and their allocation lock ([`host`], [`devices`]), and whether
//!   a package suits it ([`compat`]);
//! * a served model's OpenAI API, which `curl` speaks ([`openai`]);
//! * a serve's boot: the log reader ([`bootlog`]), the readiness watch ([`watch`]) and the
//!   diagnosis of a failed boot ([`diagnose`]);
//! * the registry blob index ([`blob_index`]).
//!
//! It talks to the container engine only through `tt-model-engine`. Errors are typed
//! ([`LocalError`]: what the user named and why it is refused, or the failing library's own
//! error); progress is reported through [`Progress`], which the CLI draws.

// A library reports through its return values and its caller's progress, never the terminal.
#![warn(missing_docs)]

pub mod account;
pub mod blob_index;
pub mod bootlog;
pub mod catalog;
pub mod compat;
pub mod containers;
pub mod curl;
pub mod devices;
pub mod diagnose;
pub mod error;
pub mod event;
pub mod fill;
pub mod host;
pub mod hub_access;
pub mod image;
pub mod installed;
pub mod localdb;
pub mod logs;
pub mod openai;
pub mod package;
pub mod progress;
pub mod publish;
pub mod published;
pub mod pull;
pub mod push;
pub mod push_record;
pub mod readiness;
pub mod registry;
pub mod remove;
pub mod serve;
pub mod state;
pub mod stop;
pub mod target;
pub mod watch;
pub mod weights;
pub mod whitelist;

pub use error::LocalError;
pub use progress::Progress;
pub use state::Local;
