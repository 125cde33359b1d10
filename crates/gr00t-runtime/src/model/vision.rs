//! SigLIP2 vision tower (Linear patch embedding, bilinear position-embedding resize, pre-LN
//! encoder layers with full per-image attention, post-LayerNorm) and the Eagle projector
//! (2×2 pixel-unshuffle, LayerNorm, Linear, exact GELU, Linear).

use super::layers::{Linear, NormParams, add_assign, attend_residual};
use super::taps::Taps;
use crate::config::{EagleConfig, VisionConfig};
use crate::cpu::attention::{AttnShape, KeyMask};
use crate::cpu::norms::{gelu_erf, gelu_tanh, layer_norm};
use crate::weights::{WeightError, WeightSource};

const PREFIX: &str = "backbone.model.vision_model.vision_model";

struct EncoderLayer {
    ln1: NormParams,
    ln2: NormParams,
    qkv: [Linear; 3],
    out: Linear,
    fc1: Linear,
    fc2: Linear,
}

/// The SigLIP2 tower.
pub struct VisionTower {
    cfg: VisionConfig,
    patch: Linear,
    pos_table: Vec<f32>,
    layers: Vec<EncoderLayer>,
    post_ln: NormParams,
}

impl VisionTower {
    /// Loads the patch embedding, position table, encoder layers and post-LayerNorm of the tower.
    pub fn load(ws: &dyn WeightSource, cfg: &VisionConfig) -> Result<Self, WeightError> {
        let c = cfg.hidden_size;
        let p = cfg.patch_size;
        let patch = Linear::load(
            ws,
            &format!("{PREFIX}.embeddings.patch_embedding"),
            cfg.num_channels * p * p,
            c,
            true,
        )?;
        let pos_table = ws.f32(
            &format!("{PREFIX}.embeddings.position_embedding.weight"),
            &[cfg.num_patches, c],
        )?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let l = format!("{PREFIX}.encoder.layers.{i}");
            let lin = |name: &str, k, n| Linear::load(ws, &format!("{l}.{name}"), k, n, true);
            layers.push(EncoderLayer {
                ln1: NormParams::layer_norm(ws, &format!("{l}.layer_norm1"), c)?,
                ln2: NormParams::layer_norm(ws, &format!("{l}.layer_norm2"), c)?,
                qkv: [
                    lin("self_attn.q_proj", c, c)?,
                    lin("self_attn.k_proj", c, c)?,
                    lin("self_attn.v_proj", c, c)?,
                ],
                out: lin("self_attn.out_proj", c, c)?,
                fc1: lin("mlp.fc1", c, cfg.intermediate_size)?,
                fc2: lin("mlp.fc2", cfg.intermediate_size, c)?,
            });
        }
        let post_ln = NormParams::layer_norm(ws, &format!("{PREFIX}.post_layernorm"), c)?;
        Ok(Self {
            cfg: cfg.clone(),
            patch,
            pos_table,
            layers,
            post_ln,
        })
    }

    /// One image `[3, h, w]` → `[(h/14)·(w/14), hidden]` in raster patch order.
    /// Taps are emitted when `tap` is true (the goldens hold one camera).
    pub fn forward(
        &self,
        pixels: &[f32],
        h: usize,
        w: usize,
        taps: &mut Taps,
        tap: bool,
    ) -> Vec<f32> {
        let cfg = &self.cfg;
        let (p, ch, c) = (cfg.patch_size, cfg.num_channels, cfg.hidden_size);
        let (nh, nw) = (h / p, w / p);
        let t = nh * nw;
        let patches = unfold_patches(pixels, ch, h, w, p);
        let mut x = self.patch.forward(&patches, t);
        if tap {
            taps.emit("vision.patch_embeds", &[t, c], &x);
        }
        let grid = (cfg.num_patches as f64).sqrt() as usize;
        let pos = resize_bilinear(&self.pos_table, grid, grid, c, nh, nw);
        if tap {
            taps.emit("vision.pos_embed_resized", &[1, t, c], &pos);
        }
        for (a, b) in x.iter_mut().zip(&pos) {
            *a += b;
        }
        if tap {
            taps.emit("vision.embeddings", &[1, t, c], &x);
        }
        let mut scratch = LayerScratch::new(t, c, cfg.intermediate_size);
        for i in 0..self.layers.len() {
            self.layer_with(i, &mut x, t, &mut scratch);
            if tap {
                taps.emit_with(|| format!("vision.encoder_layer{i}"), &[1, t, c], &x);
            }
        }
        let eps = cfg.layer_norm_eps as f32;
        layer_norm(
            &mut x,
            c,
            Some(&self.post_ln.w),
            self.post_ln.b.as_deref(),
            eps,
        );
        if tap {
            taps.emit("vision.last_hidden_state", &[1, t, c], &x);
        }
        x
    }
}

