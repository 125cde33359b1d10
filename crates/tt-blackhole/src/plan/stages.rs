//! Roofline per model stage of the whole forward (vision, adapter, LLM, denoise): the weight
//! bytes each streams from DRAM, the FLOPs the matrix engine executes (M, K, N padded to whole
//! tiles; a causal attention skips the tiles above its diagonal), the bound that follows, and
//! the seed's measured time for the same stage on a p150a beside it for scale.

use serde::{Deserialize, Serialize};

use super::roofline::{DRAM_BYTES_PER_S, KERNEL_FIDELITY, MathFidelity, Roofline, peak_flops};
use crate::backbone::{Attention, StageWork};
use crate::format::{ArenaDtype, TILE_ELEMS};

/// The seed's traces on a p150a (its model card: warm, batch 1, median of 50), milliseconds.
/// Measurements on silicon, not bounds: printed beside ours for scale.
pub const SEED_VISION_MS: f64 = 10.8;
/// The seed's LLM trace (Qwen3 up to `select_layer`).
pub const SEED_LLM_MS: f64 = 9.6;
/// The seed's adapter trace (projector and vlln).
pub const SEED_ADAPTER_MS: f64 = 2.2;
/// The seed's 4-step denoise trace (one persistent program).
pub const SEED_DENOISE_MS: f64 = 15.3;
/// The seed's whole predict end to end: host encode 1.4 + upload 1.4 + the traces 37.8 +
/// readback and decode 0.1.
pub const SEED_FORWARD_MS: f64 = 40.7;

/// One stage's bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageRoofline {
    /// `vision`, `adapter`, `llm` or `denoise`.
    pub name: String,
    /// Format of the stage's weights.
    pub dtype: ArenaDtype,
    /// Bytes read from DRAM per forward (weights once, gathered rows).
    pub dram_bytes: u64,
    /// Useful FLOPs.
    pub flops: f64,
    /// FLOPs the engine executes with tile padding.
    pub tile_flops: f64,
    /// The fidelity the FLOPs are counted at ([`KERNEL_FIDELITY`]).
    pub fidelity: MathFidelity,
    /// Microseconds to stream `dram_bytes` at [`DRAM_BYTES_PER_S`].
    pub dram_bound_us: f64,
    /// Microseconds for `tile_flops` at the peak of `fidelity`.
    pub compute_bound_us: f64,
    /// `"dram"` or `"compute"`.
    pub bound: String,
    /// The larger bound, milliseconds.
    pub bound_ms: f64,
    /// The seed's measured time for this stage on a p150a, milliseconds.
    pub seed_ms: f64,
}

/// Every stage of a forward and their sum.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForwardRoofline {
    /// In the order a forward runs them.
    pub stages: Vec<StageRoofline>,
    /// Sum of the stages' bounds, milliseconds (the host's encode, upload and decode are not in it).
    pub bound_ms: f64,
    /// The seed's whole predict ([`SEED_FORWARD_MS`]).
    pub seed_ms: f64,
}

fn pad32(x: usize) -> f64 {
    (x.div_ceil(32) * 32) as f64
}

/// FLOPs of QKᵀ and PV over every head: useful, and as whole tiles (causal: the tiles on and
/// below the diagonal only).
fn attention_flops(a: &Attention) -> (f64, f64) {
    let per_pair = 4.0 * a.head_dim as f64 * a.heads as f64;
    if !a.causal {
        let useful = per_pair * (a.q_tokens * a.kv_tokens) as f64;
        return (useful, per_pair * pad32(a.q_tokens) * pad32(a.kv_tokens));
    }
    // Query i sees keys 0..=i (square: the prompt attends to itself).
    let n = a.q_tokens;
    let useful = per_pair * (n * (n + 1) / 2) as f64;
    let t = n.div_ceil(32);
    let tiles = (t * (t + 1) / 2) as f64 * 32.0 * 32.0;
    (useful, per_pair * tiles)
}

