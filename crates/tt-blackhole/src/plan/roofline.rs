//! Roofline of one denoise step from the plan: bytes streamed, DRAM-bound time, compute-bound
//! time at the documented matrix-engine peak, and L1 occupancy per role.

use serde::{Deserialize, Serialize};

use super::{COMPUTE_CORES, CoreRole, MegakernelPlan, StepOp};
use crate::dims::{DitDims, WeightKind};
use crate::format::ArenaDtype;

/// GDDR6 bandwidth of the p150a.
pub const DRAM_BYTES_PER_S: f64 = 512e9;
/// AI clock (P150A `asic_fmax`).
pub const CLOCK_HZ: f64 = 1.35e9;
/// Matrix engine: an 8x16 by 16x16 multiply per cycle at LoFi = 4096 FLOP/cycle/core.
pub const FLOP_PER_CYCLE_LOFI: f64 = 4096.0;

/// Math fidelity tt-metal pairs with each weight format (GEMM_FLOPS report): bf16 → HiFi4,
/// bfp8_b → HiFi2, bfp4_b → LoFi. The engine's throughput divides by the phase count.
pub fn fidelity(dtype: ArenaDtype) -> (&'static str, f64) {
    match dtype {
        ArenaDtype::Bf16 => ("HiFi4", 4.0),
        ArenaDtype::Bfp8B => ("HiFi2", 2.0),
        ArenaDtype::Bfp4B => ("LoFi", 1.0),
    }
}

/// Peak L1 use of one core role.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct L1Use {
    /// The role, snake_case (`dram_reader`, `compute`, …).
    pub role: String,
    /// Cores with this role.
    pub cores: usize,
    /// Largest circular-buffer L1 use among those cores, in bytes.
    pub max_bytes: usize,
    /// Per-core L1 budget in bytes ([`super::L1_BUDGET`]).
    pub budget: usize,
    /// `max_bytes / budget`.
    pub max_fraction: f64,
}

/// Time bounds of one denoise step and of an action chunk, from the plan (see [`roofline`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Roofline {
    /// Storage format of the arena.
    pub dtype: ArenaDtype,
    /// Bytes of the whole arena.
    pub arena_bytes: u64,
    /// Weight bytes each step streams (the whole arena, once).
    pub weight_bytes_per_step: u64,
    /// Activation traffic per step (bf16 token stream in and out of every op), for scale.
    pub activation_bytes_per_step: u64,
    /// Microseconds to stream the arena once at [`DRAM_BYTES_PER_S`].
    pub dram_bound_us_per_step: f64,
    /// Useful FLOPs (M = 51 / context / 1 token rows).
    pub flops_per_step: f64,
    /// FLOPs the engine executes with M, K, N padded to whole tiles.
    pub tile_flops_per_step: f64,
    /// Math fidelity paired with `dtype` (`HiFi4`, `HiFi2`, `LoFi`); see [`fidelity`].
    pub fidelity: String,
    /// Matrix-engine peak over all compute cores at that fidelity, FLOP/s.
    pub peak_flops: f64,
    /// Microseconds for `tile_flops_per_step` at `peak_flops`.
    pub compute_bound_us_per_step: f64,
    /// `"dram"` or `"compute"`: whichever bound is larger.
    pub bound: String,
    /// Euler steps per action chunk (4).
    pub steps: usize,
    /// DRAM-bound milliseconds for one action chunk (`steps` steps).
    pub dram_bound_ms_per_chunk: f64,
    /// Compute cores the peak counts.
    pub compute_cores: usize,
    /// Peak L1 use per core role, in grid order of first appearance.
    pub l1: Vec<L1Use>,
}

fn pad32(x: usize) -> f64 {
    (x.div_ceil(32) * 32) as f64
}

