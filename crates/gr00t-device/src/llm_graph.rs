//! Qwen3's decoder layers as device graph steps (issue 40): per layer the input RMSNorm with
//! the Q/K/V projections, the per-head q/k RMSNorm, NEOX RoPE, causal GQA attention with the
//! output projection and the residual add, the post-attention RMSNorm with the SwiGLU MLP
//! (gate with the SiLU end, up with the gate multiplied in its end, down with the residual
//! add); after the last kept layer the final RMSNorm. The backbone arena's weights, our row,
//! RoPE, attention and matmul kernels.
//!
//! The stream `x` is fp32 `[32·row_tiles, hidden]`, one row per prompt token in order; rows
//! past the prompt go through the layers as rows of their own and the key mask keeps them out
//! of every real token's attention. Heads are laid out in whole tiles
//! (`gr00t_megakernel::head_layout`): Q, K and V come out of their matmuls padded, O reads them so.

use tt_blackhole::device::DitRunError;

use super::graph::{Upload, mask_tile};
use super::graph_builder::{AttnHeads, End, Graph, Job, Weight};
use super::protocol::ActDtype;
use super::rope::{rope_rotation, rope_tables};
use super::vision_graph::{backbone_bias_name, norm_names};
use gr00t_megakernel::backbone_arena::{BackboneArena, BackboneNorm, BackboneWeight, LlmMatrix};
use gr00t_megakernel::head_layout::padded_head;
use gr00t_runtime::config::TextConfig;

/// The prompt's key mask (its real tokens; causal order is the kernel's).
const LLM_MASK: &str = "b/mask/llm";
/// RoPE's cos and sin tables for the prompt's positions and its rotation tiles.
const ROPE_TABLES: [&str; 3] = ["b/rope/cos", "b/rope/sin", "b/rope/rot"];

/// A Qwen3 body's sizes over one prompt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LlmShape {
    /// The residual stream's width.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (GQA).
    pub kv_heads: usize,
    /// A head's width (the checkpoint's).
    pub hd: usize,
    /// The SwiGLU inner width.
    pub ff: usize,
    /// RoPE's base.
    pub theta: f64,
    /// The prompt's tokens.
    pub tokens: usize,
}

impl LlmShape {
    /// The shape of `cfg`'s text model over a prompt of `tokens`.
    pub(crate) fn new(cfg: &TextConfig, tokens: usize) -> Self {
        LlmShape {
            hidden: cfg.hidden_size,
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_key_value_heads,
            hd: cfg.head_dim,
            ff: cfg.intermediate_size,
            theta: cfg.rope_theta,
            tokens,
        }
    }

    /// The stream's tile rows.
    pub(crate) fn row_tiles(&self) -> usize {
        self.tokens.div_ceil(32)
    }

    /// A head's width on the device.
    fn hp(&self) -> Result<usize, DitRunError> {
        padded_head(self.hd).ok_or_else(|| {
            DitRunError::Input(format!(
                "heads of {} columns: no device layout (gr00t_megakernel::head_layout)",
                self.hd
            ))
        })
    }
}

/// The prompt's constants: RoPE's cos and sin for positions `0..32·row_tiles`, its rotation
/// tiles, the key mask of the real tokens. Once per prompt length.
pub(crate) fn llm_constants(shape: LlmShape) -> Result<Upload, DitRunError> {
    let rt = shape.row_tiles();
    let hp = shape.hp()?;
    let (cos, sin) = rope_tables(shape.tokens, rt, shape.hd, shape.theta)?;
    let rot = rope_rotation(shape.hd)?;
    let mut up = Upload::new();
    up.add(ROPE_TABLES[0], 32 * rt, hp, ActDtype::F32, &cos);
    up.add(ROPE_TABLES[1], 32 * rt, hp, ActDtype::F32, &sin);
    up.add(ROPE_TABLES[2], 32, rot.len() / 32, ActDtype::F32, &rot);
    let np = 32 * rt;
    let keep: Vec<bool> = (0..np).map(|j| j < shape.tokens).collect();
    up.add(LLM_MASK, 32, np, ActDtype::F32, &mask_tile(&keep, np));
    Ok(up)
}

/// A Qwen3 weight as a graph job over `m` rows.
fn job(layer: usize, m: LlmMatrix, act: &str, rows: usize, out: &str) -> Job {
    let w = BackboneWeight::Llm(layer, m);
    Job {
        weight: Weight::Backbone(w),
        act: act.into(),
        m: rows,
        out: out.into(),
        bias: backbone_bias_name(w),
        out_rows: None,
        out_row0: 0,
    }
}

/// The epsilon of `n`, which the arena must hold.
fn eps_of(arena: &BackboneArena, n: BackboneNorm) -> Result<f32, DitRunError> {
    arena
        .norm(n)
        .map(|a| a.eps)
        .ok_or_else(|| DitRunError::Arena(format!("the backbone arena has no {n:?}")))
}

