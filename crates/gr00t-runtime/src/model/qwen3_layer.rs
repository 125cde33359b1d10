//! One Qwen3 decoder layer: RMSNorm, GQA causal attention with per-head q/k RMSNorm before the
//! rotary embedding, SwiGLU. N1.6's Eagle body and N1.7's Qwen3-VL text layers share it: they
//! differ only in their RoPE tables (1-D, or interleaved M-RoPE) and in what happens between
//! layers (N1.7's deepstack additions), which stay with their callers.

use super::layers::{Linear, NormParams, add_assign, attend_residual};
use crate::config::TextConfig;
use crate::cpu::attention::{AttnShape, KeyMask};
use crate::cpu::norms::{rms_norm, silu};
use crate::cpu::rope::apply_rotate_half;
use crate::weights::{Tensor, WeightError, WeightSource};

/// The layer's sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Qwen3Dims {
    /// Residual-stream width.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (GQA).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// SwiGLU inner width.
    pub ff: usize,
    /// RMSNorm epsilon.
    pub eps: f32,
    /// q/k/v projections carry a bias (the output projection never does).
    pub attention_bias: bool,
}

impl Qwen3Dims {
    /// The sizes of N1.6's Eagle text model `cfg` (Qwen3).
    pub fn of(cfg: &TextConfig) -> Self {
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
}

/// One layer's weights.
pub struct Qwen3Layer {
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

/// Activations reused across the layers of one forward (sized for `s` tokens).
pub struct Qwen3Scratch {
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    a: Vec<f32>,
    g: Vec<f32>,
    u: Vec<f32>,
}

impl Qwen3Scratch {
    /// Buffers for `s` tokens of a layer of `dims`.
    pub fn new(s: usize, dims: &Qwen3Dims) -> Self {
        let (q_w, kv_w) = (dims.heads * dims.head_dim, dims.kv_heads * dims.head_dim);
        Self {
            h: vec![0.0; s * dims.hidden],
            q: vec![0.0; s * q_w],
            k: vec![0.0; s * kv_w],
            v: vec![0.0; s * kv_w],
            a: vec![0.0; s * q_w],
            g: vec![0.0; s * dims.ff],
            u: vec![0.0; s * dims.ff],
        }
    }
}

impl Qwen3Layer {
    /// Loads the layer whose tensors are named `<prefix>.input_layernorm.weight`, …
    pub fn load(
        ws: &dyn WeightSource,
        prefix: &str,
        dims: &Qwen3Dims,
    ) -> Result<Self, WeightError> {
        let d = dims.hidden;
        let (q_w, kv_w) = (dims.heads * dims.head_dim, dims.kv_heads * dims.head_dim);
        let lin =
            |name: &str, k, n, bias| Linear::load(ws, &format!("{prefix}.{name}"), k, n, bias);
        let norm = |name: &str, n| NormParams::rms_norm(ws, &format!("{prefix}.{name}"), n);
        let ab = dims.attention_bias;
        Ok(Self {
            in_norm: norm("input_layernorm", d)?,
            post_norm: norm("post_attention_layernorm", d)?,
            q: lin("self_attn.q_proj", d, q_w, ab)?,
            k: lin("self_attn.k_proj", d, kv_w, ab)?,
            v: lin("self_attn.v_proj", d, kv_w, ab)?,
            o: lin("self_attn.o_proj", q_w, d, false)?,
            q_norm: norm("self_attn.q_norm", dims.head_dim)?,
            k_norm: norm("self_attn.k_norm", dims.head_dim)?,
            gate: lin("mlp.gate_proj", d, dims.ff, false)?,
            up: lin("mlp.up_proj", d, dims.ff, false)?,
            down: lin("mlp.down_proj", dims.ff, d, false)?,
        })
    }

    /// The residual stream `x` `[s, hidden]` through the layer, in place; `cos`/`sin` are the
    /// rotary tables `[s, head_dim]`.
    pub fn forward(
        &self,
        x: &mut [f32],
        s: usize,
        dims: &Qwen3Dims,
        cos: &[f32],
        sin: &[f32],
        t: &mut Qwen3Scratch,
    ) {
        let (d, nh, nkv, hd) = (dims.hidden, dims.heads, dims.kv_heads, dims.head_dim);
        let shape = AttnShape {
            q_len: s,
            kv_len: s,
            heads: nh,
            kv_heads: nkv,
            head_dim: hd,
            q_stride: nh * hd,
            kv_stride: nkv * hd,
        };
        t.h.copy_from_slice(x);
        rms_norm(&mut t.h, d, &self.in_norm.w, dims.eps);
        self.q.forward_into(&t.h, s, &mut t.q);
        self.k.forward_into(&t.h, s, &mut t.k);
        self.v.forward_into(&t.h, s, &mut t.v);
        rms_norm(&mut t.q, hd, &self.q_norm.w, dims.eps);
        rms_norm(&mut t.k, hd, &self.k_norm.w, dims.eps);
        apply_rotate_half(&mut t.q, s, nh * hd, 0, nh, hd, cos, sin);
        apply_rotate_half(&mut t.k, s, nkv * hd, 0, nkv, hd, cos, sin);
        attend_residual(
            &t.q,
            &t.k,
            &t.v,
            shape,
            KeyMask::Causal,
            &self.o,
            &mut t.a,
            &mut t.h,
            x,
        );
        t.h.copy_from_slice(x);
        rms_norm(&mut t.h, d, &self.post_norm.w, dims.eps);
        self.gate.forward_into(&t.h, s, &mut t.g);
        self.up.forward_into(&t.h, s, &mut t.u);
        silu(&mut t.g);
        for (gv, uv) in t.g.iter_mut().zip(&t.u) {
            *gv *= uv;
        }
        self.down.forward_into(&t.g, s, &mut t.h);
        add_assign(x, &t.h);
    }
}

/// The rows of token-embedding table `table` (`[vocab, hidden]`) for `ids` (the caller has
/// checked `id < vocab`), as f32 `[ids.len(), hidden]`.
pub fn embed_rows(table: &Tensor, hidden: usize, ids: &[u32]) -> Vec<f32> {
    let data = table.data();
    let mut out = Vec::with_capacity(ids.len() * hidden);
    for &id in ids {
        out.extend(data.slice(id as usize * hidden, hidden).to_f32_vec());
    }
    out
}

/// The token-embedding table `<prefix>.embed_tokens.weight` and layers
/// `<prefix>.layers.0..n_layers`, as both Qwen3 bodies load them.
pub fn load_stack(
    ws: &dyn WeightSource,
    prefix: &str,
    vocab: usize,
    dims: &Qwen3Dims,
    n_layers: usize,
) -> Result<(Tensor, Vec<Qwen3Layer>), WeightError> {
    let embed = ws.tensor(
        &format!("{prefix}.embed_tokens.weight"),
        &[vocab, dims.hidden],
    )?;
    let layers = (0..n_layers)
        .map(|i| Qwen3Layer::load(ws, &format!("{prefix}.layers.{i}"), dims))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((embed, layers))
}