/// The bounds of one stage from its work.
pub fn stage_roofline(work: &StageWork, seed_ms: f64) -> StageRoofline {
    let tile_bytes = work.dtype.format().tile_bytes() as f64;
    let (mut flops, mut tile_flops, mut weight_bytes) = (0f64, 0f64, 0f64);
    for g in &work.gemms {
        flops += 2.0 * (g.m * g.k * g.n) as f64;
        tile_flops += 2.0 * pad32(g.m) * pad32(g.k) * pad32(g.n);
        weight_bytes += pad32(g.k) * pad32(g.n) / TILE_ELEMS as f64 * tile_bytes;
    }
    for a in &work.attentions {
        let (useful, tiles) = attention_flops(a);
        flops += useful;
        tile_flops += tiles;
    }
    let dram_bytes = weight_bytes as u64 + work.extra_dram_bytes;
    let dram_bound_us = dram_bytes as f64 / DRAM_BYTES_PER_S * 1e6;
    let compute_bound_us = tile_flops / peak_flops(KERNEL_FIDELITY) * 1e6;
    StageRoofline {
        name: work.name.clone(),
        dtype: work.dtype,
        dram_bytes,
        flops,
        tile_flops,
        fidelity: KERNEL_FIDELITY,
        dram_bound_us,
        compute_bound_us,
        bound: bound_name(dram_bound_us, compute_bound_us).into(),
        bound_ms: dram_bound_us.max(compute_bound_us) / 1e3,
        seed_ms,
    }
}

fn bound_name(dram_us: f64, compute_us: f64) -> &'static str {
    if dram_us >= compute_us {
        "dram"
    } else {
        "compute"
    }
}

/// The denoise stage from the DiT plan's roofline, as the device path runs it (the cross K/V
/// once per observation, the AdaLN rows once per timestep): 4 steps. Its `flops` are every
/// step's useful FLOPs as the plan counts them; its bounds leave the hoisted products out.
pub fn denoise_stage(dit: &Roofline) -> StageRoofline {
    let steps = dit.steps as f64;
    // Each step streams and multiplies all but the hoisted weights; the cross K/V once per
    // observation (the AdaLN rows are the device's after its first forward).
    let dram_bytes = dit.weight_bytes_per_step_as_run * dit.steps as u64 + dit.cross_kv_bytes;
    let per_step_flops = dit.tile_flops_per_step - dit.cross_kv_tile_flops - dit.ada_tile_flops;
    let tile_flops = per_step_flops * steps + dit.cross_kv_tile_flops;
    let dram_bound_us = dram_bytes as f64 / DRAM_BYTES_PER_S * 1e6;
    let compute_bound_us = tile_flops / peak_flops(dit.fidelity) * 1e6;
    StageRoofline {
        name: "denoise".into(),
        dtype: dit.dtype,
        dram_bytes,
        flops: dit.flops_per_step * steps,
        tile_flops,
        fidelity: dit.fidelity,
        dram_bound_us,
        compute_bound_us,
        bound: bound_name(dram_bound_us, compute_bound_us).into(),
        bound_ms: dram_bound_us.max(compute_bound_us) / 1e3,
        seed_ms: SEED_DENOISE_MS,
    }
}

/// The whole forward: the backbone's stages (vision, adapter, llm, in that order, from
/// [`crate::backbone::BackboneDims::work`]) and the denoise.
pub fn forward_roofline(backbone: &[StageWork], dit: &Roofline) -> ForwardRoofline {
    let seed = |name: &str| match name {
        "vision" => SEED_VISION_MS,
        "adapter" => SEED_ADAPTER_MS,
        "llm" => SEED_LLM_MS,
        _ => f64::NAN,
    };
    let mut stages: Vec<StageRoofline> = backbone
        .iter()
        .map(|w| stage_roofline(w, seed(&w.name)))
        .collect();
    stages.push(denoise_stage(dit));
    ForwardRoofline {
        bound_ms: stages.iter().map(|s| s.bound_ms).sum(),
        stages,
        seed_ms: SEED_FORWARD_MS,
    }
}

