//! The device backend (cargo feature `device`): the DiT blocks of each denoise step on a
//! Tenstorrent Blackhole through ttnn, a p150a card (`GR00T_MK_DEVICE=p150a`) or the ttsim
//! simulator (`GR00T_MK_DEVICE=sim`, `TT_METAL_SIMULATOR` set). Same host code, same kernels,
//! same arena upload on both.
//!
//! * [`worker`]: the ttnn worker process and its framed protocol.
//! * [`backend`]: [`TtDevice`] (the open device holding the arena) and [`DeviceSteps`], the
//!   `DitDevice` over it; our kernels in `kernels/`.

pub mod backend;
pub mod worker;

pub use backend::{DeviceInfo, DeviceSteps, MatmulTimes, SFPU, SfpuPlacement, TtDevice};
pub use worker::{TtnnWorker, WorkerError, python_path};
#[cfg(test)]
mod tests;
