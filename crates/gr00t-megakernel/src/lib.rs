//! GR00T N1.6's DiT and action head as the Blackhole megakernel runs them: the device backend
//! beside the model crate (`gr00t-runtime`, the CPU reference and the host processing). The DiT
//! denoise executed the way the p150a plan (`tt_blackhole::plan`) schedules it, from the
//! block-float weight arena (`tt_blackhole::arena`), on the CPU emulator of the card (so that
//! any machine predicts what the card outputs) or on the card itself.
//!
//! * [`arena_source`]: builds the arena from the model's checkpoint tensors.
//! * [`emulator`]: [`Emulator`], the CPU implementation of `tt_blackhole::device::DitDevice`
//!   (the 32 blocks of one step, numerics as the device packs them).
//! * [`executor`]: [`MegakernelDit`], the model's [`gr00t_runtime::model::DitExecutor`] on top
//!   of a device, and [`MegakernelPolicy`], the `megakernel-*` [`gr00t_runtime::policy::Policy`].
//!
//! * [`head_arena`]: the action head's weights packed like the DiT's; [`head_emulator`]: the
//!   CPU emulation of the head's device stages from them.
//! * [`counters`]: the device traffic measured per step and forward (`--stats-json`, `/info`),
//!   reported as the policy's [`gr00t_runtime::policy::DeviceStats`].
//! * [`device_backend`]: the seam a device backend implements ([`DeviceOpener`],
//!   [`DeviceBackend`], [`DeviceForward`]): the crate `gr00t-device` runs the same blocks on a
//!   Blackhole p150a or its simulator through ttnn, and `gr00t-server` (feature `device`)
//!   passes its opener in.
//!
//! Everything outside the DiT blocks (backbone, encoders, timestep embedding, output layer,
//! decoder, Euler loop) is the CPU model's own code, called, not copied.
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod arena_source;
pub mod backbone_arena;
pub mod counters;
pub mod device_backend;
mod device_encoders;
pub mod emulator;
pub mod executor;
pub mod flow_device;
#[cfg(test)]
#[allow(
    dead_code,
    reason = "the golden case's helpers are shared with gr00t-device's tests"
)]
mod golden_case;
pub mod head_arena;
pub mod head_emulator;
pub mod head_layout;
pub mod llm_arena;
pub mod packed;
#[cfg(test)]
mod tests;
pub mod vision_layout;

pub use arena_source::{CheckpointTensors, dit_dims};
pub use backbone_arena::{
    BackboneArena, BackboneArenaError, BackboneNorm, BackboneWeight, LlmMatrix, VisionMatrix,
};
pub use device_backend::{DeviceBackend, DeviceForward, DeviceOpener};
pub use emulator::Emulator;
pub use executor::{
    DEFAULT_DEVICE_TIMEOUT, Engine, MegakernelConfig, MegakernelDit, MegakernelPolicy,
    checkpoint_revision,
};
pub use head_arena::{HeadArena, HeadArenaError, HeadEntry, HeadWeight};
pub use head_emulator::HeadAct;
