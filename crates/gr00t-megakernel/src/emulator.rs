//! [`Emulator`]: one denoise step's DiT blocks executed on the CPU the way the megakernel plan
//! runs them on the p150a.
//!
//! Numerics, op by op (the device's choices, not the f32 reference's):
//! * weights: the arena's tiles, decoded exactly (bfp8_b / bfp4_b / bf16), streamed weight by
//!   weight in arena order, as the compute cores' readers do;
//! * matmuls: activations packed to bf16, products accumulated in fp32 over each core's K
//!   range in K order, the K pieces of a split column added in piece order
//!   ([`tt_blackhole::split`]), bias (bf16) added, result packed to bf16;
//! * LayerNorm: every 32-column tile of the row yields an fp32 (sum, sum of squares) partial;
//!   the partials are added in tile order, mean = Σ/D, var = Σx²/D − mean²;
//! * attention: per head, flash-style: 32-key chunks, running max and sum in fp32, the
//!   probabilities packed to bf16 before P·V;
//! * the residual stream stays fp32 (it never leaves the cores owning its columns);
//! * SiLU(temb) and GELU-tanh are computed in fp32 (SFPU) and packed to bf16.
//!
//! Cross-block K/V are recomputed from the context every step, as the plan streams them.

use tt_blackhole::arena::{ArenaEntry, ArenaError, ArenaIndex, decode_weight};
use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::device::{DeviceKind, DitDevice, DitRunError, DitStepInputs};
use tt_blackhole::dims::{DitDims, WeightKind};
use tt_blackhole::plan::{MegakernelPlan, build_plan};
use tt_blackhole::split::MatmulSplit;

use gr00t_runtime::cpu::norms::{gelu_tanh, silu};
use gr00t_runtime::model::dit::{BlockKind, DitWeights};

const TILE: usize = 32;

/// The arena bytes: a validated, mapped cache file or an in-memory build.
pub enum ArenaBytes {
    /// A cache file, memory-mapped: its sealed index checked at open, each weight on first read.
    Mapped(tt_blackhole::arena::Arena),
    /// Built in memory (no cache directory, or the cache could not be used).
    Owned(Vec<u8>),
}

impl ArenaBytes {
    /// The arena's raw bytes, laid out as the [`ArenaIndex`] says.
    pub fn bytes(&self) -> &[u8] {
        match self {
            ArenaBytes::Mapped(a) => a.data(),
            ArenaBytes::Owned(v) => v,
        }
    }

    /// The bytes of weight `e`; a mapped cache checks them against the sealed digest on
    /// first read (its open checks only the index), so a changed file is an error here.
    pub fn weight(&self, e: &ArenaEntry) -> Result<&[u8], ArenaError> {
        match self {
            ArenaBytes::Mapped(a) => a.weight(&e.name),
            ArenaBytes::Owned(v) => Ok(&v[e.offset as usize..(e.offset + e.bytes) as usize]),
        }
    }

    /// The whole arena for a full read (a DRAM upload); a mapped cache checks every weight
    /// not checked yet.
    pub fn verified(&self) -> Result<&[u8], ArenaError> {
        match self {
            ArenaBytes::Mapped(a) => a.verified_data(),
            ArenaBytes::Owned(v) => Ok(v),
        }
    }
}

/// The CPU emulation of the megakernel.
pub struct Emulator<'a> {
    /// Where each weight lies in `arena`.
    pub index: &'a ArenaIndex,
    /// The block-float weights the matmuls decode.
    pub arena: &'a ArenaBytes,
    /// The schedule the step follows, cut for `dims.ctx_tokens`.
    pub plan: MegakernelPlan,
    /// Biases (bf16-rounded) and block kinds come from the model's DiT weights.
    weights: &'a DitWeights,
}

fn pack(v: &mut [f32]) {
    v.iter_mut().for_each(|x| *x = round_to_bf16(*x));
}

