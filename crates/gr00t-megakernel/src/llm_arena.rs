//! Qwen3's part of the backbone arena (issue 40): each kept layer's seven matrices (heads laid
//! out in whole tiles: `crate::head_layout`) and four RMS norms, the body's final norm, the
//! token-embedding table the device gathers the prompt's rows from, and the action head's vlln
//! (run where the features are made).

use std::ops::Range;

use tt_blackhole::bf16::f32_to_bf16_bits;
use tt_blackhole::format::ArenaDtype;

use gr00t_runtime::config::EagleConfig;
use gr00t_runtime::weights::WeightSource;

use crate::backbone_arena::{
    BackboneArena, BackboneArenaError, BackboneNorm, BackboneWeight, NormAffine, norm_affine,
};
use crate::head_layout::{padded_head, spread_head_columns, spread_head_rows};
use crate::packed::linear_with;

/// The checkpoint's prefix of the Qwen3 body.
const LLM: &str = "backbone.model.language_model.model";

/// One matrix of a Qwen3 decoder layer (no biases unless the config's `attention_bias`, and
/// then on q/k/v only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LlmMatrix {
    /// `self_attn.q_proj`: `[D, heads·hd]`.
    Q,
    /// `self_attn.k_proj`: `[D, kv_heads·hd]`.
    K,
    /// `self_attn.v_proj`: `[D, kv_heads·hd]`.
    V,
    /// `self_attn.o_proj` (the residual add follows): `[heads·hd, D]`.
    O,
    /// `mlp.gate_proj` (SiLU follows): `[D, ff]`.
    Gate,
    /// `mlp.up_proj` (times the gate): `[D, ff]`.
    Up,
    /// `mlp.down_proj` (the residual add follows): `[ff, D]`.
    Down,
}

impl LlmMatrix {
    /// Every matrix of a layer, in arena order.
    pub const ALL: [LlmMatrix; 7] = [
        LlmMatrix::Q,
        LlmMatrix::K,
        LlmMatrix::V,
        LlmMatrix::O,
        LlmMatrix::Gate,
        LlmMatrix::Up,
        LlmMatrix::Down,
    ];

    /// The checkpoint's module name inside a layer.
    fn module(self) -> &'static str {
        match self {
            LlmMatrix::Q => "self_attn.q_proj",
            LlmMatrix::K => "self_attn.k_proj",
            LlmMatrix::V => "self_attn.v_proj",
            LlmMatrix::O => "self_attn.o_proj",
            LlmMatrix::Gate => "mlp.gate_proj",
            LlmMatrix::Up => "mlp.up_proj",
            LlmMatrix::Down => "mlp.down_proj",
        }
    }
}

/// A token-embedding table as bf16 values (the checkpoint's format; 0.6 GB at full size, half
/// its f32 size), `[vocab, hidden]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedTable {
    /// Rows.
    pub vocab: usize,
    /// Columns.
    pub hidden: usize,
    /// The values' bf16 bits.
    pub bits: Vec<u16>,
}

impl EmbedTable {
    /// Rows `rows` as f32 values (what a put of them sends).
    pub fn rows(&self, rows: Range<usize>) -> Vec<f32> {
        self.bits[rows.start * self.hidden..rows.end * self.hidden]
            .iter()
            .map(|b| f32::from_bits(u32::from(*b) << 16))
            .collect()
    }
}

