//! The action head's DiT (`AlternateVLDiT`): weights, the executor seam and the CPU executor.
//!
//! Block `i` is self-attention over the state/action tokens when `i` is odd, and otherwise
//! cross-attention to the VL tokens: to the text tokens (image mask false) when
//! `i % (2·attend_text_every_n_blocks) == 0`, to the image tokens otherwise. Every block is
//! AdaLN (scale, shift from SiLU(temb)) → attention → residual → LN → GELU-tanh FF → residual.
//! The output layer is LN(eps 1e-6)·(1 + scale) + shift with (shift, scale) from `proj_out_1`,
//! then `proj_out_2`.

use super::ModelError;
use super::layers::{Linear, add_assign, attend_residual};
use super::taps::Taps;
use crate::config::Gr00tConfig;
use crate::cpu::attention::{AttnShape, KeyMask};
use crate::cpu::norms::{gelu_tanh, layer_norm, silu};
use crate::policy::HostStages;
use crate::weights::{WeightError, WeightSource};
use std::sync::{Arc, Mutex};

const PREFIX: &str = "action_head.model";

/// What a DiT block attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// Cross-attention to the non-image VL tokens.
    CrossText,
    /// Cross-attention to the image VL tokens.
    CrossImage,
    /// Self-attention over the state + action tokens.
    SelfAttn,
}

impl BlockKind {
    /// The reference's choice by block index.
    pub fn of(index: usize, attend_text_every_n_blocks: usize) -> Self {
        if index % 2 == 1 {
            BlockKind::SelfAttn
        } else if index.is_multiple_of(2 * attend_text_every_n_blocks) {
            BlockKind::CrossText
        } else {
            BlockKind::CrossImage
        }
    }
}

/// One `BasicTransformerBlock`.
pub struct DitBlock {
    /// Cross-text, cross-image or self-attention, by block index ([`BlockKind::of`]).
    pub kind: BlockKind,
    /// `norm1.linear`: D → 2D, chunks (scale, shift).
    pub ada: Linear,
    /// `attn1.to_q`: D → D.
    pub q: Linear,
    /// Input width = backbone width for cross blocks, D for self blocks.
    pub k: Linear,
    /// `attn1.to_v`: same input width as `k`.
    pub v: Linear,
    /// `attn1.to_out.0`: D → D.
    pub out: Linear,
    /// `ff.net.0.proj`: D → 4D, followed by GELU-tanh.
    pub ff1: Linear,
    /// `ff.net.2`: 4D → D.
    pub ff2: Linear,
}

/// A cached `(SiLU(temb), modulations)` pair.
type ModulationEntry = (Vec<f32>, Arc<Vec<f32>>);

/// All DiT weights except the timestep encoder (which lives in the action head, shared by
/// every executor).
pub struct DitWeights {
    /// `transformer_blocks.{i}`, `num_layers` of them.
    pub blocks: Vec<DitBlock>,
    /// D → 2D, chunks (shift, scale).
    pub proj_out_1: Linear,
    /// `proj_out_2`: D → `output_dim`.
    pub proj_out_2: Linear,
    /// Attention heads per block.
    pub heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Token width `D` = `heads * head_dim` (`input_embedding_dim`).
    pub dim: usize,
    /// Output width (`diffusion_model_cfg.output_dim`).
    pub out_dim: usize,
    /// AdaLN/output modulations by SiLU(temb): they depend only on the timestep, of which the
    /// Euler loop uses a fixed few, so they are computed once and reused across observations.
    modulation_cache: Mutex<Vec<ModulationEntry>>,
}