/// Decoder layer `layer` from the fp32 stream `x` to the fp32 stream `out`.
pub(crate) fn qwen3_layer(
    g: &mut Graph<'_>,
    arena: &BackboneArena,
    layer: usize,
    shape: LlmShape,
    x: &str,
    out: &str,
) -> Result<(), DitRunError> {
    let (d, rt, hd) = (shape.hidden, shape.row_tiles(), shape.hd);
    let rows = 32 * rt;
    let hp = shape.hp()?;
    let eps = eps_of(arena, BackboneNorm::LlmIn(layer))?;
    let (gin, _) = norm_names(BackboneNorm::LlmIn(layer));
    g.rms_norm(x, [d, rt], &gin, ("t/l/h", false), eps);
    // q and k fp32 for their norms' reader; v bf16 as attention reads it: two ends, so two
    // steps (the norm rides with the first).
    g.jobs(
        &[
            job(layer, LlmMatrix::Q, "t/l/h", rows, "t/l/q"),
            job(layer, LlmMatrix::K, "t/l/h", rows, "t/l/k"),
        ],
        End::Plain,
        true,
    )?;
    g.jobs(
        &[job(layer, LlmMatrix::V, "t/l/h", rows, "t/l/v")],
        End::Plain,
        false,
    )?;
    for (n, heads, src, normed, roped) in [
        (
            BackboneNorm::LlmQ(layer),
            shape.heads,
            "t/l/q",
            "t/l/qn",
            "t/l/qr",
        ),
        (
            BackboneNorm::LlmK(layer),
            shape.kv_heads,
            "t/l/k",
            "t/l/kn",
            "t/l/kr",
        ),
    ] {
        let (gamma, _) = norm_names(n);
        let eps = eps_of(arena, n)?;
        g.head_rms_norm(src, [heads, hd, rt], &gamma, (normed, true), eps)?;
        g.rope(normed, [heads, hd, rt], ROPE_TABLES, roped)?;
    }
    let heads = AttnHeads {
        heads: shape.heads,
        kv_heads: shape.kv_heads,
        hd: hp,
        real_hd: hd,
        causal: true,
    };
    g.attention_heads(
        "t/l/qr",
        "t/l/kr",
        "t/l/v",
        LLM_MASK,
        [rt, rt],
        "t/l/a",
        heads,
    );
    g.jobs(
        &[job(layer, LlmMatrix::O, "t/l/a", rows, "t/l/x1")],
        End::Stream(x),
        true,
    )?;
    let eps = eps_of(arena, BackboneNorm::LlmPost(layer))?;
    let (gpost, _) = norm_names(BackboneNorm::LlmPost(layer));
    g.rms_norm("t/l/x1", [d, rt], &gpost, ("t/l/h2", false), eps);
    g.jobs(
        &[job(layer, LlmMatrix::Gate, "t/l/h2", rows, "t/l/g")],
        End::Silu,
        true,
    )?;
    g.jobs(
        &[job(layer, LlmMatrix::Up, "t/l/h2", rows, "t/l/m")],
        End::Gated("t/l/g"),
        false,
    )?;
    g.jobs(
        &[job(layer, LlmMatrix::Down, "t/l/m", rows, out)],
        End::Stream("t/l/x1"),
        true,
    )
}

/// The body from the prompt's embedded rows `x` (fp32 stream) to `out`: `layers` decoder
/// layers, the final RMSNorm (the backbone's features), and the action head's `vlln` when the
/// arena holds it (the VL context the head reads); fp32 out.
pub(crate) fn qwen3_body(
    g: &mut Graph<'_>,
    arena: &BackboneArena,
    shape: LlmShape,
    layers: usize,
    x: &str,
    out: &str,
) -> Result<(), DitRunError> {
    let stream = |i: usize| {
        if i == 0 {
            x.to_string()
        } else {
            format!("t/l/s{}", i % 2)
        }
    };
    for i in 0..layers {
        qwen3_layer(g, arena, i, shape, &stream(i), &stream(i + 1))?;
    }
    let (d, rt) = (shape.hidden, shape.row_tiles());
    let fin = BackboneNorm::LlmFinal;
    let eps = eps_of(arena, fin)?;
    let (gamma, _) = norm_names(fin);
    let vlln = arena.norm(BackboneNorm::Vlln);
    let feats = if vlln.is_some() { "t/l/feats" } else { out };
    g.rms_norm(&stream(layers), [d, rt], &gamma, (feats, true), eps);
    if let Some(a) = vlln {
        let (gv, bv) = norm_names(BackboneNorm::Vlln);
        g.layernorm_affine(feats, d, rt, [&gv, &bv], out, a.eps, true);
    }
    Ok(())
}