impl VisionTower {
    /// Encoder layer `i` over the `t` tokens of `x` (`[t, hidden]`), in place: the pre-LN
    /// attention with its residual, then the pre-LN GELU-tanh MLP with its residual. The
    /// reference a device layer is checked against.
    pub fn encoder_layer(&self, i: usize, x: &mut [f32], t: usize) {
        let mut scratch = LayerScratch::new(t, self.cfg.hidden_size, self.cfg.intermediate_size);
        self.layer_with(i, x, t, &mut scratch);
    }

    fn layer_with(&self, i: usize, x: &mut [f32], t: usize, s: &mut LayerScratch) {
        let cfg = &self.cfg;
        let c = cfg.hidden_size;
        let l = &self.layers[i];
        let heads = cfg.num_attention_heads;
        let eps = cfg.layer_norm_eps as f32;
        let shape = AttnShape {
            q_len: t,
            kv_len: t,
            heads,
            kv_heads: heads,
            head_dim: c / heads,
            q_stride: c,
            kv_stride: c,
        };
        s.h.copy_from_slice(x);
        layer_norm(&mut s.h, c, Some(&l.ln1.w), l.ln1.b.as_deref(), eps);
        l.qkv[0].forward_into(&s.h, t, &mut s.q);
        l.qkv[1].forward_into(&s.h, t, &mut s.k);
        l.qkv[2].forward_into(&s.h, t, &mut s.v);
        attend_residual(
            &s.q,
            &s.k,
            &s.v,
            shape,
            KeyMask::All,
            &l.out,
            &mut s.a,
            &mut s.h,
            x,
        );
        s.h.copy_from_slice(x);
        layer_norm(&mut s.h, c, Some(&l.ln2.w), l.ln2.b.as_deref(), eps);
        l.fc1.forward_into(&s.h, t, &mut s.mlp);
        gelu_tanh(&mut s.mlp);
        l.fc2.forward_into(&s.mlp, t, &mut s.h);
        add_assign(x, &s.h);
    }
}

/// One encoder layer's working buffers, reused from layer to layer.
struct LayerScratch {
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    a: Vec<f32>,
    mlp: Vec<f32>,
}

impl LayerScratch {
    fn new(t: usize, c: usize, inter: usize) -> Self {
        let buf = || vec![0.0f32; t * c];
        LayerScratch {
            h: buf(),
            q: buf(),
            k: buf(),
            v: buf(),
            a: buf(),
            mlp: vec![0.0f32; t * inter],
        }
    }
}

/// The Eagle `mlp1` projector after the 2×2 pixel-unshuffle.
pub struct Projector {
    ln: NormParams,
    fc1: Linear,
    fc2: Linear,
    in_dim: usize,
}

impl Projector {
    /// Loads `backbone.model.mlp1.{0,1,3}`: LayerNorm over 4× the vision width (2×2 pixel-unshuffle), then two Linears to the text width.
    pub fn load(ws: &dyn WeightSource, cfg: &EagleConfig) -> Result<Self, WeightError> {
        let in_dim = cfg.vision_config.hidden_size * 4;
        let d = cfg.text_config.hidden_size;
        Ok(Self {
            ln: NormParams::layer_norm(ws, "backbone.model.mlp1.0", in_dim)?,
            fc1: Linear::load(ws, "backbone.model.mlp1.1", in_dim, d, true)?,
            fc2: Linear::load(ws, "backbone.model.mlp1.3", d, d, true)?,
            in_dim,
        })
    }