/// The roofline of `plan` (4 Euler steps per action chunk).
pub fn roofline(plan: &MegakernelPlan) -> Roofline {
    let d = &plan.dims;
    let (mut flops, mut tile_flops, mut act_bytes) = (0f64, 0f64, 0u64);
    for op in &plan.schedule {
        match *op {
            StepOp::Matmul {
                block,
                weight,
                m_tokens,
            } => {
                let [n, k] = d.torch_shape(block, weight);
                flops += 2.0 * (m_tokens * k * n) as f64;
                tile_flops += 2.0 * pad32(m_tokens) * pad32(k) * pad32(n);
                act_bytes += 2 * (m_tokens * (k + n)) as u64;
            }
            StepOp::Attention { kv_tokens, .. } => {
                // QK^T and PV over all heads.
                let w = d.width();
                flops += 4.0 * (d.sa_tokens * kv_tokens * w) as f64;
                tile_flops += 4.0
                    * pad32(d.sa_tokens)
                    * pad32(kv_tokens)
                    * pad32(d.head_dim)
                    * d.num_heads as f64;
            }
            StepOp::LayerNormPartials { .. } | StepOp::Residual { .. } => {}
        }
    }
    let (fid, div) = fidelity(plan.dtype);
    let peak = COMPUTE_CORES as f64 * FLOP_PER_CYCLE_LOFI * CLOCK_HZ / div;
    let dram_us = plan.arena_bytes as f64 / DRAM_BYTES_PER_S * 1e6;
    let compute_us = tile_flops / peak * 1e6;
    let mut l1: Vec<L1Use> = Vec::new();
    for c in &plan.cores {
        let role = match c.role {
            CoreRole::DramReader { .. } => "dram_reader",
            CoreRole::Compute { .. } => "compute",
            CoreRole::Sequencer => "sequencer",
            CoreRole::NormReducer => "norm_reducer",
            CoreRole::OutputGather { .. } => "output_gather",
            CoreRole::Spare => "spare",
        };
        match l1.iter_mut().find(|u| u.role == role) {
            Some(u) => {
                u.cores += 1;
                u.max_bytes = u.max_bytes.max(c.l1_bytes);
            }
            None => l1.push(L1Use {
                role: role.into(),
                cores: 1,
                max_bytes: c.l1_bytes,
                budget: plan.l1_budget,
                max_fraction: 0.0,
            }),
        }
    }
    l1.iter_mut()
        .for_each(|u| u.max_fraction = u.max_bytes as f64 / u.budget as f64);
    let steps = 4;
    Roofline {
        dtype: plan.dtype,
        arena_bytes: plan.arena_bytes,
        weight_bytes_per_step: plan.arena_bytes,
        activation_bytes_per_step: act_bytes,
        dram_bound_us_per_step: dram_us,
        flops_per_step: flops,
        tile_flops_per_step: tile_flops,
        fidelity: fid.into(),
        peak_flops: peak,
        compute_bound_us_per_step: compute_us,
        bound: if dram_us >= compute_us {
            "dram".into()
        } else {
            "compute".into()
        },
        steps,
        dram_bound_ms_per_chunk: dram_us * steps as f64 / 1e3,
        compute_cores: COMPUTE_CORES,
        l1,
    }
}

/// Parameters of weights a smarter schedule would not stream every step: cross-block K/V only
/// depend on the observation (computed once per chunk), AdaLN only on the timestep.
pub fn hoistable_params(d: &DitDims) -> (u64, u64) {
    let (mut kv_cross, mut ada) = (0u64, 0u64);
    for w in d.weights() {
        let p = (w.shape[0] * w.shape[1]) as u64;
        match w.kind {
            WeightKind::K | WeightKind::V if DitDims::is_cross(w.block) => kv_cross += p,
            WeightKind::AdaNorm => ada += p,
            _ => {}
        }
    }
    (kv_cross, ada)
}

impl Roofline {
    /// A short human-readable report.
    pub fn report(&self) -> String {
        let mut s = format!(
            "arena {dtype}: {ab} B ({gb:.3} GB) streamed per step\n\
             DRAM-bound: {dram:.1} us/step at 512 GB/s, {chunk:.2} ms per 4-step chunk\n\
             compute: {tf:.2} GFLOP/step with tile padding ({uf:.2} useful), peak {peak:.0} TFLOP/s ({fid}, {cores} cores) \
             -> {cu:.1} us/step\nbound: {bound}\n",
            dtype = self.dtype,
            ab = self.arena_bytes,
            gb = self.arena_bytes as f64 / 1e9,
            dram = self.dram_bound_us_per_step,
            chunk = self.dram_bound_ms_per_chunk,
            tf = self.tile_flops_per_step / 1e9,
            uf = self.flops_per_step / 1e9,
            peak = self.peak_flops / 1e12,
            fid = self.fidelity,
            cores = self.compute_cores,
            cu = self.compute_bound_us_per_step,
            bound = self.bound,
        );
        for u in &self.l1 {
            s.push_str(&format!(
                "L1 {:<14} x{:<3} max {:>8} B of {} ({:.1}%)\n",
                u.role,
                u.cores,
                u.max_bytes,
                u.budget,
                100.0 * u.max_fraction
            ));
        }
        s
    }
}
