//! Qwen3 body truncated at `select_layer`: token embedding, decoder layers (RMSNorm, GQA with
//! per-head q/k RMSNorm before NEOX RoPE, SwiGLU) and the final RMSNorm. No lm_head.

use super::layers::{Linear, NormParams, attend_residual};
use super::taps::Taps;
use crate::config::TextConfig;
use crate::cpu::attention::{AttnShape, KeyMask};
use crate::cpu::norms::{rms_norm, silu};
use crate::weights::{Tensor, WeightError, WeightSource};

const PREFIX: &str = "backbone.model.language_model.model";

struct DecoderLayer {
    in_norm: NormParams,
    post_norm: NormParams,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: NormParams,
    k_norm: NormParams,
    gate: Linear,
    up: Linear,
    down: Linear,
}

/// Token embedding table + the kept decoder layers + final norm.
pub struct Qwen3Body {
    cfg: TextConfig,
    embed: Tensor,
    layers: Vec<DecoderLayer>,
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
        let (nh, nkv, hd) = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        );
        let embed = ws.tensor(
            &format!("{PREFIX}.embed_tokens.weight"),
            &[cfg.vocab_size, d],
        )?;
        let mut layers = Vec::with_capacity(n_layers);
        for i in 0..n_layers {
            let l = format!("{PREFIX}.layers.{i}");
            let lin = |name: &str, k, n| {
                Linear::load(
                    ws,
                    &format!("{l}.{name}"),
                    k,
                    n,
                    cfg.attention_bias
                        && name.starts_with("self_attn")
                        && !name.ends_with("o_proj"),
                )
            };
            layers.push(DecoderLayer {
                in_norm: NormParams::rms_norm(ws, &format!("{l}.input_layernorm"), d)?,
                post_norm: NormParams::rms_norm(ws, &format!("{l}.post_attention_layernorm"), d)?,
                q: lin("self_attn.q_proj", d, nh * hd)?,
                k: lin("self_attn.k_proj", d, nkv * hd)?,
                v: lin("self_attn.v_proj", d, nkv * hd)?,
                o: Linear::load(ws, &format!("{l}.self_attn.o_proj"), nh * hd, d, false)?,
                q_norm: NormParams::rms_norm(ws, &format!("{l}.self_attn.q_norm"), hd)?,
                k_norm: NormParams::rms_norm(ws, &format!("{l}.self_attn.k_norm"), hd)?,
                gate: Linear::load(
                    ws,
                    &format!("{l}.mlp.gate_proj"),
                    d,
                    cfg.intermediate_size,
                    false,
                )?,
                up: Linear::load(
                    ws,
                    &format!("{l}.mlp.up_proj"),
                    d,
                    cfg.intermediate_size,
                    false,
                )?,
                down: Linear::load(
                    ws,
                    &format!("{l}.mlp.down_proj"),
                    cfg.intermediate_size,
                    d,
                    false,
                )?,
            });
        }
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
        let d = self.cfg.hidden_size;
        let data = self.embed.data();
        let mut out = Vec::with_capacity(ids.len() * d);
        for &id in ids {
            out.extend(data.slice(id as usize * d, d).to_f32_vec());
        }
        out
    }

    /// `inputs_embeds` `[s, d]` → final-normed hidden states of the last kept layer `[s, d]`.
    pub fn forward(&self, mut x: Vec<f32>, s: usize, taps: &mut Taps) -> Vec<f32> {
        let cfg = &self.cfg;
        let d = cfg.hidden_size;
        let (nh, nkv, hd) = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        );
        let eps = cfg.rms_norm_eps as f32;
        taps.emit("llm.inputs_embeds", &[1, s, d], &x);
        taps.emit("llm.hidden_states.0", &[1, s, d], &x);
        let (cos, sin) = rope_tables(s, hd, cfg.rope_theta);
        let shape = AttnShape {
            q_len: s,
            kv_len: s,
            heads: nh,
            kv_heads: nkv,
            head_dim: hd,
            q_stride: nh * hd,
            kv_stride: nkv * hd,
        };
        let mut h = vec![0.0f32; s * d];
        let mut q = vec![0.0f32; s * nh * hd];
        let mut k = vec![0.0f32; s * nkv * hd];
        let mut v = vec![0.0f32; s * nkv * hd];
        let mut a = vec![0.0f32; s * nh * hd];
        let mut g = vec![0.0f32; s * cfg.intermediate_size];
        let mut u = vec![0.0f32; s * cfg.intermediate_size];
        for (i, l) in self.layers.iter().enumerate() {
            h.copy_from_slice(&x);
            rms_norm(&mut h, d, &l.in_norm.w, eps);
            l.q.forward_into(&h, s, &mut q);
            l.k.forward_into(&h, s, &mut k);
            l.v.forward_into(&h, s, &mut v);
            rms_norm(&mut q, hd, &l.q_norm.w, eps);
            rms_norm(&mut k, hd, &l.k_norm.w, eps);
            apply_rope(&mut q, s, nh, hd, &cos, &sin);
            apply_rope(&mut k, s, nkv, hd, &cos, &sin);
            attend_residual(
                &q,
                &k,
                &v,
                shape,
                KeyMask::Causal,
                &l.o,
                &mut a,
                &mut h,
                &mut x,
            );
            h.copy_from_slice(&x);
            rms_norm(&mut h, d, &l.post_norm.w, eps);
            l.gate.forward_into(&h, s, &mut g);
            l.up.forward_into(&h, s, &mut u);
            silu(&mut g);
            for (gv, uv) in g.iter_mut().zip(&u) {
                *gv *= uv;
            }
            l.down.forward_into(&g, s, &mut h);
            for (xv, hv) in x.iter_mut().zip(&h) {
                *xv += hv;
            }
            taps.emit_with(|| format!("llm.layer{i}.output"), &[1, s, d], &x);
            if i + 1 < self.layers.len() {
                taps.emit_with(|| format!("llm.hidden_states.{}", i + 1), &[1, s, d], &x);
            }
        }
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
/// angle = pos·inv_freq in f32, cos/sin of that angle.
fn rope_tables(s: usize, hd: usize, theta: f64) -> (Vec<f32>, Vec<f32>) {
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

/// x·cos + rotate_half(x)·sin per head, rotate_half = [−x₂, x₁].
fn apply_rope(x: &mut [f32], s: usize, heads: usize, hd: usize, cos: &[f32], sin: &[f32]) {
    let half = hd / 2;
    for p in 0..s {
        let (c, sn) = (&cos[p * hd..][..hd], &sin[p * hd..][..hd]);
        for h in 0..heads {
            let v = &mut x[(p * heads + h) * hd..][..hd];
            for i in 0..half {
                let (a, b) = (v[i], v[i + half]);
                v[i] = a * c[i] - b * sn[i];
                v[i + half] = b * c[i + half] + a * sn[i + half];
            }
        }
    }
}
