//! The DiT blocks on the device with their activations kept there: a denoising step is one
//! worker exchange (`op: graph`) that runs every block's programs back to back over named
//! device tensors, the residual stream included, so only the step's tokens go in and the last
//! block's stream comes back. The worker keeps the step's graph, and later steps replay it with
//! their tokens alone (`backend/steps.rs`, docs/blackhole.md §14–15).
//!
//! A matmul and its end (`kernels/bias_act_rows.cpp`: the K pieces summed, the bias, bf16, GELU
//! or the residual add) are one program, and so is the LayerNorm or attention before it when it
//! makes the matmul's input: the matmul kernels on the plan's cores, the others' on the
//! grid's other cores, and between the phases a barrier on the device (each core's writer
//! increments a semaphore on every core of the next phase once its writes are acknowledged; that
//! phase's reader waits for all of them). Independent matmuls (a self block's Q, K and V) share
//! it too.
//!
//! Every block's AdaLN rows depend on SiLU(temb) alone, so on the timestep alone: they are
//! computed once per timestep and device ([`ada_graph`]), and a step reads them. Per block (the
//! emulator's `run_step_with`, op for op): LayerNorm with the AdaLN modulation
//! (`kernels/layernorm_rows.cpp`, `GR00T_LN_ONE_PLUS_G`; its reader splits the `[scale | shift]`
//! row) → Q (and K, V for a self block, in the same program) → attention per head
//! (`kernels/attention_head.cpp`; its reader cuts the heads out of the `[tokens, D]`
//! projections, its writer puts them back) → the output projection, whose end adds the residual
//! stream (`GR00T_FINISH_RESIDUAL`) → the plain LayerNorm → FF-up with GELU → FF-down, whose end
//! adds the stream again. Every step holds a matmul: 4 per block (32 for the tiny
//! config's 8 blocks; 33 while the AdaLN matmuls were the step's first: the AdaLN LayerNorm with Q (K, V), attention with the output projection,
//! the plain LayerNorm with FF-up, FF-down). Consecutive steps run as ONE program while
//! the grid, the compute kernels' runtime args and the task tables hold them: the plan packs
//! them, shares the other cores out to the phase groups (each phase names its `group`: phases
//! with the same kernels, whose cores do each of them in turn) and gives every phase its cores
//! (`tt_blackhole::plan::program`, [`Graph::request`]); the worker runs them as given
//! (docs/blackhole.md §12–13): a whole denoising step is one program, the tiny config's and the
//! full-size one's. (Programs per tiny step before: 33 with a program per step, 57 with the
//! LayerNorms and attention programs of their own, 90 with each matmul's end too, 106 with the
//! residual adds too, 168 when relayouts and one matmul per program made them 24 and 18; a
//! full-size cross block's 5 steps were 2 while every phase had cores of its own.)
//!
//! The cross blocks' K and V depend only on the observation's context: [`observation_graph`]
//! computes them once per observation into device tensors the steps read.
//!
//! Tensor names: `c/…` live as long as the device (the scaler tile, the plain LayerNorm's
//! vectors, the biases, each timestep's AdaLN rows), `o/…` one observation, `a/…` one
//! timestep's graph, `t/…` one step (released at its end, or kept with the step's graph for
//! the next step to replay: [`step_inputs`]).

use tt_blackhole::bf16::{f32_to_bf16_bits, round_to_bf16};
use tt_blackhole::device::DitRunError;
use tt_blackhole::dims::WeightKind;
use tt_blackhole::plan::MegakernelPlan;

use super::backend::TtDevice;
use super::gather::{TokenSource, ids_tile};
use super::graph_builder::End;
pub(crate) use super::graph_builder::Graph;
use super::protocol::{ActDtype, Put, TensorSpec};
use gr00t_runtime::model::dit::{BlockKind, DitWeights};

/// The column relayout between tensors (data movement only).
pub const RELAYOUT_KERNEL: &str = include_str!("kernels/relayout_tiles.cpp");
/// The reader of a matmul's end: a unit's bias, then each output tile's K-piece partials.
pub const READER_FINISH_KERNEL: &str = include_str!("kernels/reader_finish.cpp");
/// The writer of a matmul's end: runs of tiles, into one output tensor or several.
pub const WRITER_RUNS_KERNEL: &str = include_str!("kernels/writer_runs.cpp");