impl BackboneArena {
    /// Adds Qwen3 layers `layers` (below `select_layer`'s count, `llm_layers`): their seven
    /// matrices and four RMS norms each (γ; β zero).
    pub fn with_llm_layers(
        mut self,
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
        llm_layers: usize,
        layers: Range<usize>,
    ) -> Result<Self, BackboneArenaError> {
        let t = &cfg.text_config;
        if layers.end > llm_layers {
            return Err(BackboneArenaError::NoLayer {
                stage: "llm",
                asked: layers,
                layers: llm_layers,
            });
        }
        let (d, hd, ff) = (t.hidden_size, t.head_dim, t.intermediate_size);
        let (heads, kv_heads) = (t.num_attention_heads, t.num_key_value_heads);
        let (q_w, kv_w) = (heads * hd, kv_heads * hd);
        let hp = padded_head(hd).ok_or(BackboneArenaError::HeadWidth(hd))?;
        let eps = t.rms_norm_eps as f32;
        for i in layers {
            let l = format!("{LLM}.layers.{i}");
            for m in LlmMatrix::ALL {
                let (k, n, bias) = match m {
                    LlmMatrix::Q => (d, q_w, t.attention_bias),
                    LlmMatrix::K | LlmMatrix::V => (d, kv_w, t.attention_bias),
                    LlmMatrix::O => (q_w, d, false),
                    LlmMatrix::Gate | LlmMatrix::Up => (d, ff, false),
                    LlmMatrix::Down => (ff, d, false),
                };
                let name = format!("{l}.{}", m.module());
                let kn = linear_with(ws, &name, k, n, bias)?;
                // Heads in whole tiles (`crate::head_layout`).
                let kn = match m {
                    LlmMatrix::Q => spread_head_columns(kn, heads, hd, hp),
                    LlmMatrix::K | LlmMatrix::V => spread_head_columns(kn, kv_heads, hd, hp),
                    LlmMatrix::O => spread_head_rows(kn, heads, hd, hp),
                    _ => kn,
                };
                self.weights.push(BackboneWeight::Llm(i, m), &name, kn)?;
            }
            for (norm, module, n) in [
                (BackboneNorm::LlmIn(i), "input_layernorm", d),
                (BackboneNorm::LlmPost(i), "post_attention_layernorm", d),
                (BackboneNorm::LlmQ(i), "self_attn.q_norm", hd),
                (BackboneNorm::LlmK(i), "self_attn.k_norm", hd),
            ] {
                let gamma = ws.f32(&format!("{l}.{module}.weight"), &[n])?;
                let affine = NormAffine {
                    gamma,
                    beta: vec![0.0; n],
                    eps,
                };
                self.norms.push((norm, affine));
            }
        }
        Ok(self)
    }

    /// Adds Qwen3's token-embedding table (rounded to bf16 where the checkpoint is wider).
    pub fn with_llm_embedding(
        mut self,
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
    ) -> Result<Self, BackboneArenaError> {
        let t = &cfg.text_config;
        let (vocab, hidden) = (t.vocab_size, t.hidden_size);
        let table = ws.tensor(&format!("{LLM}.embed_tokens.weight"), &[vocab, hidden])?;
        let data = table.data();
        // Row by row: the full table in f32 would be 1.2 GB.
        let mut bits = Vec::with_capacity(vocab * hidden);
        for r in 0..vocab {
            bits.extend(
                data.slice(r * hidden, hidden)
                    .to_f32_vec()
                    .into_iter()
                    .map(f32_to_bf16_bits),
            );
        }
        self.embed = Some(EmbedTable {
            vocab,
            hidden,
            bits,
        });
        Ok(self)
    }

    /// The whole backbone as the device runs it: the vision stage, Qwen3's embedding, layers
    /// `0..select_layer` and final norm, and the action head's `vlln` when `vlln_dim` is given.
    pub fn whole(
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
        select_layer: usize,
        vlln_dim: Option<usize>,
        dtype: ArenaDtype,
    ) -> Result<Self, BackboneArenaError> {
        let arena = BackboneArena::vision_stage(ws, cfg, dtype)?
            .with_llm_embedding(ws, cfg)?
            .with_llm_layers(ws, cfg, select_layer, 0..select_layer)?
            .with_llm_final_norm(ws, cfg)?;
        match vlln_dim {
            Some(d) => arena.with_vlln(ws, d),
            None => Ok(arena),
        }
    }

    /// The Qwen3 layers added, in order (`0..n`).
    pub fn llm_layers(&self) -> usize {
        self.weights
            .entries
            .iter()
            .filter(|e| matches!(e.weight, BackboneWeight::Llm(_, LlmMatrix::Q)))
            .count()
    }

