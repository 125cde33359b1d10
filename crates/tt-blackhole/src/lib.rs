//! tt-blackhole: the host side of the Blackhole p150a megakernel path for the GR00T DiT.
//!
//! * [`format`], [`bf16`], [`tile`], [`bfp`], [`dram`]: Tenstorrent data formats, the TILE
//!   layout, the bfp8_b/bfp4_b codec (bit-identical to tt-metal's host packer) and interleaved
//!   DRAM placement.
//! * [`dims`], [`split`], [`arena`]: the DiT weight arena: every matmul weight of the DiT blocks
//!   packed in the order the compute cores' readers stream it, with an index and a checksummed,
//!   memory-mappable cache file.
//! * [`plan`]: the per-core plan for the 11x10 worker grid and its roofline.
//! * [`backbone`]: the Eagle backbone's stages (SigLIP2, projector, Qwen3) as matmuls and
//!   attentions, for the per-stage roofline of the whole forward.
//! * [`device`]: the boundary to a device (emulator, simulator, card).
//!
//! Pure: nothing here knows about the GR00T runtime; tensors come in through
//! [`arena::TensorSource`].
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod arena;
pub mod backbone;
pub mod bf16;
pub mod bfp;
pub mod checksum;
pub mod device;
pub mod dims;
pub mod dram;
pub mod format;
pub mod plan;
pub mod split;
pub mod tile;

pub use format::{ArenaDtype, DataFormat};