/// A score's value for a key that may not be attended: its weight is 0.
const MASKED: f32 = -1.0e30;
/// LayerNorm's epsilon in the DiT (`norm1`, `norm3`: eps 1e-5, no affine).
pub(super) const LN_EPS: f32 = 1e-5;
pub(super) fn tiles(n: usize) -> usize {
    n.div_ceil(32)
}

/// A named device tensor with its values, for `put` and a graph's inputs.
pub(crate) struct Upload {
    specs: Vec<TensorSpec>,
    values: Vec<f32>,
}

impl Upload {
    pub(crate) fn new() -> Self {
        Upload {
            specs: Vec::new(),
            values: Vec::new(),
        }
    }

    /// `values` `[rows, cols]` (whole tiles) as `name`, stored as `dtype`.
    pub(super) fn add(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        dtype: ActDtype,
        values: &[f32],
    ) {
        debug_assert_eq!(values.len(), rows * cols);
        self.specs.push(TensorSpec {
            name: name.into(),
            rows,
            cols,
            dtype,
            real: None,
            at: None,
        });
        self.values.extend_from_slice(values);
    }

    /// `x` `[rows, cols]` as a `[rows_p, cols_p]` tensor: only the real values are sent, the
    /// worker zero-pads them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_padded(
        &mut self,
        name: &str,
        x: &[f32],
        rows: usize,
        cols: usize,
        rows_p: usize,
        cols_p: usize,
        dtype: ActDtype,
    ) {
        self.push_real(name, x, [rows, cols], None, [rows_p, cols_p], dtype);
    }

    /// `x` `[rows, cols]` put at row `at[0]`, column `at[1]` of a `[rows_p, cols_p]` tensor,
    /// the rest zero: only `x` is sent.
    pub(super) fn add_at(
        &mut self,
        name: &str,
        x: &[f32],
        [rows, cols]: [usize; 2],
        at: [usize; 2],
        [rows_p, cols_p]: [usize; 2],
        dtype: ActDtype,
    ) {
        debug_assert!(at[0] + rows <= rows_p && at[1] + cols <= cols_p);
        self.push_real(name, x, [rows, cols], Some(at), [rows_p, cols_p], dtype);
    }

    /// `x`, the `[rows, cols]` values sent of a `[rows_p, cols_p]` tensor, at `at` (default its
    /// origin).
    fn push_real(
        &mut self,
        name: &str,
        x: &[f32],
        [rows, cols]: [usize; 2],
        at: Option<[usize; 2]>,
        [rows_p, cols_p]: [usize; 2],
        dtype: ActDtype,
    ) {
        debug_assert_eq!(x.len(), rows * cols);
        self.specs.push(TensorSpec {
            name: name.into(),
            rows: rows_p,
            cols: cols_p,
            dtype,
            real: Some([rows, cols]),
            at,
        });
        self.values.extend_from_slice(x);
    }

    pub(crate) fn specs(&self) -> &[TensorSpec] {
        &self.specs
    }

    /// The `put` request of these tensors.
    pub(crate) fn put(&self) -> Put {
        Put {
            tensors: self.specs.clone(),
        }
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        payload(&self.specs, &self.values)
    }
}

