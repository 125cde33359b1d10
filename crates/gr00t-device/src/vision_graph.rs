//! SigLIP2's encoder layers as device graph steps (issue 40): per layer the pre-LN attention
//! (LayerNorm with its own γ/β, the Q/K/V matmuls in one program, attention over every image
//! token, the out-projection with the residual add) and the pre-LN MLP (fc1 with the GELU-tanh
//! end, fc2 with the residual add), the DiT block's kernels over the backbone arena.
//!
//! The stream `x` is fp32 `[32·row_tiles, C]`, the image's tokens in the device's order
//! (`gr00t_megakernel::vision_layout`: four groups, each padded to whole tiles): the padding rows go
//! through the layers as rows of their own (LayerNorm makes them β), and the key mask keeps
//! them out of every real token's attention, so the real rows are the reference's.

use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::device::DitRunError;

use super::graph::{Upload, mask_tile, tiles};
use super::graph_builder::{AttnHeads, End, Graph, Job, Weight};
use super::one_program::{row_tile, scaler_tile};
use super::protocol::{self, ActDtype};
use gr00t_megakernel::backbone_arena::{BackboneArena, BackboneNorm, BackboneWeight, VisionMatrix};
use gr00t_megakernel::packed::PackedWeights;
use gr00t_megakernel::vision_layout::VisionLayout;
use gr00t_runtime::model::vision::{resize_bilinear, unfold_patches};

/// The backbone arena's device tensor (uploaded as raw pages, like the DiT's and the head's).
pub(crate) const BACKBONE_ARENA: &str = "backbone_arena";
/// The vision tokens' key mask.
const VISION_MASK: &str = "b/mask/vision";
/// The position table resized to the image's grid, in the tokens' device order (fp32).
const VISION_POS: &str = "b/pos";

/// The request that puts a packed arena on the device under `name`, and its bytes.
pub(crate) fn arena_upload<W>(name: &str, weights: &PackedWeights<W>) -> protocol::Upload {
    protocol::Upload {
        name: name.into(),
        page_bytes: weights.tile_bytes as u64,
        pages: (weights.bytes.len() / weights.tile_bytes.max(1)) as u64,
    }
}

/// A weight's bias as it sits in L1: bf16 values replicated over 32 rows, zero past the real
/// columns (so padding columns stay 0 through every op), `cols` wide.
pub(crate) fn bias_rows(bias: &[f32], cols: usize) -> Vec<f32> {
    let mut row = vec![0f32; cols];
    for (r, b) in row.iter_mut().zip(bias) {
        *r = round_to_bf16(*b);
    }
    (0..32).flat_map(|_| row.iter().copied()).collect()
}

/// The name of a backbone weight's bias tensor (device lifetime).
pub(crate) fn backbone_bias_name(w: BackboneWeight) -> String {
    format!("b/bias/{w:?}")
}

/// The names of a backbone norm's γ and β tensors.
pub(crate) fn norm_names(n: BackboneNorm) -> (String, String) {
    (format!("b/ln/{n:?}/g"), format!("b/ln/{n:?}/b"))
}

/// The image's tower on the device: its token layout, width and heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VisionShape {
    /// The tokens' order and padding (`gr00t_megakernel::vision_layout`).
    pub layout: VisionLayout,
    /// The tower's width.
    pub width: usize,
    /// Attention heads.
    pub heads: usize,
}

impl VisionShape {
    /// The stream's tile rows.
    pub(crate) fn row_tiles(&self) -> usize {
        self.layout.row_tiles()
    }

    /// Its rows as a matmul's `m`: every tile row is read.
    fn rows(&self) -> usize {
        32 * self.row_tiles()
    }

    fn head_dim(&self) -> usize {
        self.width / self.heads
    }
}

/// The backbone's device-lifetime tensors, once per worker: every weight's bias, every norm's
/// γ and β (fp32, row 0 of `[32, ⌈n/32⌉·32]`), the reduce scaler tile.
pub(crate) fn arena_constants(arena: &BackboneArena) -> Upload {
    let mut up = Upload::new();
    up.add("c/scaler", 32, 32, ActDtype::F32, &scaler_tile());
    for e in &arena.weights.entries {
        let cols = e.tiles[1] * 32;
        let rows = bias_rows(&e.bias, cols);
        up.add(
            &backbone_bias_name(e.weight),
            32,
            cols,
            ActDtype::F32,
            &rows,
        );
    }
    for (n, a) in &arena.norms {
        let (g, b) = norm_names(*n);
        let cols = tiles(a.gamma.len()) * 32;
        for (name, v) in [(g, &a.gamma), (b, &a.beta)] {
            let mut row = v.clone();
            row.resize(cols, 0.0);
            up.add(&name, 32, cols, ActDtype::F32, &row_tile(&row));
        }
    }
    up
}