impl DitWeights {
    /// Loads `action_head.model.{transformer_blocks.*, proj_out_1, proj_out_2}`; cross blocks' K/V take the backbone width, self blocks' take D.
    pub fn load(ws: &dyn WeightSource, cfg: &Gr00tConfig) -> Result<Self, WeightError> {
        let dc = &cfg.diffusion_model_cfg;
        let d = dc.num_attention_heads * dc.attention_head_dim;
        let vl = cfg.backbone_embedding_dim;
        let mut blocks = Vec::with_capacity(dc.num_layers);
        for i in 0..dc.num_layers {
            let kind = BlockKind::of(i, cfg.attend_text_every_n_blocks);
            let kv_in = if kind == BlockKind::SelfAttn { d } else { vl };
            let b = format!("{PREFIX}.transformer_blocks.{i}");
            let lin = |name: &str, k, n| Linear::load(ws, &format!("{b}.{name}"), k, n, true);
            blocks.push(DitBlock {
                kind,
                ada: lin("norm1.linear", d, 2 * d)?,
                q: lin("attn1.to_q", d, d)?,
                k: lin("attn1.to_k", kv_in, d)?,
                v: lin("attn1.to_v", kv_in, d)?,
                out: lin("attn1.to_out.0", d, d)?,
                ff1: lin("ff.net.0.proj", d, 4 * d)?,
                ff2: lin("ff.net.2", 4 * d, d)?,
            });
        }
        Ok(Self {
            blocks,
            proj_out_1: Linear::load(ws, &format!("{PREFIX}.proj_out_1"), d, 2 * d, true)?,
            proj_out_2: Linear::load(ws, &format!("{PREFIX}.proj_out_2"), d, dc.output_dim, true)?,
            heads: dc.num_attention_heads,
            head_dim: dc.attention_head_dim,
            dim: d,
            out_dim: dc.output_dim,
            modulation_cache: Mutex::new(Vec::new()),
        })
    }

    /// `[blocks + 1][2D]`: each block's `norm1.linear(act)` (scale, shift), then
    /// `proj_out_1(act)` (shift, scale), for `act` = SiLU(temb).
    pub fn modulations(&self, act: &[f32]) -> Arc<Vec<f32>> {
        const KEEP: usize = 16;
        let mut cache = self
            .modulation_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((_, m)) = cache.iter().find(|(k, _)| k.as_slice() == act) {
            return m.clone();
        }
        let mut m = Vec::with_capacity((self.blocks.len() + 1) * 2 * self.dim);
        for b in &self.blocks {
            m.extend(b.ada.forward(act, 1));
        }
        m.extend(self.proj_out_1.forward(act, 1));
        let m = Arc::new(m);
        if cache.len() >= KEEP {
            cache.remove(0);
        }
        cache.push((act.to_vec(), m.clone()));
        m
    }
}

/// The VL tokens the cross-attention blocks read (after `vlln`), with the image mask.
#[derive(Debug, Clone, Copy)]
pub struct VlContext<'a> {
    /// `[seq, dim]` row-major.
    pub vl_embeds: &'a [f32],
    /// VL tokens (`seq`, the rows of `vl_embeds`).
    pub seq: usize,
    /// Width of the VL tokens (`backbone_embedding_dim`).
    pub dim: usize,
    /// `input_ids == image_token_index`, length `seq`.
    pub image_mask: &'a [bool],
}