/// The payload of `specs` filled from `values` in order: each tensor's values sent (`real`, else
/// all) as the tensor stores them, bf16 (2 bytes, rounded to nearest even, as the device would
/// round them) or f32 (4 bytes), little-endian.
pub(crate) fn payload(specs: &[TensorSpec], values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * values.len());
    let mut at = 0;
    for s in specs {
        let [r, c] = s.real.unwrap_or([s.rows, s.cols]);
        let v = &values[at..at + r * c];
        at += r * c;
        match s.dtype {
            ActDtype::Bf16 => {
                out.extend(v.iter().flat_map(|x| f32_to_bf16_bits(*x).to_le_bytes()));
            }
            ActDtype::F32 => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        }
    }
    debug_assert_eq!(at, values.len(), "values the specs do not take");
    out
}
/// The device-lifetime constants: the reduce scaler tile, the plain LayerNorm's g (1 on the
/// real columns) and b (0), every block's biases replicated over 32 rows (bf16 values, as they
/// sit in L1; zero past the real columns, so padding columns stay 0 through every op).
pub(crate) fn constants(dev: &TtDevice, w: &DitWeights) -> Result<Upload, DitRunError> {
    let mut up = Upload::new();
    up.add(
        "c/scaler",
        32,
        32,
        ActDtype::F32,
        &super::one_program::scaler_tile(),
    );
    let (d, dw) = (w.dim, tiles(w.dim) * 32);
    let mut ones = vec![0f32; 32 * dw];
    ones[..d].fill(1.0);
    up.add("c/ones", 32, dw, ActDtype::F32, &ones);
    up.add("c/zeros", 32, dw, ActDtype::F32, &vec![0f32; 32 * dw]);
    for (i, b) in w.blocks.iter().enumerate() {
        for (kind, lin) in [
            (WeightKind::AdaNorm, &b.ada),
            (WeightKind::Q, &b.q),
            (WeightKind::K, &b.k),
            (WeightKind::V, &b.v),
            (WeightKind::Out, &b.out),
            (WeightKind::FfUp, &b.ff1),
            (WeightKind::FfDown, &b.ff2),
        ] {
            let e = dev
                .index
                .entry(i, kind)
                .ok_or_else(|| DitRunError::Arena(format!("no block {i} {kind:?}")))?;
            let cols = e.tiles[1] * 32;
            let mut row = vec![0f32; cols];
            if let Some(bias) = &lin.b {
                for (r, v) in row.iter_mut().zip(bias) {
                    *r = round_to_bf16(*v);
                }
            }
            let rep: Vec<f32> = (0..32).flat_map(|_| row.iter().copied()).collect();
            up.add(&bias_name(i, kind), 32, cols, ActDtype::F32, &rep);
        }
    }
    Ok(up)
}

pub(super) fn bias_name(block: usize, kind: WeightKind) -> String {
    format!("c/bias/{block}/{kind:?}")
}

/// The key mask row (0: may attend; [`MASKED`]: padding or masked out) as `[32, np]`, row 0.
pub(super) fn mask_tile(keep: &[bool], np: usize) -> Vec<f32> {
    let mut m = vec![0f32; 32 * np];
    for (j, v) in m[..np].iter_mut().enumerate() {
        *v = if keep.get(j).copied().unwrap_or(false) {
            0.0
        } else {
            MASKED
        };
    }
    m
}

/// Rows of `x` (`[rows, d]`) where `mask` is true, and how many.
fn select_rows(x: &[f32], d: usize, mask: &[bool]) -> (Vec<f32>, usize) {
    let mut out = Vec::new();
    for (row, _) in x.chunks_exact(d).zip(mask).filter(|(_, k)| **k) {
        out.extend(row.iter().map(|v| round_to_bf16(*v)));
    }
    let n = out.len() / d.max(1);
    (out, n)
}

/// Key rows each cross kind attends (text, image), from the observation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CrossKeys {
    pub text: usize,
    pub image: usize,
}