/// The image's constants for its patch grid, once per resolution: the vision tokens' key mask
/// and, when the arena has the embeddings, the position table resized to the grid in the
/// tokens' device order.
pub(crate) fn vision_constants(
    arena: &BackboneArena,
    shape: VisionShape,
) -> Result<Upload, DitRunError> {
    let mut up = Upload::new();
    let l = shape.layout;
    let np = shape.rows();
    let keep: Vec<bool> = (0..np).map(|j| l.is_token(j)).collect();
    up.add(VISION_MASK, 32, np, ActDtype::F32, &mask_tile(&keep, np));
    if let Some(table) = &arena.pos_table {
        let c = shape.width;
        let grid = (table.len() / c.max(1)).isqrt();
        if grid * grid * c != table.len() {
            return Err(DitRunError::Arena(format!(
                "the position table's {} values are not a square grid of {c}-wide rows",
                table.len()
            )));
        }
        let pos = resize_bilinear(table, grid, grid, c, l.nh, l.nw);
        let cw = tiles(c) * 32;
        up.add_padded(
            VISION_POS,
            &l.to_device(&pos, c),
            np,
            c,
            np,
            cw,
            ActDtype::F32,
        );
    }
    Ok(up)
}

/// The patches of one `[ch, h, w]` image as the patch embedding reads them on the device: bf16
/// `[32·row_tiles, ⌈p·p·ch/32⌉·32]`, in the tokens' device order. The forward's image input.
pub(crate) fn patch_input(
    up: &mut Upload,
    name: &str,
    pixels: &[f32],
    [ch, h, w, p]: [usize; 4],
    layout: VisionLayout,
) {
    let k = ch * p * p;
    let patches = layout.to_device(&unfold_patches(pixels, ch, h, w, p), k);
    let rows = 32 * layout.row_tiles();
    up.add_padded(name, &patches, rows, k, rows, tiles(k) * 32, ActDtype::Bf16);
}

/// A backbone weight as a graph job over `m` activation rows.
fn job(w: BackboneWeight, act: &str, m: usize, out: &str) -> Job {
    Job {
        weight: Weight::Backbone(w),
        act: act.into(),
        m,
        out: out.into(),
        bias: backbone_bias_name(w),
        out_rows: None,
        out_row0: 0,
    }
}

/// Encoder layer `layer` from the fp32 stream `x` to the fp32 stream `out` (both `[32·⌈t/32⌉,
/// C]`): four programs (LayerNorm + Q/K/V, attention + out-projection + residual, LayerNorm +
/// fc1 + GELU, fc2 + residual), or fewer where the graph chains them.
pub(crate) fn vision_layer(
    g: &mut Graph<'_>,
    arena: &BackboneArena,
    layer: usize,
    shape: VisionShape,
    x: &str,
    out: &str,
) -> Result<(), DitRunError> {
    let (t, c, rt) = (shape.rows(), shape.width, shape.row_tiles());
    let w = |m| BackboneWeight::Vision(layer, m);
    let eps1 = norm_eps(arena, BackboneNorm::VisionLn1(layer))?;
    let eps2 = norm_eps(arena, BackboneNorm::VisionLn2(layer))?;
    let (g1, b1) = norm_names(BackboneNorm::VisionLn1(layer));
    g.layernorm_affine(x, c, rt, [&g1, &b1], "t/v/h", eps1, false);
    g.jobs(
        &[
            job(w(VisionMatrix::Q), "t/v/h", t, "t/v/q"),
            job(w(VisionMatrix::K), "t/v/h", t, "t/v/k"),
            job(w(VisionMatrix::V), "t/v/h", t, "t/v/v"),
        ],
        End::Plain,
        false,
    )?;
    let heads = AttnHeads {
        heads: shape.heads,
        kv_heads: shape.heads,
        hd: shape.head_dim(),
        real_hd: shape.head_dim(),
        causal: false,
    };
    g.attention_heads(
        "t/v/q",
        "t/v/k",
        "t/v/v",
        VISION_MASK,
        [rt, rt],
        "t/v/a",
        heads,
    );
    g.jobs(
        &[job(w(VisionMatrix::O), "t/v/a", t, "t/v/x1")],
        End::Stream(x),
        true,
    )?;
    let (g2, b2) = norm_names(BackboneNorm::VisionLn2(layer));
    g.layernorm_affine("t/v/x1", c, rt, [&g2, &b2], "t/v/h2", eps2, false);
    g.jobs(
        &[job(w(VisionMatrix::Fc1), "t/v/h2", t, "t/v/m")],
        End::Gelu,
        false,
    )?;
    g.jobs(
        &[job(w(VisionMatrix::Fc2), "t/v/m", t, out)],
        End::Stream("t/v/x1"),
        true,
    )
}