    /// Adds the body's final RMSNorm (what `select_layer`'s hidden states go through).
    pub fn with_llm_final_norm(
        mut self,
        ws: &dyn WeightSource,
        cfg: &EagleConfig,
    ) -> Result<Self, BackboneArenaError> {
        let t = &cfg.text_config;
        let gamma = ws.f32(&format!("{LLM}.norm.weight"), &[t.hidden_size])?;
        self.norms.push((
            BackboneNorm::LlmFinal,
            NormAffine {
                beta: vec![0.0; gamma.len()],
                gamma,
                eps: t.rms_norm_eps as f32,
            },
        ));
        Ok(self)
    }

    /// Adds the action head's `vlln` LayerNorm over the `dim`-wide features (eps 1e-5, as the
    /// reference's `apply_vlln`).
    pub fn with_vlln(
        mut self,
        ws: &dyn WeightSource,
        dim: usize,
    ) -> Result<Self, BackboneArenaError> {
        let affine = norm_affine(ws, "action_head.vlln", dim, 1e-5)?;
        self.norms.push((BackboneNorm::Vlln, affine));
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden_case::case_dir;
    use gr00t_runtime::config::ModelConfig;
    use gr00t_runtime::weights::WeightStore;

    fn tiny() -> (WeightStore, EagleConfig) {
        let cfg = ModelConfig::from_dir(&case_dir()).unwrap().eagle;
        (WeightStore::open_dir(&case_dir()).unwrap(), cfg)
    }

    #[test]
    fn packed_llm_layers_are_the_checkpoint_s_without_biases() {
        let (ws, cfg) = tiny();
        let model = ModelConfig::from_dir(&case_dir()).unwrap();
        let n = model.gr00t.select_layer;
        let a = BackboneArena::new(ArenaDtype::Bf16)
            .with_llm_layers(&ws, &cfg, n, 0..n)
            .unwrap();
        let t = &cfg.text_config;
        let (d, hd) = (t.hidden_size, t.head_dim);
        let kv_w = t.num_key_value_heads * hd;
        assert_eq!(a.weights.entries.len(), 7 * n);
        assert_eq!(a.norms.len(), 4 * n);
        let layer = n - 1;
        let prefix = format!("{LLM}.layers.{layer}.self_attn.k_proj");
        // torch's [out, in], transposed here independently of `linear_with`.
        let w = ws.f32(&format!("{prefix}.weight"), &[kv_w, d]).unwrap();
        let (kn, bias) = a.matrix(BackboneWeight::Llm(layer, LlmMatrix::K)).unwrap();
        // Each head padded to a tile: checkpoint column j sits at (j / hd)·hp + j % hd.
        let hp = crate::head_layout::padded_head(hd).unwrap();
        let wide = t.num_key_value_heads * hp;
        for k in 0..d {
            for j in 0..kv_w {
                let at = (j / hd) * hp + j % hd;
                assert_eq!(kn[k * wide + at].to_bits(), w[j * d + k].to_bits());
            }
        }
        assert!(!t.attention_bias && bias.iter().all(|b| *b == 0.0));
        let q = a.norm(BackboneNorm::LlmQ(layer)).unwrap();
        let g = ws
            .f32(
                &format!("{LLM}.layers.{layer}.self_attn.q_norm.weight"),
                &[hd],
            )
            .unwrap();
        assert_eq!(
            (q.gamma.as_slice(), q.eps),
            (g.as_slice(), t.rms_norm_eps as f32)
        );
        let down = a
            .weights
            .get(BackboneWeight::Llm(0, LlmMatrix::Down))
            .unwrap();
        assert_eq!(down.kn_shape, [t.intermediate_size, d]);
        let err = BackboneArena::new(ArenaDtype::Bf16)
            .with_llm_layers(&ws, &cfg, n, 0..n + 1)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("llm layers 0..{} asked, it has {n}", n + 1)),
            "{err}"
        );
    }
}
