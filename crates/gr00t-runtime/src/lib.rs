//! GR00T N1.6 inference runtime: preprocessing, tokenizer, the model forward (the CPU reference)
//! and its CPU backend.
//!
//! The host side (image/state preprocessing, tokenizer, noise, action decoding) and the model
//! forward meet behind one seam, [`policy::Policy`]: the host builds [`policy::ModelInputs`],
//! a backend turns them into a normalized action chunk. The megakernel backends (the CPU
//! emulator of the Blackhole card, the card itself) are the crate `gr00t-megakernel`, which
//! implements this seam and the model's [`model::DitExecutor`].
//!
//! Module ownership while the runtime is being built: `config`, `weights`, `model` (the forward);
//! `policy` (the seam); the host modules are added beside them.
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod beside;
pub mod config;
pub mod cpu;
pub mod json_file;
pub mod model;
pub mod n17;
pub mod policy;
pub mod preprocess;
pub mod processor;
pub mod randn;
pub mod request;
pub mod tokenizer;
pub mod weights;
