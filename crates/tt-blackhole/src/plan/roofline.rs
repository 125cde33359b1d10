//! Roofline of one denoise step from the plan: bytes streamed (with the cross-attention K/V
//! weights in the per-step stream, as today, and hoisted out of it, computed once per
//! observation), DRAM-bound time, compute-bound time at the math fidelity our matmul kernel
//! really runs, L1 occupancy per role, and the seed's measured step time for scale.

use serde::{Deserialize, Serialize};

use super::{COMPUTE_CORES, CoreRole, MegakernelPlan, StepOp};
use crate::dims::{DitDims, WeightKind};
use crate::format::{ArenaDtype, TILE_ELEMS};

/// GDDR6 bandwidth of the p150a.
pub const DRAM_BYTES_PER_S: f64 = 512e9;
/// AI clock (P150A `asic_fmax`).
pub const CLOCK_HZ: f64 = 1.35e9;
/// Matrix engine: an 8x16 by 16x16 multiply per cycle at LoFi = 4096 FLOP/cycle/core.
pub const FLOP_PER_CYCLE_LOFI: f64 = 4096.0;
/// The seed's measured denoise step on a p150a (its model card: the 4-step denoise trace of
/// 15.3 ms, one persistent program over 110 cores streaming a 0.98 GB bfp8 arena, warm, batch
/// 1, median of 50). A measurement on silicon, not a bound: printed beside ours for scale.
pub const SEED_MS_PER_STEP: f64 = 3.84;

/// The FPU's math fidelity: how many passes a multiply takes over the mantissa bits (LoFi one,
/// HiFi4 four); the matrix engine's throughput divides by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MathFidelity {
    /// One pass (the high bits of each operand).
    LoFi,
    /// Two passes.
    HiFi2,
    /// Three passes.
    HiFi3,
    /// Four passes: every mantissa bit of both operands.
    HiFi4,
}

impl MathFidelity {
    /// Passes per multiply.
    pub const fn phases(self) -> f64 {
        match self {
            MathFidelity::LoFi => 1.0,
            MathFidelity::HiFi2 => 2.0,
            MathFidelity::HiFi3 => 3.0,
            MathFidelity::HiFi4 => 4.0,
        }
    }

    /// The name ttnn uses (`ttnn.MathFidelity.HiFi4`).
    pub const fn name(self) -> &'static str {
        match self {
            MathFidelity::LoFi => "LoFi",
            MathFidelity::HiFi2 => "HiFi2",
            MathFidelity::HiFi3 => "HiFi3",
            MathFidelity::HiFi4 => "HiFi4",
        }
    }
}

/// The fidelity our matmul kernel (`matmul_share.cpp`) runs at, whatever the weight format: the
/// device backend's compute config asks for HiFi4 (with an fp32 destination), since the
/// emulator it is checked against multiplies the bf16 activations by the decoded weights
/// exactly. The roofline's compute bound uses this, not the format's usual pairing.
pub const KERNEL_FIDELITY: MathFidelity = MathFidelity::HiFi4;

/// Math fidelity tt-metal pairs with each weight format (GEMM_FLOPS report): bf16 → HiFi4,
/// bfp8_b → HiFi2, bfp4_b → LoFi. What a kernel tuned for speed would run; reported beside
/// [`KERNEL_FIDELITY`] to show what the choice costs.
pub fn paired_fidelity(dtype: ArenaDtype) -> MathFidelity {
    match dtype {
        ArenaDtype::Bf16 => MathFidelity::HiFi4,
        ArenaDtype::Bfp8B => MathFidelity::HiFi2,
        ArenaDtype::Bfp4B => MathFidelity::LoFi,
    }
}

/// Matrix-engine peak over all compute cores at `fidelity`, FLOP/s.
pub fn peak_flops(fidelity: MathFidelity) -> f64 {
    COMPUTE_CORES as f64 * FLOP_PER_CYCLE_LOFI * CLOCK_HZ / fidelity.phases()
}