/// The epsilon of `n`, which the arena must hold.
fn norm_eps(arena: &BackboneArena, n: BackboneNorm) -> Result<f32, DitRunError> {
    arena
        .norm(n)
        .map(|a| a.eps)
        .ok_or_else(|| DitRunError::Arena(format!("the backbone arena has no {n:?}")))
}

/// The whole tower from the patches `patches` ([`patch_input`]) to `out`, the post-LayerNorm's
/// output (fp32, the tokens' device order): the patch embedding with the position table added
/// in its end, `layers` encoder layers, the post-LayerNorm.
pub(crate) fn vision_tower(
    g: &mut Graph<'_>,
    arena: &BackboneArena,
    shape: VisionShape,
    layers: usize,
    patches: &str,
    out: &str,
) -> Result<(), DitRunError> {
    let stream = |i: usize| format!("t/v/s{}", i % 2);
    g.jobs(
        &[job(
            BackboneWeight::PatchEmbed,
            patches,
            shape.rows(),
            &stream(0),
        )],
        End::Stream(VISION_POS),
        true,
    )?;
    for i in 0..layers {
        vision_layer(g, arena, i, shape, &stream(i), &stream(i + 1))?;
    }
    let post = BackboneNorm::VisionPost;
    let (pg, pb) = norm_names(post);
    let eps = norm_eps(arena, post)?;
    let (c, rt) = (shape.width, shape.row_tiles());
    g.layernorm_affine(&stream(layers), c, rt, [&pg, &pb], out, eps, true);
    Ok(())
}

/// The Eagle projector from the tower's output `x` ([`vision_tower`]'s `out`) to the image's
/// tokens `out` (fp32 `[32·⌈blocks/32⌉, text hidden]`, one row per 2×2 block in raster order):
/// the pixel-unshuffle as a copy of each token group's tile rows into its column block (the
/// layout makes it one: `gr00t_megakernel::vision_layout`), the LayerNorm, fc1 with the exact-GELU end,
/// fc2.
#[cfg(test)]
pub(crate) fn projector(
    g: &mut Graph<'_>,
    arena: &BackboneArena,
    shape: VisionShape,
    x: &str,
    out: &str,
) -> Result<(), DitRunError> {
    projector_at(g, arena, shape, x, (out, 0, None))
}

/// [`projector`] into tile rows `row0..` of `out`, a tensor of `rows` tile rows (`None`: the
/// image's own): one camera's tokens among every camera's, in one tensor.
pub(crate) fn projector_at(
    g: &mut Graph<'_>,
    arena: &BackboneArena,
    shape: VisionShape,
    x: &str,
    (out, row0, rows): (&str, usize, Option<usize>),
) -> Result<(), DitRunError> {
    let (c, gt) = (shape.width, shape.layout.group_tiles());
    let progs = (0..4)
        .map(|q| [gt, 0, 1, q * c, 0, q * gt, 1, 0, 0, c])
        .collect();
    g.relayout(x, tiles(c), "t/p/u", gt, tiles(4 * c), ActDtype::F32, progs);
    let n = BackboneNorm::Projector;
    let (pg, pb) = norm_names(n);
    let eps = norm_eps(arena, n)?;
    g.layernorm_affine("t/p/u", 4 * c, gt, [&pg, &pb], "t/p/h", eps, false);
    let m = shape.layout.blocks();
    g.jobs(
        &[job(BackboneWeight::ProjectorFc1, "t/p/h", m, "t/p/f")],
        End::GeluErf,
        false,
    )?;
    let mut fc2 = job(BackboneWeight::ProjectorFc2, "t/p/f", m, out);
    (fc2.out_row0, fc2.out_rows) = (row0, rows);
    g.jobs(&[fc2], End::Plain, true)
}
