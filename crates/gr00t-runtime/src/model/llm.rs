//! Qwen3 body truncated at `select_layer`: token embedding, decoder layers (RMSNorm, GQA with
//! per-head q/k RMSNorm before NEOX RoPE, SwiGLU) and the final RMSNorm. No lm_head.

use super::layers::NormParams;
use super::qwen3_layer::{Qwen3Dims, Qwen3Layer, Qwen3Scratch, embed_rows, load_stack};
use super::taps::Taps;
use crate::config::TextConfig;
use crate::cpu::norms::rms_norm;
use crate::weights::{Tensor, WeightError, WeightSource};

const PREFIX: &str = "backbone.model.language_model.model";

/// Token embedding table + the kept decoder layers + final norm.
pub struct Qwen3Body {
    cfg: TextConfig,
    embed: Tensor,
    layers: Vec<Qwen3Layer>,
    norm: NormParams,
}

impl Qwen3Body {
    /// Loads the embedding and layers `0..n_layers` (= `select_layer`).
    pub fn load(
        ws: &dyn WeightSource,
        cfg: &TextConfig,
        n_layers: usize,
    ) -> Result<Self, WeightError> {
        let d = cfg.hidden_size;
        let (embed, layers) =
            load_stack(ws, PREFIX, cfg.vocab_size, &Qwen3Dims::of(cfg), n_layers)?;
        let norm = NormParams::rms_norm(ws, &format!("{PREFIX}.norm"), d)?;
        Ok(Self {
            cfg: cfg.clone(),
            embed,
            layers,
            norm,
        })
    }

    /// Residual-stream width (`hidden_size`).
    pub fn hidden(&self) -> usize {
        self.cfg.hidden_size
    }
    /// Rows of the token-embedding table; valid ids are below it.
    pub fn vocab(&self) -> usize {
        self.cfg.vocab_size
    }

    /// Embedding rows of `ids` (the caller has checked `id < vocab`).
    pub fn embed(&self, ids: &[u32]) -> Vec<f32> {
        embed_rows(&self.embed, self.cfg.hidden_size, ids)
    }

    /// `inputs_embeds` `[s, d]` → final-normed hidden states of the last kept layer `[s, d]`.
    pub fn forward(&self, mut x: Vec<f32>, s: usize, taps: &mut Taps) -> Vec<f32> {
        let cfg = &self.cfg;
        let d = cfg.hidden_size;
        let dims = Qwen3Dims::of(cfg);
        taps.emit("llm.inputs_embeds", &[1, s, d], &x);
        taps.emit("llm.hidden_states.0", &[1, s, d], &x);
        let (cos, sin) = rope_tables(s, cfg.head_dim, cfg.rope_theta);
        let mut scratch = Qwen3Scratch::new(s, &dims);
        for (i, l) in self.layers.iter().enumerate() {
            l.forward(&mut x, s, &dims, &cos, &sin, &mut scratch);
            taps.emit_with(|| format!("llm.layer{i}.output"), &[1, s, d], &x);
            if i + 1 < self.layers.len() {
                taps.emit_with(|| format!("llm.hidden_states.{}", i + 1), &[1, s, d], &x);
            }
        }
        let eps = dims.eps;
        rms_norm(&mut x, d, &self.norm.w, eps);
        taps.emit_with(
            || format!("llm.hidden_states.{}", self.layers.len()),
            &[1, s, d],
            &x,
        );
        x
    }
}

/// cos/sin `[s, hd]` of the default RoPE, rounded like the f32 reference: inv_freq in f32,
/// angle = pos·inv_freq in f32, cos/sin of that angle. Public: the device's RoPE tables
/// (gr00t-megakernel's `device::rope`) are these, padded to its head layout.
pub fn rope_tables(s: usize, hd: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
    let half = hd / 2;
    let inv: Vec<f32> = (0..half)
        .map(|i| (1.0 / theta.powf((2 * i) as f64 / hd as f64)) as f32)
        .collect();
    let mut cos = vec![0.0f32; s * hd];
    let mut sin = vec![0.0f32; s * hd];
    for p in 0..s {
        for i in 0..half {
            let ang = (p as f32 * inv[i]) as f64;
            let (sn, cs) = ang.sin_cos();
            cos[p * hd + i] = cs as f32;
            cos[p * hd + i + half] = cs as f32;
            sin[p * hd + i] = sn as f32;
            sin[p * hd + i + half] = sn as f32;
        }
    }
    (cos, sin)
}
