//! The action head on the device, one graph per forward (issue 39, item 2): the state
//! encoder, then per denoising step the action encoder, every DiT block, the DiT's output
//! layer, the action decoder and the Euler update, with only the state and the noise going in
//! and the action chunk coming back (docs/blackhole.md §19).
//!
//! The token tensor `t/sa` holds the actions' rows first (tile rows `0..ta`, `ta` =
//! ⌈horizon/32⌉) and the state's row alone in the tile row after them (row `32·ta`): the state
//! encoder writes every tile row of it once per forward, and each step's action encoder writes
//! only the actions' tile rows over it (`FinishJob::out_rows`), so the state's row stays where
//! it was put and nothing moves rows inside a tile. The DiT's self-attention sees the same
//! tokens as the reference's `[state, actions]` (attention has no positions; the key mask
//! keeps the real rows and drops the padding between them), and the output layer, the decoder
//! and the Euler update read the actions' tile rows alone.
//!
//! What depends on the timestep alone is computed once per timestep and device, with the
//! AdaLN rows ([`super::graph::ada_graph`]): the action encoder's time half
//! (`W2[D..2D] · enc(τ) + b2`, the bias of W2's action half) and the output layer's
//! `[scale | shift]` row (`proj_out_1(SiLU(temb))`).
//!
//! The chunk stays fp32 on the device from step to step (the Euler update is the decoder's end,
//! `dt` folded into its weights: `gr00t_megakernel::head_arena`); the action encoder reads it as
//! bf16, which the same end writes a second time, rounded (a second decoder-layer-2 matmul: 1
//! tile column, so the chain is not broken by a copy program).

use tt_blackhole::device::DitRunError;
use tt_blackhole::plan::MegakernelPlan;

use super::backend::TtDevice;
use super::graph::{CrossKeys, Graph, Upload, dit_blocks, mask_tile, tiles};
use super::graph_builder::{End, Job, Weight};
use super::protocol::ActDtype;
use super::vision_graph::bias_rows;
use gr00t_megakernel::head_arena::{HeadArena, HeadWeight};
use gr00t_runtime::model::dit::DitWeights;

/// The head arena's device tensor (uploaded as raw pages, like the DiT arena).
pub(crate) const HEAD_ARENA: &str = "head_arena";
/// The DiT's output LayerNorm epsilon (`norm_out`: eps 1e-6, no affine).
const OUT_LN_EPS: f32 = 1e-6;

/// Where the head's rows sit on the device for a horizon of `hz` actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeadRows {
    /// The actions.
    pub hz: usize,
    /// Their tile rows.
    pub ta: usize,
}

impl HeadRows {
    pub(crate) fn new(hz: usize) -> Self {
        HeadRows { hz, ta: tiles(hz) }
    }

    /// The state's row in the token tensor.
    pub(crate) fn state_row(&self) -> usize {
        32 * self.ta
    }

    /// The token tensor's real rows as a matmul's `m`: every one of its tile rows is read.
    pub(crate) fn token_m(&self) -> usize {
        32 * self.ta + 1
    }

    /// The token tensor's tile rows.
    pub(crate) fn token_tiles(&self) -> usize {
        self.ta + 1
    }

    /// The self-attention keys: the actions and the state, not the padding between.
    pub(crate) fn self_keys(&self) -> Vec<bool> {
        (0..32 * self.token_tiles())
            .map(|j| j < self.hz || j == self.state_row())
            .collect()
    }
}

/// The name of a head weight's bias tensor (device lifetime).
pub(crate) fn head_bias_name(w: HeadWeight) -> String {
    format!("h/bias/{w:?}")
}

/// The action encoder's time half for the timestep in `slot` (`[32, D]`, every row).
pub(crate) fn time_bias_name(slot: usize) -> String {
    format!("c/actbias/{slot}")
}

/// The output layer's `[scale | shift]` row for the timestep in `slot`.
pub(crate) fn out_rows_name(slot: usize) -> String {
    format!("c/projout/{slot}")
}

/// The head's device-lifetime tensors: each weight's bias as it sits in L1 (bf16 values,
/// replicated over 32 rows, zero past the real columns; W2's action half has none: its bias is
/// the timestep's), the action position embedding `pos` (`[hz, D]`) in the actions' tile rows,
/// the self-attention key mask.
pub(crate) fn head_constants(head: &HeadArena, rows: HeadRows, d: usize, pos: &[f32]) -> Upload {
    let mut up = Upload::new();
    for w in HeadWeight::ALL {
        if w == HeadWeight::ActW2Act {
            continue;
        }
        let e = head.entry(w);
        let cols = e.tiles[1] * 32;
        let rows = bias_rows(&e.bias, cols);
        up.add(&head_bias_name(w), 32, cols, ActDtype::F32, &rows);
    }
    let dw = tiles(d) * 32;
    up.add_padded("h/pos", pos, rows.hz, d, 32 * rows.ta, dw, ActDtype::F32);
    let np = 32 * rows.token_tiles();
    up.add(
        "h/mask/self",
        32,
        np,
        ActDtype::F32,
        &mask_tile(&rows.self_keys(), np),
    );
    up
}