impl<'a> Emulator<'a> {
    /// `dims.ctx_tokens` is the context length the plan is cut for (the L1 check uses it).
    pub fn new(
        weights: &'a DitWeights,
        index: &'a ArenaIndex,
        arena: &'a ArenaBytes,
        dims: &DitDims,
    ) -> Result<Self, DitRunError> {
        if arena.bytes().len() as u64 != index.total_bytes {
            return Err(DitRunError::Arena(format!(
                "arena holds {} bytes, its index says {}",
                arena.bytes().len(),
                index.total_bytes
            )));
        }
        if weights.blocks.len() != dims.num_layers || weights.dim != dims.width() {
            return Err(DitRunError::Arena(
                "its dims do not match the model's DiT".into(),
            ));
        }
        let plan = build_plan(dims, index.dtype)?;
        Ok(Emulator {
            index,
            arena,
            plan,
            weights,
        })
    }

    /// The decoded `[K, N]` weight, as the compute cores receive it.
    fn weight(&self, block: usize, kind: WeightKind) -> Result<Vec<f32>, DitRunError> {
        let e = self
            .index
            .entry(block, kind)
            .ok_or_else(|| DitRunError::Arena(format!("no block {block} {kind:?}")))?;
        let bytes = self
            .arena
            .weight(e)
            .map_err(|e| DitRunError::Arena(e.to_string()))?;
        decode_weight(e, self.index.compute_cores, bytes)
            .map_err(|e| DitRunError::Arena(e.to_string()))
    }
}

/// What runs the step's matmuls: the CPU ([`Emulator`]) or a device
/// (`gr00t_device::TtDevice`). The rest of the step (SiLU, LayerNorm, attention's softmax,
/// GELU: the SFPU work) is the shared host code of [`run_step_with`], so a device that runs
/// only the FPU matmuls gets exactly the emulator's numerics around them.
pub trait StepMatmul {
    /// `x` `[m, k]` (bf16 values) · W(block, kind) + bias → `[m, n]` bf16 values.
    fn matmul(
        &self,
        block: usize,
        kind: WeightKind,
        x: &[f32],
        m: usize,
        bias: Option<&[f32]>,
    ) -> Result<Vec<f32>, DitRunError>;
}

impl StepMatmul for Emulator<'_> {
    /// `x` `[m, k]` (bf16 values) · W → `[m, n]` bf16 values, following the plan's split.
    fn matmul(
        &self,
        block: usize,
        kind: WeightKind,
        x: &[f32],
        m: usize,
        bias: Option<&[f32]>,
    ) -> Result<Vec<f32>, DitRunError> {
        let e = self
            .index
            .entry(block, kind)
            .ok_or_else(|| DitRunError::Arena(format!("no block {block} {kind:?}")))?;
        let [k, n] = e.kn_shape;
        let w = self.weight(block, kind)?;
        let split = &self.plan.class(block, kind).split;
        let mut y = split_matmul(x, m, &w, k, n, split);
        finish_matmul(&mut y, n, bias);
        Ok(y)
    }
}

/// Add the bias (rounded to bf16, as it sits in L1) to every row and pack the result to bf16:
/// the end of every matmul, on the emulator and after a device's partial sums alike.
pub fn finish_matmul(y: &mut [f32], n: usize, bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in y.chunks_exact_mut(n) {
            for (v, bb) in row.iter_mut().zip(b) {
                *v += round_to_bf16(*bb);
            }
        }
    }
    pack(y);
}

/// fp32 accumulation per work unit over its K range (in K order); the K pieces of a column
/// are added in piece order, as the piece-0 core receives them.
pub fn split_matmul(
    x: &[f32],
    m: usize,
    w: &[f32],
    k: usize,
    n: usize,
    split: &MatmulSplit,
) -> Vec<f32> {
    let mut y = vec![0f32; m * n];
    let mut acc = Vec::new();
    for u in &split.units {
        let (c0, c1) = (u.n_start * TILE, ((u.n_start + u.n_count) * TILE).min(n));
        let (k0, k1) = (u.k_start * TILE, ((u.k_start + u.k_count) * TILE).min(k));
        if c0 >= c1 || k0 >= k1 {
            continue;
        }
        for r in 0..m {
            acc.clear();
            acc.resize(c1 - c0, 0f32);
            for kk in k0..k1 {
                let xv = x[r * k + kk];
                let wrow = &w[kk * n + c0..kk * n + c1];
                for (a, wv) in acc.iter_mut().zip(wrow) {
                    *a += xv * wv;
                }
            }
            for (yv, a) in y[r * n + c0..r * n + c1].iter_mut().zip(&acc) {
                *yv += a;
            }
        }
    }
    y
}