    /// Vision output `[nh·nw, c]` → image tokens `[(nh/2)·(nw/2), text hidden]`.
    pub fn forward(
        &self,
        vis: &[f32],
        nh: usize,
        nw: usize,
        taps: &mut Taps,
        tap: bool,
    ) -> Vec<f32> {
        let c = self.in_dim / 4;
        let (oh, ow) = (nh / 2, nw / 2);
        let t = oh * ow;
        // pixel_unshuffle(2): output feature 4c + 2dy + dx holds input (2Y+dy, 2X+dx) channel c.
        let mut x = vec![0.0f32; t * self.in_dim];
        for yy in 0..oh {
            for xx in 0..ow {
                let dst = &mut x[(yy * ow + xx) * self.in_dim..][..self.in_dim];
                for dy in 0..2 {
                    for dx in 0..2 {
                        let src = &vis[((2 * yy + dy) * nw + 2 * xx + dx) * c..][..c];
                        for (cc, &s) in src.iter().enumerate() {
                            dst[4 * cc + 2 * dy + dx] = s;
                        }
                    }
                }
            }
        }
        if tap {
            taps.emit("projector.input", &[1, t, self.in_dim], &x);
        }
        layer_norm(
            &mut x,
            self.in_dim,
            Some(&self.ln.w),
            self.ln.b.as_deref(),
            1e-5,
        );
        let mut h = self.fc1.forward(&x, t);
        gelu_erf(&mut h);
        let y = self.fc2.forward(&h, t);
        if tap {
            taps.emit("projector.output", &[1, t, self.fc2.n], &y);
        }
        y
    }
}

/// The `p × p` patches of a `[ch, h, w]` image in raster order, each flattened (row in patch,
/// column in patch, channel), channel fastest: `[(h/p)·(w/p), p·p·ch]`, what SigLIP2's patch
/// embedding multiplies.
pub fn unfold_patches(pixels: &[f32], ch: usize, h: usize, w: usize, p: usize) -> Vec<f32> {
    let (nh, nw) = (h / p, w / p);
    let pd = ch * p * p;
    let mut patches = vec![0.0f32; nh * nw * pd];
    for py in 0..nh {
        for px in 0..nw {
            let dst = &mut patches[(py * nw + px) * pd..][..pd];
            for dy in 0..p {
                for dx in 0..p {
                    for cc in 0..ch {
                        dst[(dy * p + dx) * ch + cc] =
                            pixels[cc * h * w + (py * p + dy) * w + px * p + dx];
                    }
                }
            }
        }
    }
    patches
}

/// Bilinear resize (half-pixel centers, edge clamp; equal to torch's antialiased bilinear when
/// enlarging) of a `[gh, gw, c]` grid to `[oh, ow, c]`.
pub fn resize_bilinear(
    src: &[f32],
    gh: usize,
    gw: usize,
    c: usize,
    oh: usize,
    ow: usize,
) -> Vec<f32> {
    let axis = |inp: usize, out: usize| -> Vec<(usize, usize, f32)> {
        let scale = inp as f64 / out as f64;
        (0..out)
            .map(|d| {
                let s = ((d as f64 + 0.5) * scale - 0.5).max(0.0);
                let i0 = (s.floor() as usize).min(inp - 1);
                let i1 = (i0 + 1).min(inp - 1);
                (i0, i1, (s - i0 as f64) as f32)
            })
            .collect()
    };
    let ys = axis(gh, oh);
    let xs = axis(gw, ow);
    let mut out = vec![0.0f32; oh * ow * c];
    for (oy, &(y0, y1, ly)) in ys.iter().enumerate() {
        for (ox, &(x0, x1, lx)) in xs.iter().enumerate() {
            let dst = &mut out[(oy * ow + ox) * c..][..c];
            let p00 = &src[(y0 * gw + x0) * c..][..c];
            let p01 = &src[(y0 * gw + x1) * c..][..c];
            let p10 = &src[(y1 * gw + x0) * c..][..c];
            let p11 = &src[(y1 * gw + x1) * c..][..c];
            for j in 0..c {
                let top = p00[j] * (1.0 - lx) + p01[j] * lx;
                let bot = p10[j] * (1.0 - lx) + p11[j] * lx;
                dst[j] = top * (1.0 - ly) + bot * ly;
            }
        }
    }
    out
}
