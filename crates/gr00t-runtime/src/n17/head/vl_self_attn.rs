//! `vl_self_attention` (`SelfAttentionTransformer`): pre-LN transformer blocks over ALL the VL
//! tokens after `vlln`, with no mask (the reference passes none, padding included), so the DiT's
//! cross-attention reads context that has already mixed text and image tokens.
//!
//! Block: x += Attn(LN₁(x)); x += FF(LN₃(x)); LayerNorms affine with eps 1e-5, attention with
//! biased q/k/v/out projections, FF = Linear(d, 4d) → GELU(tanh) → Linear(4d, d).

use crate::cpu::attention::{AttnShape, KeyMask};
use crate::cpu::norms::{gelu_tanh, layer_norm};
use crate::model::Taps;
use crate::model::layers::{Linear, NormParams, add_assign, attend_residual};
use crate::n17::config::N17Config;
use crate::weights::{WeightError, WeightSource};

const PREFIX: &str = "action_head.vl_self_attention.transformer_blocks";
const EPS: f32 = 1e-5;

struct Block {
    norm1: NormParams,
    q: Linear,
    k: Linear,
    v: Linear,
    out: Linear,
    norm3: NormParams,
    ff1: Linear,
    ff2: Linear,
}

/// The loaded stack.
pub struct VlSelfAttention {
    blocks: Vec<Block>,
    heads: usize,
    head_dim: usize,
    dim: usize,
}

impl VlSelfAttention {
    /// Loads `action_head.vl_self_attention.transformer_blocks.*`; `None` when the configuration
    /// has no stack (the reference's identity).
    pub fn load(ws: &dyn WeightSource, cfg: &N17Config) -> Result<Option<Self>, WeightError> {
        let Some(sc) = &cfg.vl_self_attention_cfg else {
            return Ok(None);
        };
        let d = sc.num_attention_heads * sc.attention_head_dim;
        let mut blocks = Vec::with_capacity(sc.num_layers);
        for i in 0..sc.num_layers {
            let b = format!("{PREFIX}.{i}");
            let lin = |name: &str, k, n| Linear::load(ws, &format!("{b}.{name}"), k, n, true);
            blocks.push(Block {
                norm1: NormParams::layer_norm(ws, &format!("{b}.norm1"), d)?,
                q: lin("attn1.to_q", d, d)?,
                k: lin("attn1.to_k", d, d)?,
                v: lin("attn1.to_v", d, d)?,
                out: lin("attn1.to_out.0", d, d)?,
                norm3: NormParams::layer_norm(ws, &format!("{b}.norm3"), d)?,
                ff1: lin("ff.net.0.proj", d, 4 * d)?,
                ff2: lin("ff.net.2", 4 * d, d)?,
            });
        }
        Ok(Some(Self {
            blocks,
            heads: sc.num_attention_heads,
            head_dim: sc.attention_head_dim,
            dim: d,
        }))
    }

    /// Runs every block on `x` `[seq, dim]` in place; taps `action_head.vl_self_attn.block{i}`.
    pub fn forward(&self, x: &mut [f32], seq: usize, taps: &mut Taps<'_>) {
        let d = self.dim;
        let shape = AttnShape {
            q_len: seq,
            kv_len: seq,
            heads: self.heads,
            kv_heads: self.heads,
            head_dim: self.head_dim,
            q_stride: d,
            kv_stride: d,
        };
        let mut h = vec![0.0f32; seq * d];
        let mut q = vec![0.0f32; seq * d];
        let mut k = vec![0.0f32; seq * d];
        let mut v = vec![0.0f32; seq * d];
        let mut a = vec![0.0f32; seq * d];
        let mut ff = vec![0.0f32; seq * 4 * d];
        for (i, b) in self.blocks.iter().enumerate() {
            h.copy_from_slice(x);
            layer_norm(&mut h, d, Some(&b.norm1.w), b.norm1.b.as_deref(), EPS);
            b.q.forward_into(&h, seq, &mut q);
            b.k.forward_into(&h, seq, &mut k);
            b.v.forward_into(&h, seq, &mut v);
            attend_residual(&q, &k, &v, shape, KeyMask::All, &b.out, &mut a, &mut h, x);
            h.copy_from_slice(x);
            layer_norm(&mut h, d, Some(&b.norm3.w), b.norm3.b.as_deref(), EPS);
            b.ff1.forward_into(&h, seq, &mut ff);
            gelu_tanh(&mut ff);
            b.ff2.forward_into(&ff, seq, &mut h);
            add_assign(x, &h);
            taps.emit_with(
                || format!("action_head.vl_self_attn.block{i}"),
                &[1, seq, d],
                x,
            );
        }
    }
}