/// Peak L1 use of one core role.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct L1Use {
    /// The role, snake_case (`compute`, `phase`).
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
    /// Weight bytes each step streams today (the whole arena, once).
    pub weight_bytes_per_step: u64,
    /// Bytes of the cross blocks' K/V weights: they depend only on the observation, so their
    /// products can be computed once per observation instead of once per step.
    pub cross_kv_bytes: u64,
    /// Weight bytes per step with the cross K/V hoisted (`weight_bytes_per_step -
    /// cross_kv_bytes`).
    pub weight_bytes_per_step_kv_hoisted: u64,
    /// Activation traffic per step (bf16 token stream in and out of every op), for scale.
    pub activation_bytes_per_step: u64,
    /// Microseconds to stream the arena once at [`DRAM_BYTES_PER_S`].
    pub dram_bound_us_per_step: f64,
    /// The same with the cross K/V hoisted.
    pub dram_bound_us_per_step_kv_hoisted: f64,
    /// Useful FLOPs (M = 51 / context / 1 token rows).
    pub flops_per_step: f64,
    /// FLOPs the engine executes with M, K, N padded to whole tiles.
    pub tile_flops_per_step: f64,
    /// Of `tile_flops_per_step`, the cross K/V products (once per observation when hoisted).
    pub cross_kv_tile_flops: f64,
    /// Of `tile_flops_per_step`, the AdaLN products (once per timestep and device as run).
    pub ada_tile_flops: f64,
    /// The fidelity our kernels run ([`KERNEL_FIDELITY`]).
    pub fidelity: MathFidelity,
    /// Matrix-engine peak over all compute cores at `fidelity`, FLOP/s.
    pub peak_flops: f64,
    /// Microseconds for `tile_flops_per_step` at `peak_flops`.
    pub compute_bound_us_per_step: f64,
    /// The fidelity tt-metal pairs with `dtype` ([`paired_fidelity`]).
    pub paired_fidelity: MathFidelity,
    /// Microseconds for `tile_flops_per_step` at the paired fidelity's peak.
    pub compute_bound_us_per_step_paired: f64,
    /// `"dram"` or `"compute"`: whichever bound is larger (at [`KERNEL_FIDELITY`], K/V streamed).
    pub bound: String,
    /// Euler steps per action chunk (4).
    pub steps: usize,
    /// Bound for one action chunk, milliseconds: `steps` times the larger per-step bound.
    pub bound_ms_per_chunk: f64,
    /// The same with the cross K/V hoisted: their bytes and FLOPs once per chunk, the rest
    /// every step.
    pub bound_ms_per_chunk_kv_hoisted: f64,
    /// Bytes of the AdaLN weights: their products depend on the timestep alone, and a
    /// forward's timesteps are the same every forward.
    pub ada_bytes: u64,
    /// Weight bytes per step as the device path runs it: the cross K/V once per observation,
    /// the AdaLN rows once per timestep and device (`weight_bytes_per_step - cross_kv_bytes -
    /// ada_bytes`).
    pub weight_bytes_per_step_as_run: u64,
    /// Microseconds to stream `weight_bytes_per_step_as_run` at [`DRAM_BYTES_PER_S`].
    pub dram_bound_us_per_step_as_run: f64,
    /// Bound for one action chunk as the device path runs it: each step's bytes and FLOPs
    /// without the K/V and AdaLN, the K/V once per chunk (the AdaLN rows are the device's,
    /// computed in its first forward), milliseconds.
    pub bound_ms_per_chunk_as_run: f64,
    /// The seed's measured step on a p150a ([`SEED_MS_PER_STEP`]), milliseconds.
    pub seed_ms_per_step: f64,
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
    let (mut flops, mut tile_flops, mut kv_flops, mut act_bytes) = (0f64, 0f64, 0f64, 0u64);
    let mut ada_flops = 0f64;
    for op in &plan.schedule {
        match *op {
            StepOp::Matmul {
                block,
                weight,
                m_tokens,
            } => {
                let [n, k] = d.torch_shape(block, weight);
                let padded = 2.0 * pad32(m_tokens) * pad32(k) * pad32(n);
                flops += 2.0 * (m_tokens * k * n) as f64;
                tile_flops += padded;
                if is_cross_kv(block, weight) {
                    kv_flops += padded;
                }
                if weight == WeightKind::AdaNorm {
                    ada_flops += padded;
                }
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
            StepOp::LayerNorm { .. } | StepOp::Residual { .. } => {}
        }
    }
    let (kv_params, ada_params) = hoistable_params(d);
    let bytes_of =
        |params: u64| params / TILE_ELEMS as u64 * plan.dtype.format().tile_bytes() as u64;
    let (kv_bytes, ada_bytes) = (bytes_of(kv_params), bytes_of(ada_params));
    let as_run_bytes = plan.arena_bytes - kv_bytes - ada_bytes;
    let hoisted_bytes = plan.arena_bytes - kv_bytes;
    let us = |bytes: u64| bytes as f64 / DRAM_BYTES_PER_S * 1e6;
    let peak = peak_flops(KERNEL_FIDELITY);
    let paired = paired_fidelity(plan.dtype);
    let dram_us = us(plan.arena_bytes);
    let compute_us = tile_flops / peak * 1e6;
    let steps = 4;
    // Hoisted: every step streams and multiplies all but the K/V; the K/V once per chunk.
    let step_hoisted_us = us(hoisted_bytes).max((tile_flops - kv_flops) / peak * 1e6);
    let kv_once_us = us(kv_bytes).max(kv_flops / peak * 1e6);
    let step_as_run_us = us(as_run_bytes).max((tile_flops - kv_flops - ada_flops) / peak * 1e6);
    Roofline {
        dtype: plan.dtype,
        arena_bytes: plan.arena_bytes,
        weight_bytes_per_step: plan.arena_bytes,
        cross_kv_bytes: kv_bytes,
        weight_bytes_per_step_kv_hoisted: hoisted_bytes,
        activation_bytes_per_step: act_bytes,
        dram_bound_us_per_step: dram_us,
        dram_bound_us_per_step_kv_hoisted: us(hoisted_bytes),
        flops_per_step: flops,
        tile_flops_per_step: tile_flops,
        cross_kv_tile_flops: kv_flops,
        ada_tile_flops: ada_flops,
        fidelity: KERNEL_FIDELITY,
        peak_flops: peak,
        compute_bound_us_per_step: compute_us,
        paired_fidelity: paired,
        compute_bound_us_per_step_paired: tile_flops / peak_flops(paired) * 1e6,
        bound: if dram_us >= compute_us {
            "dram".into()
        } else {
            "compute".into()
        },
        steps,
        bound_ms_per_chunk: dram_us.max(compute_us) * steps as f64 / 1e3,
        bound_ms_per_chunk_kv_hoisted: (step_hoisted_us * steps as f64 + kv_once_us) / 1e3,
        ada_bytes,
        weight_bytes_per_step_as_run: as_run_bytes,
        dram_bound_us_per_step_as_run: us(as_run_bytes),
        bound_ms_per_chunk_as_run: (step_as_run_us * steps as f64 + kv_once_us) / 1e3,
        seed_ms_per_step: SEED_MS_PER_STEP,
        compute_cores: COMPUTE_CORES,
        l1: l1_use(plan),
    }
}

