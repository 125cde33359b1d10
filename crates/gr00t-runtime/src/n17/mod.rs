//! GR00T N1.7 (Isaac-GR00T `n1.7-release`): a Qwen3-VL backbone (Cosmos-Reason2 layout) with
//! deepstack and interleaved M-RoPE, a 40-step flow-matching action head over 132 dims with
//! state history and an alternating text/image DiT, and the processing around them
//! (letterboxed multi-view, multi-frame images, the chat-template prompt, percentile
//! normalisation, relative EEF in rot6d, real-time chunking).
//!
//! The CPU forward is the reference the device path is checked against, as for N1.6
//! ([`crate::model`]); tap names follow the golden `taps.safetensors` of
//! `shared/golden/gr00t-n17-tiny`.

pub mod backbone;
pub mod config;
pub mod head;
pub mod model;
pub mod processing;
