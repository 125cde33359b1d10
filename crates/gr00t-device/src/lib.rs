//! GR00T's megakernel on a Tenstorrent Blackhole through ttnn, a p150a card
//! (`GR00T_MK_DEVICE=p150a`) or the ttsim simulator (`GR00T_MK_DEVICE=sim`,
//! `TT_METAL_SIMULATOR` set): the DiT blocks of each denoise step, the whole action head, and the
//! backbone's vision tower and LLM body. Same host code, same kernels, same arena upload on both.
//! `gr00t-megakernel` stays the CPU reference (its arenas and emulator); this crate implements
//! its device seam ([`TtnnOpener`], `gr00t_megakernel::device_backend`), which `gr00t-server`'s
//! feature `device` passes in.
//!
//! * [`worker`]: the ttnn worker process and its framed protocol, each exchange under a
//!   deadline that [`watchdog`] enforces, each program of a graph under the one [`deadline`]
//!   derives from what it is expected to take.
//! * [`backend`]: [`TtDevice`] (the open device holding the arena) and [`DeviceSteps`], the
//!   `DitDevice` over it; our kernels in `kernels/`.
//! * [`sfpu`]: our SFPU library (`kernels/sfpu/`: exp, reciprocal, rsqrt, SiLU, GELU-tanh in
//!   `TTI_SFP*` instructions) and the one-program element-wise op over it.
//! * [`rows`]: the on-device block pieces, each testable as one program: LayerNorm with the
//!   AdaLN modulation, attention's row softmax, a matmul's end (the K pieces, bias, GELU, the
//!   residual add); and [`attention`]: attention per head (QKᵀ, softmax, ·V).
//! * `graph`: a denoising step over them, its matmul-and-end steps packed by the plan into one
//!   program (docs/blackhole.md §12–13); [`task_table`]: the DRAM work lists the data-movement
//!   kernels read, since one program's exceed the runtime args.
//! * [`protocol`]: every worker request and answer as a type, with the schema
//!   (`protocol.json`) the worker checks each message against; [`program`]: a program as the
//!   worker launches it, every kernel's cores, words, CBs and semaphores, lowered from the
//!   graph's steps (`graph_steps`) by `lower` (docs/blackhole.md §22); [`registry`]: our
//!   kernels as values (file, role, CB ids, task-table CB), the one source of the ids the
//!   kernels and the programs share (§17). `one_program`: a kernel test's lone program as a
//!   graph of one program.

pub mod attention;
pub mod backend;
pub mod deadline;
mod gather;
pub(crate) mod graph;
mod graph_builder;
mod graph_norms;
mod graph_pack;
mod graph_steps;
mod head_graph;
mod llm_graph;
mod lower;
mod lower_chain;
mod lower_parts;
mod one_program;
pub mod program;
pub mod protocol;
pub mod registry;
mod rope;
pub mod rows;
pub mod sfpu;
pub mod task_table;
mod vision_graph;
pub mod watchdog;
pub mod worker;

mod opener;

pub use backend::{
    DeviceInfo, DeviceSteps, GraphOptions, MatmulTimes, SFPU, SfpuPlacement, StepHost, TtDevice,
};
pub use deadline::{DeadlineRule, Expected, ProgramDeadlines};
pub use opener::TtnnOpener;
pub use worker::{DEFAULT_PYTHON, TIMEOUT_VAR, TtnnWorker, WorkerConfig, WorkerError};
#[cfg(test)]
mod attention_tests;
#[cfg(test)]
mod backbone_tests;
#[cfg(test)]
mod gather_tests;
#[cfg(test)]
#[path = "../../gr00t-megakernel/src/golden_case.rs"]
#[allow(
    dead_code,
    reason = "the golden case's helpers are shared with gr00t-megakernel's tests"
)]
mod golden_case;
#[cfg(test)]
mod graph_tests;
#[cfg(test)]
mod head_graph_tests;
#[cfg(test)]
mod llm_graph_tests;
#[cfg(test)]
mod lower_tests;
#[cfg(test)]
mod norm_graph_tests;
#[cfg(test)]
mod protocol_tests;
#[cfg(test)]
mod registry_tests;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod rope_tests;
#[cfg(test)]
mod rows_tests;
#[cfg(test)]
mod sfpu_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod vision_graph_tests;
#[cfg(test)]
mod worker_replay_tests;