/// Runs the DiT stack. The action head calls `prepare` once per observation, then `run` once
/// per Euler step; another backend (the megakernel emulator) implements this to take over the
/// DiT while reusing the encoders, timestep embedding and decoder of [`super::ActionHead`].
pub trait DitExecutor {
    /// Observation-level setup: e.g. the cross-attention K/V of the VL tokens, which do not
    /// depend on the timestep.
    fn prepare(&mut self, ctx: &VlContext<'_>) -> Result<(), ModelError>;
    /// One DiT evaluation: `sa` `[tokens, D]` (state token + action tokens with position
    /// embedding), `temb` `[D]` → `[tokens, output_dim]`. Emits `flow.step{step}.dit_block{i}`
    /// and `flow.step{step}.dit_output` taps where it can.
    fn run(
        &mut self,
        step: usize,
        sa: &[f32],
        tokens: usize,
        temb: &[f32],
        taps: &mut Taps<'_>,
    ) -> Result<Vec<f32>, ModelError>;

    /// The whole flow-matching loop where the executor runs the action head itself (the
    /// device's one graph per forward), after [`DitExecutor::prepare`]; `None` when it does
    /// not (the host runs the loop and calls [`DitExecutor::run`] per step).
    fn run_flow(
        &mut self,
        _flow: &FlowInputs<'_>,
        _taps: &mut Taps<'_>,
    ) -> Option<Result<Vec<f32>, ModelError>> {
        None
    }

    /// The action head's stages the host ran in this executor's flows: the whole loop unless
    /// the executor took some of it (the DiT, or the whole flow) to a device.
    fn host_stages(&self) -> HostStages {
        HostStages::HEAD
    }
}

/// What [`DitExecutor::run_flow`] gets: the head's inputs, and what the host computes once per
/// timestep for it (the timestep embeddings, the action encoder's sinusoidal encodings).
#[derive(Debug, Clone, Copy)]
pub struct FlowInputs<'a> {
    /// The normalised state `[max_state_dim]`.
    pub state: &'a [f32],
    /// The embodiment's projector index.
    pub embodiment: usize,
    /// x₀ `[horizon, max_action_dim]`.
    pub noise: &'a [f32],
    /// Per denoising step: `timestep_encoder(τ)` `[D]`.
    pub temb: &'a [Vec<f32>],
    /// Per denoising step: the action encoder's sinusoidal encoding of τ `[D]`.
    pub tau_enc: &'a [Vec<f32>],
    /// The action position embedding's rows `[horizon, D]`.
    pub pos: &'a [f32],
}

/// The CPU executor: K/V of the cross blocks computed once per observation, only for the
/// tokens each block may attend to.
pub struct CpuDit<'w> {
    w: &'w DitWeights,
    /// Per block: compact (K, V) `[n_keys, D]` for cross blocks, empty for self blocks.
    kv: Vec<(Vec<f32>, Vec<f32>, usize)>,
}

impl<'w> CpuDit<'w> {
    /// An executor over `w`; [`DitExecutor::prepare`] must run before the first [`DitExecutor::run`].
    pub fn new(w: &'w DitWeights) -> Self {
        Self { w, kv: Vec::new() }
    }
}