fn is_cross_kv(block: usize, weight: WeightKind) -> bool {
    matches!(weight, WeightKind::K | WeightKind::V) && DitDims::is_cross(block)
}

/// Peak L1 use per core role, in grid order of first appearance.
fn l1_use(plan: &MegakernelPlan) -> Vec<L1Use> {
    let mut l1: Vec<L1Use> = Vec::new();
    for c in &plan.cores {
        let role = match c.role {
            CoreRole::Compute { .. } => "compute",
            CoreRole::Phase => "phase",
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
    l1
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
        let mb = |b: u64| b as f64 / 1e6;
        let mut s = format!(
            "arena {dtype}: {ab} B ({gb:.3} GB) streamed per step; cross K/V {kv:.1} MB of it\n\
             DRAM-bound: {dram:.1} us/step at 512 GB/s ({hoist:.1} us with the cross K/V hoisted, \
             {hb:.1} MB/step)\n\
             compute: {tf:.2} GFLOP/step with tile padding ({uf:.2} useful), peak {peak:.0} TFLOP/s \
             ({fid}, what our matmul kernel runs; {cores} cores) -> {cu:.1} us/step \
             ({pfid}, the format's usual pairing: {pu:.1} us/step)\n\
             bound: {bound}; per 4-step chunk {chunk:.2} ms ({chunk_h:.2} ms with the K/V once per chunk)\n\
             as the device path runs it (the K/V once per observation, the AdaLN {ada:.1} MB once per timestep and device): \
             {run:.1} MB/step, DRAM-bound {run_us:.1} us/step, {chunk_r:.2} ms per chunk\n\
             the seed, measured on a p150a: {seed:.2} ms/step ({r:.2}x this bound, {rh:.2}x the K/V-hoisted one, {rr:.2}x the one as run)\n",
            ada = mb(self.ada_bytes),
            run = mb(self.weight_bytes_per_step_as_run),
            run_us = self.dram_bound_us_per_step_as_run,
            chunk_r = self.bound_ms_per_chunk_as_run,
            rr = self.seed_ms_per_step * 1e3
                / (self.bound_ms_per_chunk_as_run * 1e3 / self.steps as f64),
            dtype = self.dtype,
            ab = self.arena_bytes,
            gb = self.arena_bytes as f64 / 1e9,
            kv = mb(self.cross_kv_bytes),
            dram = self.dram_bound_us_per_step,
            hoist = self.dram_bound_us_per_step_kv_hoisted,
            hb = mb(self.weight_bytes_per_step_kv_hoisted),
            tf = self.tile_flops_per_step / 1e9,
            uf = self.flops_per_step / 1e9,
            peak = self.peak_flops / 1e12,
            fid = self.fidelity.name(),
            cores = self.compute_cores,
            cu = self.compute_bound_us_per_step,
            pfid = self.paired_fidelity.name(),
            pu = self.compute_bound_us_per_step_paired,
            bound = self.bound,
            chunk = self.bound_ms_per_chunk,
            chunk_h = self.bound_ms_per_chunk_kv_hoisted,
            seed = self.seed_ms_per_step,
            r = self.seed_ms_per_step * 1e3
                / self
                    .dram_bound_us_per_step
                    .max(self.compute_bound_us_per_step),
            rh = self.seed_ms_per_step * 1e3
                / self.dram_bound_us_per_step_kv_hoisted.max(
                    (self.tile_flops_per_step - self.cross_kv_tile_flops) / self.peak_flops * 1e6
                ),
        );
        for u in &self.l1 {
            if u.max_bytes == 0 {
                // Phase cores: their circular buffers are the phase's, set per program.
                s.push_str(&format!(
                    "L1 {:<14} x{:<3} circular buffers set per program (a LayerNorm, attention or end)\n",
                    u.role, u.cores
                ));
                continue;
            }
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
