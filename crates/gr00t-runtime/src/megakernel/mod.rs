//! The Blackhole megakernel path on the CPU: the DiT denoise executed the way the p150a plan
//! (`tt_blackhole::plan`) schedules it, from the block-float weight arena
//! (`tt_blackhole::arena`), so that any machine predicts what the card outputs.
//!
//! * [`arena_source`]: builds the arena from the model's checkpoint tensors.
//! * [`emulator`]: [`Emulator`], the CPU implementation of `tt_blackhole::device::DitDevice`
//!   (the 32 blocks of one step, numerics as the device packs them).
//! * [`executor`]: [`MegakernelDit`], the model's [`crate::model::DitExecutor`] on top of a
//!   device, and [`MegakernelPolicy`], the `megakernel-emulated` [`crate::policy::Policy`].
//!
//! * [`head_arena`]: the action head's weights packed like the DiT's; [`head_emulator`]: the
//!   CPU emulation of the head's device stages from them.
//! * [`counters`]: the device traffic measured per step and forward (`--stats-json`, `/info`).
//! * [`device`] (cargo feature `device`): the same blocks on a Blackhole p150a or its
//!   simulator through ttnn, with the repo's kernels.
//!
//! Everything outside the DiT blocks (backbone, encoders, timestep embedding, output layer,
//! decoder, Euler loop) is the CPU model's own code, called, not copied.

pub mod arena_source;
pub mod counters;
#[cfg(feature = "device")]
pub mod device;
pub mod emulator;
pub mod executor;
pub mod flow_device;
pub mod head_arena;
pub mod head_emulator;
#[cfg(test)]
mod tests;

pub use arena_source::{CheckpointTensors, dit_dims};
pub use emulator::Emulator;
pub use executor::{
    DEFAULT_DEVICE_TIMEOUT, Engine, MegakernelConfig, MegakernelDit, MegakernelPolicy,
    checkpoint_revision,
};
pub use head_arena::{HeadArena, HeadArenaError, HeadEntry, HeadWeight};
pub use head_emulator::HeadAct;