impl DitExecutor for CpuDit<'_> {
    fn prepare(&mut self, ctx: &VlContext<'_>) -> Result<(), ModelError> {
        let gather = |want_image: bool| -> (Vec<f32>, usize) {
            let mut rows = Vec::new();
            let mut n = 0;
            for (t, &im) in ctx.image_mask.iter().enumerate() {
                if im == want_image {
                    rows.extend_from_slice(&ctx.vl_embeds[t * ctx.dim..(t + 1) * ctx.dim]);
                    n += 1;
                }
            }
            (rows, n)
        };
        let (text, n_text) = gather(false);
        let (image, n_image) = gather(true);
        self.kv = self
            .w
            .blocks
            .iter()
            .map(|b| {
                let (src, n) = match b.kind {
                    BlockKind::SelfAttn => return (Vec::new(), Vec::new(), 0),
                    BlockKind::CrossText => (&text, n_text),
                    BlockKind::CrossImage => (&image, n_image),
                };
                (b.k.forward(src, n), b.v.forward(src, n), n)
            })
            .collect();
        Ok(())
    }

    fn run(
        &mut self,
        step: usize,
        sa: &[f32],
        tokens: usize,
        temb: &[f32],
        taps: &mut Taps<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        let w = self.w;
        let d = w.dim;
        if self.kv.len() != w.blocks.len() {
            return Err(ModelError::NotPrepared("CpuDit::run"));
        }
        w.check_step_inputs(sa, tokens, temb)?;
        let mut act = temb.to_vec();
        silu(&mut act);
        let mods = w.modulations(&act);
        let mut x = sa.to_vec();
        let mut h = vec![0.0f32; tokens * d];
        let mut q = vec![0.0f32; tokens * d];
        let mut ks = vec![0.0f32; tokens * d];
        let mut vs = vec![0.0f32; tokens * d];
        let mut a = vec![0.0f32; tokens * d];
        let mut ff = vec![0.0f32; tokens * 4 * d];
        for (i, b) in w.blocks.iter().enumerate() {
            let (sc, sh) = mods[i * 2 * d..(i + 1) * 2 * d].split_at(d);
            h.copy_from_slice(&x);
            modulated_norm(&mut h, d, 1e-5, sc, sh);
            b.q.forward_into(&h, tokens, &mut q);
            let (k, v, n) = match b.kind {
                BlockKind::SelfAttn => {
                    b.k.forward_into(&h, tokens, &mut ks);
                    b.v.forward_into(&h, tokens, &mut vs);
                    (&ks[..], &vs[..], tokens)
                }
                _ => {
                    let (k, v, n) = &self.kv[i];
                    (&k[..], &v[..], *n)
                }
            };
            let shape = AttnShape {
                q_len: tokens,
                kv_len: n,
                heads: w.heads,
                kv_heads: w.heads,
                head_dim: w.head_dim,
                q_stride: d,
                kv_stride: d,
            };
            attend_residual(
                &q,
                k,
                v,
                shape,
                KeyMask::All,
                &b.out,
                &mut a,
                &mut h,
                &mut x,
            );
            h.copy_from_slice(&x);
            layer_norm(&mut h, d, None, None, 1e-5);
            b.ff1.forward_into(&h, tokens, &mut ff);
            gelu_tanh(&mut ff);
            b.ff2.forward_into(&ff, tokens, &mut h);
            add_assign(&mut x, &h);
            taps.emit_with(
                || format!("flow.step{step}.dit_block{i}"),
                &[1, tokens, d],
                &x,
            );
        }
        let nb = w.blocks.len();
        let (shift, sc) = mods[nb * 2 * d..(nb + 1) * 2 * d].split_at(d);
        Ok(w.output_head(x, shift, sc, tokens, step, taps))
    }
}

impl DitWeights {
    /// Every executor's input check: `sa` `[tokens, D]`, `temb` `[D]`.
    pub fn check_step_inputs(
        &self,
        sa: &[f32],
        tokens: usize,
        temb: &[f32],
    ) -> Result<(), ModelError> {
        let d = self.dim;
        if sa.len() != tokens * d {
            return Err(ModelError::Length {
                what: "input sa",
                got: sa.len(),
                expected: tokens * d,
            });
        }
        if temb.len() != d {
            return Err(ModelError::Length {
                what: "input temb",
                got: temb.len(),
                expected: d,
            });
        }
        Ok(())
    }

    /// The DiT's output head after the blocks, shared by every executor: the final AdaLN
    /// (`shift`, `scale` from `proj_out_1(silu(temb))`), `proj_out_2`, and the
    /// `flow.step{step}.dit_output` tap. `x`: `[tokens, D]` → `[tokens, output_dim]`.
    pub fn output_head(
        &self,
        mut x: Vec<f32>,
        shift: &[f32],
        scale: &[f32],
        tokens: usize,
        step: usize,
        taps: &mut Taps<'_>,
    ) -> Vec<f32> {
        modulated_norm(&mut x, self.dim, 1e-6, scale, shift);
        let out = self.proj_out_2.forward(&x, tokens);
        taps.emit_with(
            || format!("flow.step{step}.dit_output"),
            &[1, tokens, self.out_dim],
            &out,
        );
        out
    }
}

/// LN(x; no affine)·(1 + scale) + shift, row-wise, in place.
pub fn modulated_norm(x: &mut [f32], d: usize, eps: f32, scale: &[f32], shift: &[f32]) {
    layer_norm(x, d, None, None, eps);
    for row in x.chunks_exact_mut(d) {
        for j in 0..d {
            row[j] = row[j] * (1.0 + scale[j]) + shift[j];
        }
    }
}