/// LayerNorm (no affine) from per-tile fp32 partial sums, then `(1 + scale)`, `shift`; packed
/// to bf16 (the activation the next matmul receives).
pub fn norm_from_partials(
    x: &[f32],
    d: usize,
    eps: f32,
    mod_: Option<(&[f32], &[f32])>,
) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    for (row, o) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let (mut s, mut s2) = (0f32, 0f32);
        for tile in row.chunks(TILE) {
            let (mut ps, mut ps2) = (0f32, 0f32);
            for &v in tile {
                ps += v;
                ps2 += v * v;
            }
            s += ps;
            s2 += ps2;
        }
        let mean = s / d as f32;
        let var = (s2 / d as f32 - mean * mean).max(0.0);
        let rstd = 1.0 / (var + eps).sqrt();
        for (j, (ov, &v)) in o.iter_mut().zip(row).enumerate() {
            let h = (v - mean) * rstd;
            *ov = match mod_ {
                Some((scale, shift)) => h * (1.0 + scale[j]) + shift[j],
                None => h,
            };
        }
    }
    pack(&mut out);
    out
}

/// Flash-style SDPA for every head: q `[mq, heads·hd]`, k/v `[mk, heads·hd]` (bf16 values).
/// Keys in chunks of 32; running max / sum in fp32; P packed to bf16 before P·V; the output
/// packed to bf16.
pub fn flash_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    mq: usize,
    mk: usize,
    heads: usize,
    hd: usize,
) -> Vec<f32> {
    let d = heads * hd;
    let scale = (hd as f32).powf(-0.5);
    let mut out = vec![0f32; mq * d];
    for h in 0..heads {
        for i in 0..mq {
            let qi = &q[i * d + h * hd..i * d + (h + 1) * hd];
            let (mut m, mut l) = (f32::NEG_INFINITY, 0f32);
            let mut o = vec![0f32; hd];
            for c0 in (0..mk).step_by(TILE) {
                let c1 = (c0 + TILE).min(mk);
                let s: Vec<f32> = (c0..c1)
                    .map(|j| {
                        let kj = &k[j * d + h * hd..j * d + (h + 1) * hd];
                        qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale
                    })
                    .collect();
                let m_new = s.iter().copied().fold(m, f32::max);
                let corr = (m - m_new).exp();
                l *= corr;
                o.iter_mut().for_each(|x| *x *= corr);
                for (jj, &sv) in s.iter().enumerate() {
                    let p = round_to_bf16((sv - m_new).exp());
                    l += p;
                    let vj = &v[(c0 + jj) * d + h * hd..(c0 + jj) * d + (h + 1) * hd];
                    for (ov, &vv) in o.iter_mut().zip(vj) {
                        *ov += p * vv;
                    }
                }
                m = m_new;
            }
            let dst = &mut out[i * d + h * hd..i * d + (h + 1) * hd];
            for (dv, ov) in dst.iter_mut().zip(&o) {
                *dv = if l > 0.0 { round_to_bf16(ov / l) } else { 0.0 };
            }
        }
    }
    out
}

/// Rows of `x` (`[rows, d]`) where `mask` is true.
fn select_rows(x: &[f32], d: usize, mask: &[bool]) -> (Vec<f32>, usize) {
    let mut out = Vec::new();
    let mut n = 0;
    for (row, &keep) in x.chunks_exact(d).zip(mask) {
        if keep {
            out.extend_from_slice(row);
            n += 1;
        }
    }
    (out, n)
}

/// Re-cut `plan` for `ctx_tokens` context tokens when it was cut for another length (the L1
/// check depends on it): `DitDevice::prepare` of the emulator and of the device backend.
pub fn recut_plan(
    plan: &mut MegakernelPlan,
    ctx_tokens: usize,
    dtype: tt_blackhole::ArenaDtype,
) -> Result<(), DitRunError> {
    if plan.dims.ctx_tokens != ctx_tokens {
        let dims = DitDims {
            ctx_tokens,
            ..plan.dims
        };
        *plan = build_plan(&dims, dtype)?;
    }
    Ok(())
}