impl ForwardRoofline {
    /// One line per stage and one for the forward: bytes, FLOPs, bound, the seed beside it.
    pub fn report(&self) -> String {
        let mut s = String::from(
            "per stage, computed (the backbone's weights streamed once per forward, the DiT's once \
             per step; FLOPs with tile padding at HiFi4):\n",
        );
        for st in &self.stages {
            s.push_str(&format!(
                "  {:<8} {:<7} {:>8.1} MB {:>8.1} GFLOP  dram {:>7.1} us  compute {:>7.1} us  \
                 bound {:<7} {:>6.2} ms   seed {:>5.1} ms ({:.1}x)\n",
                st.name,
                st.dtype.to_string(),
                st.dram_bytes as f64 / 1e6,
                st.tile_flops / 1e9,
                st.dram_bound_us,
                st.compute_bound_us,
                st.bound,
                st.bound_ms,
                st.seed_ms,
                st.seed_ms / st.bound_ms,
            ));
        }
        s.push_str(&format!(
            "  forward  {:.2} ms bound on the device (host encode, upload and decode not in it)   \
             seed {:.1} ms end to end ({:.1}x)\n",
            self.bound_ms,
            self.seed_ms,
            self.seed_ms / self.bound_ms
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backbone::Gemm;

    fn work(gemms: Vec<Gemm>, attentions: Vec<Attention>) -> StageWork {
        StageWork {
            name: "vision".into(),
            dtype: ArenaDtype::Bf16,
            gemms,
            attentions,
            extra_dram_bytes: 0,
        }
    }

    #[test]
    fn a_gemm_streams_its_weight_tiles_once() {
        let st = stage_roofline(
            &work(
                vec![Gemm {
                    m: 50,
                    k: 64,
                    n: 96,
                }],
                Vec::new(),
            ),
            1.0,
        );
        // 2 × 3 bf16 tiles of 2048 B; the rows pad to 64.
        assert_eq!(st.dram_bytes, 6 * 2048);
        assert_eq!(st.flops, 2.0 * 50.0 * 64.0 * 96.0);
        assert_eq!(st.tile_flops, 2.0 * 64.0 * 64.0 * 96.0);
        assert_eq!(st.bound, "dram");
        assert!((st.dram_bound_us - 12288.0 / DRAM_BYTES_PER_S * 1e6).abs() < 1e-12);
    }

    #[test]
    fn causal_attention_counts_the_tiles_on_and_below_the_diagonal() {
        let a = Attention {
            heads: 2,
            head_dim: 64,
            q_tokens: 70,
            kv_tokens: 70,
            causal: true,
        };
        let (useful, tiles) = attention_flops(&a);
        assert_eq!(useful, 4.0 * 64.0 * 2.0 * (70.0 * 71.0 / 2.0));
        // 3 tile rows: 6 of the 9 tile pairs.
        assert_eq!(tiles, 4.0 * 64.0 * 2.0 * 6.0 * 1024.0);
        let full = attention_flops(&Attention { causal: false, ..a });
        assert_eq!(full.1, 4.0 * 64.0 * 2.0 * 9.0 * 1024.0);
    }

    #[test]
    fn a_block_float_stage_streams_fewer_bytes() {
        let g = vec![Gemm {
            m: 32,
            k: 1024,
            n: 1024,
        }];
        let bf16 = stage_roofline(&work(g.clone(), Vec::new()), 1.0);
        let bfp8 = stage_roofline(
            &StageWork {
                dtype: ArenaDtype::Bfp8B,
                ..work(g, Vec::new())
            },
            1.0,
        );
        assert_eq!(bf16.dram_bytes, 1024 * 2048);
        assert_eq!(bfp8.dram_bytes, 1024 * 1088);
    }

    #[test]
    fn every_full_size_bound_is_below_the_seeds_measurement() {
        use crate::backbone::BackboneDims;
        use crate::dims::DitDims;
        let backbone = BackboneDims::FULL;
        let plan = crate::plan::build_plan(&DitDims::FULL, ArenaDtype::Bfp8B).unwrap();
        let dit = crate::plan::roofline::roofline(&plan);
        let f = forward_roofline(&backbone.work(ArenaDtype::Bf16), &dit);
        let names: Vec<&str> = f.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["vision", "adapter", "llm", "denoise"]);
        // A bound is what no kernel can beat: the seed's measured traces must lie above it.
        for st in &f.stages {
            assert!(st.bound_ms > 0.0 && st.bound_ms < st.seed_ms, "{st:?}");
        }
        // Qwen3's 16 layers in bf16 are 1.61 GB (805 M parameters): DRAM-bound at 3.15 ms.
        let llm = &f.stages[2];
        assert_eq!(llm.bound, "dram");
        assert!((llm.bound_ms - 3.147).abs() < 0.001, "{}", llm.bound_ms);
        // The denoise row agrees with the DiT roofline's chunk bound as run (that one takes the
        // larger bound per step, this one over the chunk: equal when one bound dominates).
        let denoise = &f.stages[3];
        assert_eq!(
            denoise.bound_ms * 1e3,
            denoise.dram_bound_us.max(denoise.compute_bound_us)
        );
        assert!(
            (denoise.bound_ms - dit.bound_ms_per_chunk_as_run).abs() < 0.05,
            "{} vs {}",
            denoise.bound_ms,
            dit.bound_ms_per_chunk_as_run
        );
        let sum: f64 = f.stages.iter().map(|s| s.bound_ms).sum();
        assert_eq!(f.bound_ms, sum);
        assert!(f.report().contains("seed  10.8 ms"), "{}", f.report());
    }
}
