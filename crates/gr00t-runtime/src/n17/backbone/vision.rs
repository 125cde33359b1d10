//! The Qwen3-VL vision tower: Conv3d patch embedding, the learned position grid bilinearly
//! resampled per image, 2-D rotary embedding, pre-LN blocks with full attention inside each
//! image, the merger (image-token embeddings) and the deepstack mergers.
//!
//! Patch rows arrive in 2×2 MERGE-BLOCK order (block row, block col, r, c), as the image
//! processor emits them; every per-patch table here (position embeddings, rotary angles) is
//! built in that order, so a merger only has to view 4 consecutive rows as one token.

use super::BackboneError;
use super::config::VisionCfg;
use super::rope::{apply_rotate_half, cos_sin_table};
use crate::cpu::attention::{AttnShape, KeyMask, attention};
use crate::cpu::gemm::PackedMat;
use crate::cpu::norms::{gelu_erf, gelu_tanh, layer_norm};
use crate::model::Taps;
use crate::model::layers::{Linear, NormParams, add_assign};
use crate::weights::{WeightError, WeightSource};

const PREFIX: &str = "backbone.model.model.visual";
/// Every LayerNorm of the tower (blocks and mergers).
const LN_EPS: f32 = 1e-6;

struct Block {
    norm1: NormParams,
    norm2: NormParams,
    /// Fused `[3C, C]`: output columns are q, k, v, each `[heads, head_dim]`.
    qkv: Linear,
    proj: Linear,
    fc1: Linear,
    fc2: Linear,
}

/// `Qwen3VLVisionPatchMerger`: LayerNorm over one patch (`C`, merger) or over the 4 patches of a
/// merge block (`4C`, deepstack "postshuffle" norm), then fc1 → GELU(erf) → fc2.
struct Merger {
    norm: NormParams,
    postshuffle: bool,
    fc1: Linear,
    fc2: Linear,
}

impl Merger {
    fn load(
        ws: &dyn WeightSource,
        prefix: &str,
        cfg: &VisionCfg,
        postshuffle: bool,
    ) -> Result<Self, WeightError> {
        let wide = cfg.hidden_size * cfg.merge_unit();
        let norm_dim = if postshuffle { wide } else { cfg.hidden_size };
        Ok(Self {
            norm: NormParams::layer_norm(ws, &format!("{prefix}.norm"), norm_dim)?,
            postshuffle,
            fc1: Linear::load(ws, &format!("{prefix}.linear_fc1"), wide, wide, true)?,
            fc2: Linear::load(
                ws,
                &format!("{prefix}.linear_fc2"),
                wide,
                cfg.out_hidden_size,
                true,
            )?,
        })
    }

    /// `[patches, C]` (merge-block order) → `[patches / unit, out]`.
    fn forward(&self, x: &[f32], c: usize, unit: usize) -> Vec<f32> {
        let mut h = x.to_vec();
        let dim = if self.postshuffle { c * unit } else { c };
        layer_norm(
            &mut h,
            dim,
            Some(&self.norm.w),
            self.norm.b.as_deref(),
            LN_EPS,
        );
        let tokens = x.len() / (c * unit);
        let mut y = self.fc1.forward(&h, tokens);
        gelu_erf(&mut y);
        self.fc2.forward(&y, tokens)
    }
}

/// What the tower hands the LLM: image-token embeddings and the deepstack features, each
/// `[tokens, out_hidden_size]` in prompt order.
pub struct VisionOutput {
    /// `merger` output.
    pub embeds: Vec<f32>,
    /// `deepstack_merger_list[j]` outputs.
    pub deepstack: Vec<Vec<f32>>,
}

/// The tower's weights.
pub struct VisionTower {
    cfg: VisionCfg,
    patch: Linear,
    pos_table: Vec<f32>,
    blocks: Vec<Block>,
    merger: Merger,
    deepstack: Vec<Merger>,
}