impl Emulator<'_> {
    /// The per-step schedule of the plan: every block's ops in order.
    pub fn run_step(&self, inp: &DitStepInputs<'_>) -> Result<Vec<f32>, DitRunError> {
        run_step_with(self, self.weights, &self.plan, inp)
    }
}

/// One step's DiT blocks in the plan's schedule order, the matmuls done by `mm`.
pub fn run_step_with<M: StepMatmul + ?Sized>(
    mm: &M,
    w: &DitWeights,
    plan: &MegakernelPlan,
    inp: &DitStepInputs<'_>,
) -> Result<Vec<f32>, DitRunError> {
    {
        let dims = &plan.dims;
        let (d, hd, heads, cross) = (dims.width(), dims.head_dim, dims.num_heads, dims.cross_dim);
        let tokens = inp.tokens.len() / d;
        if inp.tokens.len() != tokens * d || tokens != dims.sa_tokens || inp.temb.len() != d {
            return Err(DitRunError::Input(format!(
                "tokens {} (want {}x{d}), temb {}",
                inp.tokens.len(),
                dims.sa_tokens,
                inp.temb.len()
            )));
        }
        let ctx_len = inp.context.len() / cross;
        if inp.context.len() != ctx_len * cross
            || inp.text_mask.len() != ctx_len
            || inp.image_mask.len() != ctx_len
        {
            return Err(DitRunError::Input("context and masks disagree".into()));
        }
        // SiLU(temb) goes to the device packed to bf16 (the host computes it); so does the
        // context.
        let mut act = inp.temb.to_vec();
        silu(&mut act);
        pack(&mut act);
        let mut ctx = inp.context.to_vec();
        pack(&mut ctx);
        let text = select_rows(&ctx, cross, inp.text_mask);
        let image = select_rows(&ctx, cross, inp.image_mask);

        let mut x = inp.tokens.to_vec(); // fp32 residual stream
        for (i, b) in w.blocks.iter().enumerate() {
            let bias = |l: &gr00t_runtime::model::layers::Linear| l.b.clone();
            let ada = mm.matmul(i, WeightKind::AdaNorm, &act, 1, bias(&b.ada).as_deref())?;
            let (scale, shift) = ada.split_at(d);
            let h = norm_from_partials(&x, d, 1e-5, Some((scale, shift)));
            let q = mm.matmul(i, WeightKind::Q, &h, tokens, bias(&b.q).as_deref())?;
            let (src, n) = match b.kind {
                BlockKind::SelfAttn => (&h, tokens),
                BlockKind::CrossText => (&text.0, text.1),
                BlockKind::CrossImage => (&image.0, image.1),
            };
            let kk = mm.matmul(i, WeightKind::K, src, n, bias(&b.k).as_deref())?;
            let vv = mm.matmul(i, WeightKind::V, src, n, bias(&b.v).as_deref())?;
            let a = flash_attention(&q, &kk, &vv, tokens, n, heads, hd);
            let o = mm.matmul(i, WeightKind::Out, &a, tokens, bias(&b.out).as_deref())?;
            x.iter_mut().zip(&o).for_each(|(xv, ov)| *xv += ov);
            let h = norm_from_partials(&x, d, 1e-5, None);
            let mut f = mm.matmul(i, WeightKind::FfUp, &h, tokens, bias(&b.ff1).as_deref())?;
            gelu_tanh(&mut f);
            pack(&mut f);
            let o = mm.matmul(i, WeightKind::FfDown, &f, tokens, bias(&b.ff2).as_deref())?;
            x.iter_mut().zip(&o).for_each(|(xv, ov)| *xv += ov);
        }
        Ok(x)
    }
}

impl DitDevice for Emulator<'_> {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Emulator
    }

    /// Re-cut the plan for this context length (fails when it does not fit L1).
    fn prepare(&mut self, ctx_tokens: usize) -> Result<(), DitRunError> {
        recut_plan(&mut self.plan, ctx_tokens, self.index.dtype)
    }

    fn run_blocks(&self, inputs: &DitStepInputs<'_>) -> Result<Vec<f32>, DitRunError> {
        self.run_step(inputs)
    }
}
