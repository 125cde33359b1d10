//! The Qwen3 text layers of the Qwen3-VL backbone up to `select_layer`: RMSNorm, GQA causal
//! attention with per-head q/k RMSNorm and M-RoPE, SwiGLU MLP, and the deepstack additions on
//! the image-token rows after the first layers. No final norm: GR00T N1.7 takes the last kept
//! layer's output as it leaves the layer.

use super::config::TextCfg;
use crate::model::Taps;
use crate::model::layers::add_assign;
use crate::model::qwen3_layer::{Qwen3Dims, Qwen3Layer, Qwen3Scratch, embed_rows, load_stack};
use crate::weights::{Tensor, WeightError, WeightSource};

const PREFIX: &str = "backbone.model.model.language_model";

/// The deepstack injection: after layer `j < features.len()`, row `r` of `features[j]`
/// (`[rows.len(), hidden]`) is added to token `rows[r]` (the image-token rows, in order).
#[derive(Debug, Clone, Copy)]
pub struct Deepstack<'a> {
    /// Token indices of the image tokens.
    pub rows: &'a [usize],
    /// One `[rows.len(), hidden]` feature per deepstack merger, in merger order.
    pub features: &'a [Vec<f32>],
}

/// Token embedding table and the kept decoder layers.
pub struct TextLayers {
    cfg: TextCfg,
    embed: Tensor,
    layers: Vec<Qwen3Layer>,
}

fn dims(cfg: &TextCfg) -> Qwen3Dims {
    Qwen3Dims {
        hidden: cfg.hidden_size,
        heads: cfg.num_attention_heads,
        kv_heads: cfg.num_key_value_heads,
        head_dim: cfg.head_dim,
        ff: cfg.intermediate_size,
        eps: cfg.rms_norm_eps as f32,
        attention_bias: cfg.attention_bias,
    }
}

impl TextLayers {
    /// Loads `embed_tokens` and layers `0..n_layers` of `backbone.model.model.language_model`.
    pub fn load(
        ws: &dyn WeightSource,
        cfg: &TextCfg,
        n_layers: usize,
    ) -> Result<Self, WeightError> {
        let (embed, layers) = load_stack(ws, PREFIX, cfg.vocab_size, &dims(cfg), n_layers)?;
        Ok(Self {
            cfg: cfg.clone(),
            embed,
            layers,
        })
    }

    /// Embedding rows of `ids` (the caller has checked `id < vocab_size`).
    pub fn embed(&self, ids: &[u32]) -> Vec<f32> {
        embed_rows(&self.embed, self.cfg.hidden_size, ids)
    }

    /// `inputs_embeds` `[s, d]` through the kept layers, with the deepstack additions of
    /// `visual`. `cos`/`sin` are the M-RoPE tables `[s, head_dim]`.
    pub fn forward(
        &self,
        mut x: Vec<f32>,
        s: usize,
        cos: &[f32],
        sin: &[f32],
        visual: Deepstack<'_>,
        taps: &mut Taps,
    ) -> Vec<f32> {
        let d = self.cfg.hidden_size;
        let dims = dims(&self.cfg);
        let mut scratch = Qwen3Scratch::new(s, &dims);
        for (i, l) in self.layers.iter().enumerate() {
            taps.emit_with(|| format!("llm.layer{i}.input"), &[1, s, d], &x);
            l.forward(&mut x, s, &dims, cos, sin, &mut scratch);
            taps.emit_with(|| format!("llm.layer{i}.output"), &[1, s, d], &x);
            if let Some(f) = visual.features.get(i) {
                for (r, &row) in visual.rows.iter().enumerate() {
                    add_assign(&mut x[row * d..][..d], &f[r * d..][..d]);
                }
            }
        }
        x
    }
}