/// The head's rows of the timestep in `slot`, appended to its timestep graph `g`: the action
/// encoder's time half from the sinusoidal encoding `tau_enc` (`[D]`, put replicated over 32
/// rows so every row of the product is the bias row) and the output layer's `[scale | shift]`
/// from SiLU(temb) (`c/temb/{slot}`, which the AdaLN rows' graph puts). One program step.
pub(crate) fn head_timestep(
    g: &mut Graph<'_>,
    up: &mut Upload,
    tau_enc: &[f32],
    slot: usize,
) -> Result<(), DitRunError> {
    let d = tau_enc.len();
    let dw = tiles(d) * 32;
    let tau = format!("c/tau/{slot}");
    let mut rep = vec![0f32; 32 * dw];
    for row in rep.chunks_exact_mut(dw) {
        row[..d].copy_from_slice(tau_enc);
    }
    up.add(&tau, 32, dw, ActDtype::Bf16, &rep);
    let jobs = [
        Job {
            weight: Weight::Head(HeadWeight::ActW2Time),
            act: tau.clone(),
            m: 32,
            out: time_bias_name(slot),
            bias: head_bias_name(HeadWeight::ActW2Time),
            out_rows: None,
            out_row0: 0,
        },
        Job {
            weight: Weight::Head(HeadWeight::ProjOut1),
            act: format!("c/temb/{slot}"),
            m: 1,
            out: out_rows_name(slot),
            bias: head_bias_name(HeadWeight::ProjOut1),
            out_rows: None,
            out_row0: 0,
        },
    ];
    g.jobs(&jobs, End::Plain, true)
}

/// One forward's inputs on the device: the normalised state (`[max_state_dim]`) in the state's
/// row of a token-shaped bf16 tensor (only its row sent), the noise (`[hz, max_action_dim]`) as the fp32 chunk and
/// its bf16 copy. All a replay of the kept forward sends.
pub(crate) fn forward_inputs(
    rows: HeadRows,
    state: &[f32],
    noise: &[f32],
    action_dim: usize,
) -> Upload {
    let sd = state.len();
    let sw = tiles(sd) * 32;
    let mut up = Upload::new();
    up.add_at(
        "t/state",
        state,
        [1, sd],
        [rows.state_row(), 0],
        [32 * rows.token_tiles(), sw],
        ActDtype::Bf16,
    );
    let aw = tiles(action_dim) * 32;
    for (name, dtype) in [("t/fx0", ActDtype::F32), ("t/fxb0", ActDtype::Bf16)] {
        up.add_padded(name, noise, rows.hz, action_dim, 32 * rows.ta, aw, dtype);
    }
    up
}

/// The head weight `w` as a graph job.
fn job(w: HeadWeight, act: &str, m: usize, out: &str) -> Job {
    Job {
        weight: Weight::Head(w),
        act: act.into(),
        m,
        out: out.into(),
        bias: head_bias_name(w),
        out_rows: None,
        out_row0: 0,
    }
}

/// The whole forward's graph over [`forward_inputs`]: the state encoder once, then for each
/// timestep slot in `slots` (the denoising steps in order) the action encoder, the DiT blocks,
/// the output layer, the decoder and the Euler update. Answers the graph and the name of the
/// final chunk (`[32·ta, max_action_dim]` fp32, the real `[hz, max_action_dim]` first).
pub(crate) fn forward_graph<'a>(
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    head: &'a HeadArena,
    w: &DitWeights,
    rows: HeadRows,
    slots: &[usize],
    keys: CrossKeys,
) -> Result<(Graph<'a>, String), DitRunError> {
    let d = w.dim;
    let (hz, tm) = (rows.hz, rows.token_m());
    let mut g = Graph::new(dev, plan);
    g.head = Some(head);
    g.jobs(
        &[job(HeadWeight::StateL1, "t/state", tm, "t/sh")],
        End::Relu,
        false,
    )?;
    g.jobs(
        &[job(HeadWeight::StateL2, "t/sh", tm, "t/sa")],
        End::Plain,
        true,
    )?;
    let n = slots.len();
    for (k, slot) in slots.iter().enumerate() {
        let (x, xb) = (format!("t/fx{k}"), format!("t/fxb{k}"));
        g.jobs(
            &[job(HeadWeight::ActW1, &xb, hz, "t/a1")],
            End::Plain,
            false,
        )?;
        let mut w2 = job(HeadWeight::ActW2Act, "t/a1", hz, "t/a2");
        w2.bias = time_bias_name(*slot);
        g.jobs(&[w2], End::Silu, false)?;
        let mut w3 = job(HeadWeight::ActW3, "t/a2", hz, "t/sa");
        w3.out_rows = Some(rows.token_tiles());
        g.jobs(&[w3], End::Stream("h/pos"), true)?;
        let stream = dit_blocks(&mut g, w, "t/sa", tm, *slot, keys, "h/mask/self")?;
        g.layernorm_eps(
            &stream,
            d,
            rows.ta,
            Some(&out_rows_name(*slot)),
            "t/y",
            OUT_LN_EPS,
        );
        g.jobs(
            &[job(HeadWeight::ProjOut2, "t/y", hz, "t/p2")],
            End::Plain,
            false,
        )?;
        g.jobs(
            &[job(HeadWeight::DecL1, "t/p2", hz, "t/d1")],
            End::Relu,
            false,
        )?;
        let next = format!("t/fx{}", k + 1);
        g.jobs(
            &[job(HeadWeight::DecL2, "t/d1", hz, &next)],
            End::Stream(&x),
            true,
        )?;
        if k + 1 < n {
            let next_b = format!("t/fxb{}", k + 1);
            g.jobs(
                &[job(HeadWeight::DecL2, "t/d1", hz, &next_b)],
                End::StreamBf16(&x),
                false,
            )?;
        }
    }
    Ok((g, format!("t/fx{n}")))
}