/// Where an observation's VL context is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Context<'a> {
    /// On the host: its text and image rows go to the device as bf16.
    Host(&'a [f32]),
    /// On the device, the fp32 tensor the backbone wrote (`[32·⌈tokens/32⌉, ⌈cross/32⌉·32]`):
    /// its text and image rows are gathered there, only their indices go.
    Device(&'a str),
}

/// A key mask's row as the attention reads it (row 0 of its tile; only it is sent).
fn add_mask(up: &mut Upload, name: &str, keep: &[bool], np: usize) {
    let row = mask_tile(keep, np);
    up.add_padded(name, &row[..np], 1, np, 32, np, ActDtype::F32);
}

/// The observation's graph: its context rows (bf16, sent or gathered on the device) and key
/// masks on the device, every cross block's K and V computed there once, in the per-head
/// layout the steps read.
pub(crate) fn observation_graph<'a>(
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    w: &DitWeights,
    context: Context<'_>,
    text_mask: &[bool],
    image_mask: &[bool],
) -> Result<(Graph<'a>, Upload, CrossKeys), DitRunError> {
    let dims = &plan.dims;
    let cross = dims.cross_dim;
    let cw = tiles(cross) * 32;
    let mut up = Upload::new();
    let mut g = Graph::new(dev, plan);
    g.scratch = "o";
    let mut keys = CrossKeys::default();
    let self_np = tiles(dims.sa_tokens) * 32;
    add_mask(&mut up, "o/mask/self", &vec![true; dims.sa_tokens], self_np);
    for (which, mask) in [("text", text_mask), ("image", image_mask)] {
        let ctx = format!("o/ctx/{which}");
        let n = mask.iter().filter(|k| **k).count();
        let np = tiles(n.max(1)) * 32;
        match context {
            Context::Host(values) => {
                let (rows, n) = select_rows(values, cross, mask);
                up.add_padded(&ctx, &rows, n, cross, np, cw, ActDtype::Bf16);
            }
            Context::Device(t) if n > 0 => {
                let rows: Vec<TokenSource> = (mask.iter().enumerate())
                    .filter(|(_, k)| **k)
                    .map(|(i, _)| TokenSource::Image(i))
                    .collect();
                let ids = ids_tile(&rows);
                let name = format!("o/ids/{which}");
                up.add_padded(&name, &ids[..n], 1, n, 32, np, ActDtype::F32);
                g.gather_rows_to(&name, n, [t, t], cross, (&ctx, false))?;
            }
            // No keys: the blocks of this kind take none (below).
            Context::Device(_) => {}
        }
        add_mask(&mut up, &format!("o/mask/{which}"), &vec![true; n], np);
        if which == "text" {
            keys.text = n;
        } else {
            keys.image = n;
        }
    }
    // Every cross block's K and V: independent matmuls, one program (and one for their ends).
    let mut jobs = Vec::new();
    for (i, b) in w.blocks.iter().enumerate() {
        let (ctx, n) = match b.kind {
            BlockKind::SelfAttn => continue,
            BlockKind::CrossText => ("o/ctx/text", keys.text),
            BlockKind::CrossImage => ("o/ctx/image", keys.image),
        };
        if n == 0 {
            continue; // no keys: the block's attention gives 0 without K and V
        }
        for (kind, name) in [(WeightKind::K, "k"), (WeightKind::V, "v")] {
            jobs.push((i, kind, ctx, n, format!("o/{name}/{i}")));
        }
    }
    if !jobs.is_empty() {
        g.matmuls(&jobs, End::Plain, false)?;
    }
    Ok((g, up, keys))
}

/// A step's inputs: `tokens` `[m, d]` (the fp32 stream) as `t/x0`; all a replay of the step's
/// kept graph sends (SiLU(temb) went in with its timestep's graph, [`ada_graph`]).
pub(crate) fn step_inputs(d: usize, tokens: &[f32]) -> Upload {
    let m = tokens.len() / d;
    let mut up = Upload::new();
    up.add_padded(
        "t/x0",
        tokens,
        m,
        d,
        tiles(m) * 32,
        tiles(d) * 32,
        ActDtype::F32,
    );
    up
}

/// The name of block `block`'s AdaLN rows (`[scale | shift]`, fp32) for the timestep in `slot`.
pub(super) fn ada_name(slot: usize, block: usize) -> String {
    format!("c/ada/{slot}/{block}")
}