impl VisionTower {
    /// Loads `backbone.model.model.visual.*`.
    pub fn load(ws: &dyn WeightSource, cfg: &VisionCfg) -> Result<Self, WeightError> {
        let c = cfg.hidden_size;
        let (p, tp) = (cfg.patch_size, cfg.temporal_patch_size);
        // Conv3d with kernel = stride = the patch is a Linear over the flattened
        // [channel][t][py][px] pixel row: view the 5-D kernel as [C, patch_dim].
        let name = format!("{PREFIX}.patch_embed.proj.weight");
        let w = ws.tensor(&name, &[c, cfg.in_channels, tp, p, p])?;
        let patch = Linear {
            w: PackedMat::from_out_in(w.data(), c, cfg.patch_dim()),
            b: Some(ws.f32(&format!("{PREFIX}.patch_embed.proj.bias"), &[c])?),
            k: cfg.patch_dim(),
            n: c,
        };
        w.release();
        let pos_table = ws.f32(
            &format!("{PREFIX}.pos_embed.weight"),
            &[cfg.num_position_embeddings, c],
        )?;
        let mut blocks = Vec::with_capacity(cfg.depth);
        for i in 0..cfg.depth {
            let b = format!("{PREFIX}.blocks.{i}");
            let lin = |name: &str, k, n| Linear::load(ws, &format!("{b}.{name}"), k, n, true);
            blocks.push(Block {
                norm1: NormParams::layer_norm(ws, &format!("{b}.norm1"), c)?,
                norm2: NormParams::layer_norm(ws, &format!("{b}.norm2"), c)?,
                qkv: lin("attn.qkv", c, 3 * c)?,
                proj: lin("attn.proj", c, c)?,
                fc1: lin("mlp.linear_fc1", c, cfg.intermediate_size)?,
                fc2: lin("mlp.linear_fc2", cfg.intermediate_size, c)?,
            });
        }
        let merger = Merger::load(ws, &format!("{PREFIX}.merger"), cfg, false)?;
        let deepstack = (0..cfg.deepstack_visual_indexes.len())
            .map(|j| {
                Merger::load(
                    ws,
                    &format!("{PREFIX}.deepstack_merger_list.{j}"),
                    cfg,
                    true,
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            cfg: cfg.clone(),
            patch,
            pos_table,
            blocks,
            merger,
            deepstack,
        })
    }

    /// Patch rows of every image of `grid_thw` `[Σ t·h·w, patch_dim]` → image-token embeddings
    /// and deepstack features.
    pub fn forward(
        &self,
        pixel_values: &[f32],
        grid_thw: &[[usize; 3]],
        taps: &mut Taps,
    ) -> Result<VisionOutput, BackboneError> {
        let cfg = &self.cfg;
        let (c, unit, m) = (cfg.hidden_size, cfg.merge_unit(), cfg.spatial_merge_size);
        for (k, &[t, h, w]) in grid_thw.iter().enumerate() {
            if t == 0 || h == 0 || w == 0 || h % m != 0 || w % m != 0 {
                return Err(BackboneError::Input(format!(
                    "image {k}: grid (t {t}, h {h}, w {w}) must be positive with h, w multiples of {m}"
                )));
            }
        }
        let n: usize = grid_thw.iter().map(|g| g[0] * g[1] * g[2]).sum();
        if pixel_values.len() != n * cfg.patch_dim() {
            return Err(BackboneError::Input(format!(
                "pixel_values: {} values, grid_thw needs {n} rows of {}",
                pixel_values.len(),
                cfg.patch_dim()
            )));
        }
        let mut x = self.patch.forward(pixel_values, n);
        taps.emit("vision.patch_embeds", &[n, c], &x);
        let pos = self.pos_embeds(grid_thw);
        taps.emit("vision.pos_embeds", &[n, c], &pos);
        add_assign(&mut x, &pos);
        let hd = cfg.head_dim();
        let freqs = rot_pos_freqs(grid_thw, m, hd);
        taps.emit("vision.rot_pos_freqs", &[n, hd / 2], &freqs);
        let (cos, sin) = cos_sin_table(n, hd, |r, i| freqs[r * (hd / 2) + i]);
        // Attention never crosses images (the reference's cu_seqlens): one call per image.
        let spans: Vec<(usize, usize)> = grid_thw
            .iter()
            .flat_map(|&[t, h, w]| std::iter::repeat_n(h * w, t))
            .scan(0, |start, len| {
                let s = *start;
                *start += len;
                Some((s, len))
            })
            .collect();
        let heads = cfg.num_heads;
        let mut hbuf = vec![0.0f32; n * c];
        let mut qkv = vec![0.0f32; n * 3 * c];
        let mut attn = vec![0.0f32; n * c];
        let mut mlp = vec![0.0f32; n * cfg.intermediate_size];
        let mut deepstack = Vec::with_capacity(self.deepstack.len());
        for (i, b) in self.blocks.iter().enumerate() {
            hbuf.copy_from_slice(&x);
            layer_norm(&mut hbuf, c, Some(&b.norm1.w), b.norm1.b.as_deref(), LN_EPS);
            b.qkv.forward_into(&hbuf, n, &mut qkv);
            apply_rotate_half(&mut qkv, n, 3 * c, 0, heads, hd, &cos, &sin);
            apply_rotate_half(&mut qkv, n, 3 * c, c, heads, hd, &cos, &sin);
            for &(start, len) in &spans {
                let shape = AttnShape {
                    q_len: len,
                    kv_len: len,
                    heads,
                    kv_heads: heads,
                    head_dim: hd,
                    q_stride: 3 * c,
                    kv_stride: 3 * c,
                };
                let rows = &qkv[start * 3 * c..(start + len) * 3 * c];
                attention(
                    rows,
                    &rows[c..],
                    &rows[2 * c..],
                    shape,
                    (hd as f32).powf(-0.5),
                    KeyMask::All,
                    &mut attn[start * c..(start + len) * c],
                );
            }
            b.proj.forward_into(&attn, n, &mut hbuf);
            add_assign(&mut x, &hbuf);
            hbuf.copy_from_slice(&x);
            layer_norm(&mut hbuf, c, Some(&b.norm2.w), b.norm2.b.as_deref(), LN_EPS);
            b.fc1.forward_into(&hbuf, n, &mut mlp);
            gelu_tanh(&mut mlp);
            b.fc2.forward_into(&mlp, n, &mut hbuf);
            add_assign(&mut x, &hbuf);
            taps.emit_with(|| format!("vision.block{i}"), &[n, c], &x);
            if let Some(j) = cfg.deepstack_visual_indexes.iter().position(|&d| d == i) {
                let f = self.deepstack[j].forward(&x, c, unit);
                taps.emit_with(
                    || format!("vision.deepstack{j}"),
                    &[n / unit, cfg.out_hidden_size],
                    &f,
                );
                deepstack.push((j, f));
            }
        }
        let embeds = self.merger.forward(&x, c, unit);
        taps.emit(
            "vision.merger_out",
            &[n / unit, cfg.out_hidden_size],
            &embeds,
        );
        // Deepstack features in merger order (the index list need not be increasing).
        deepstack.sort_by_key(|&(j, _)| j);
        Ok(VisionOutput {
            embeds,
            deepstack: deepstack.into_iter().map(|(_, f)| f).collect(),
        })
    }

    /// `fast_pos_embed_interpolate`: per image, the `N × N` table sampled bilinearly at
    /// `linspace(0, N−1, h) × linspace(0, N−1, w)` (corners on corners; floor, ceil clamped to
    /// N−1), repeated over t, rows in merge-block order. Weights and sums in f32 in the
    /// reference's order (w00 + w01 + w10 + w11 terms).
    fn pos_embeds(&self, grid_thw: &[[usize; 3]]) -> Vec<f32> {
        let c = self.cfg.hidden_size;
        let side = (self.cfg.num_position_embeddings as f64).sqrt().round() as usize;
        let m = self.cfg.spatial_merge_size;
        let table = &self.pos_table;
        let mut out = Vec::new();
        for &[t, h, w] in grid_thw {
            let ys = linspace_taps(side, h);
            let xs = linspace_taps(side, w);
            let mut img = vec![0.0f32; h * w * c];
            for (r, &(y0, y1, dy)) in ys.iter().enumerate() {
                for (col, &(x0, x1, dx)) in xs.iter().enumerate() {
                    let wts = [
                        (1.0 - dy) * (1.0 - dx),
                        (1.0 - dy) * dx,
                        dy * (1.0 - dx),
                        dy * dx,
                    ];
                    let idx = [
                        y0 * side + x0,
                        y0 * side + x1,
                        y1 * side + x0,
                        y1 * side + x1,
                    ];
                    let dst = &mut img[(r * w + col) * c..][..c];
                    for (j, d) in dst.iter_mut().enumerate() {
                        let v: [f32; 4] = std::array::from_fn(|q| table[idx[q] * c + j] * wts[q]);
                        *d = v[0] + v[1] + v[2] + v[3];
                    }
                }
            }
            let order = merge_block_order(h, w, m);
            for _ in 0..t {
                for &(r, col) in &order {
                    out.extend_from_slice(&img[(r * w + col) * c..][..c]);
                }
            }
        }
        out
    }
}

/// `(floor, ceil, frac)` of `torch.linspace(0, side − 1, steps)` in f32 (start + step·i below
/// the midpoint, end − step·(steps − 1 − i) from it, as torch evaluates it).
fn linspace_taps(side: usize, steps: usize) -> Vec<(usize, usize, f32)> {
    let end = (side - 1) as f32;
    let step = if steps > 1 {
        end / (steps - 1) as f32
    } else {
        0.0
    };
    (0..steps)
        .map(|i| {
            let v = if i < steps / 2 {
                step * i as f32
            } else {
                end - step * (steps - 1 - i) as f32
            };
            let f = v as usize; // truncation = floor for v >= 0
            (f, (f + 1).min(side - 1), v - f as f32)
        })
        .collect()
}

/// (row, col) of the `h × w` patches in merge-block order: block row, block col, then the
/// `m × m` patches of the block row-major.
fn merge_block_order(h: usize, w: usize, m: usize) -> Vec<(usize, usize)> {
    let mut order = Vec::with_capacity(h * w);
    for br in 0..h / m {
        for bc in 0..w / m {
            for r in 0..m {
                for c in 0..m {
                    order.push((br * m + r, bc * m + c));
                }
            }
        }
    }
    order
}

/// `rot_pos_emb`: per patch (merge-block order, repeated over t) `[row · inv_freq, col ·
/// inv_freq]`, `inv_freq = 1 / 10000^(2i / (hd/2))`, `i < hd/4`; `[patches, hd/2]`, f32.
fn rot_pos_freqs(grid_thw: &[[usize; 3]], m: usize, hd: usize) -> Vec<f32> {
    let inv = super::rope::inv_freq(hd / 2, 10_000.0);
    let mut out = Vec::new();
    for &[t, h, w] in grid_thw {
        let order = merge_block_order(h, w, m);
        for _ in 0..t {
            for &(r, c) in &order {
                out.extend(inv.iter().map(|&f| r as f32 * f));
                out.extend(inv.iter().map(|&f| c as f32 * f));
            }
        }
    }
    out
}