/// A timestep's graph: SiLU(temb) (`act`, bf16 values) put as `c/temb/{slot}`, and every block's
/// AdaLN rows computed from it into `c/ada/{slot}/{block}` (the matmuls and their ends, one
/// program). They depend on the timestep alone, and a forward's timesteps are the same every
/// forward: computed once per timestep and device, they leave the steps' weight stream (the
/// AdaLN weights are about 14 % of the bytes a step streamed; docs/blackhole.md §4, §15).
pub(crate) fn ada_graph<'a>(
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    w: &DitWeights,
    act: &[f32],
    slot: usize,
) -> Result<(Graph<'a>, Upload), DitRunError> {
    let d = plan.dims.width();
    let temb = format!("c/temb/{slot}");
    let mut up = Upload::new();
    up.add_padded(&temb, act, 1, d, 32, tiles(d) * 32, ActDtype::Bf16);
    let mut g = Graph::new(dev, plan);
    g.scratch = "a";
    let ada: Vec<_> = (0..w.blocks.len())
        .map(|i| (i, WeightKind::AdaNorm, temb.as_str(), 1, ada_name(slot, i)))
        .collect();
    g.matmuls(&ada, End::Plain, true)?;
    Ok((g, up))
}

/// One denoising step's graph: `tokens` `[sa_tokens, D]` (fp32 stream) in, the AdaLN rows of
/// the timestep in `slot` ([`ada_graph`]) read on the device, the name of the stream after the
/// last block out.
pub(crate) fn step_graph<'a>(
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    w: &DitWeights,
    tokens: &[f32],
    slot: usize,
    keys: CrossKeys,
) -> Result<(Graph<'a>, Upload, String), DitRunError> {
    let d = plan.dims.width();
    let m = tokens.len() / d;
    let up = step_inputs(d, tokens);
    let mut g = Graph::new(dev, plan);
    let x = dit_blocks(&mut g, w, "t/x0", m, slot, keys, "o/mask/self")?;
    Ok((g, up, x))
}

/// Every DiT block over the fp32 stream `x0` (`m` real rows: its tile rows are computed), the
/// AdaLN rows of the timestep in `slot`, the self blocks' key mask `self_mask`; answers the
/// name of the stream after the last block.
pub(crate) fn dit_blocks(
    g: &mut Graph<'_>,
    w: &DitWeights,
    x0: &str,
    m: usize,
    slot: usize,
    keys: CrossKeys,
    self_mask: &str,
) -> Result<String, DitRunError> {
    let d = w.dim;
    let (mt, wt) = (tiles(m), tiles(d));
    let mut x = x0.to_string();
    for (i, b) in w.blocks.iter().enumerate() {
        let (xa, xb) = (format!("t/x{}", 2 * i + 1), format!("t/x{}", 2 * i + 2));
        g.layernorm(&x, d, mt, Some(&ada_name(slot, i)), "t/h");
        let (k, v, mask, n) = match b.kind {
            BlockKind::SelfAttn => {
                // Q, K and V all read h: one program (and one for the ends).
                let qkv = [
                    (WeightKind::Q, "t/q"),
                    (WeightKind::K, "t/k"),
                    (WeightKind::V, "t/v"),
                ]
                .map(|(kind, name)| (i, kind, "t/h", m, name.to_string()));
                g.matmuls(&qkv, End::Plain, false)?;
                ("t/k".into(), "t/v".into(), self_mask.to_string(), m)
            }
            BlockKind::CrossText | BlockKind::CrossImage => {
                g.matmul(i, WeightKind::Q, "t/h", m, "t/q", End::Plain)?;
                let (mask, n) = if b.kind == BlockKind::CrossText {
                    ("o/mask/text", keys.text)
                } else {
                    ("o/mask/image", keys.image)
                };
                (format!("o/k/{i}"), format!("o/v/{i}"), mask.to_string(), n)
            }
        };
        if n == 0 {
            // Attention over no keys is 0 (the emulator's), a zero-filled relayout.
            g.relayout("t/q", wt, "t/a", mt, wt, ActDtype::Bf16, Vec::new());
        } else {
            g.attention("t/q", &k, &v, &mask, mt, tiles(n), "t/a");
        }
        g.matmul(i, WeightKind::Out, "t/a", m, &xa, End::Stream(&x))?;
        g.layernorm(&xa, d, mt, None, "t/h");
        g.matmul(i, WeightKind::FfUp, "t/h", m, "t/f", End::Gelu)?;
        g.matmul(i, WeightKind::FfDown, "t/f", m, &xb, End::Stream(&xa))?;
        x = xb;
    }
    Ok(x)
}
