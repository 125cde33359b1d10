//! Attention per head on the device, one program for all heads (`kernels/attention_head.cpp`,
//! read by `kernels/reader_attention.cpp`, written by `kernels/writer_merge_heads.cpp`, with our
//! SFPU library): `softmax(scale·QKᵀ + mask)·V` per head, Q/K/V read from the projections'
//! `[rows, heads·hd]` layout (the head split and merge are in the reader and writer, not
//! programs of their own), in L1 as bf16 tiles with the head dim zero-padded, the scores and
//! the softmax statistics in fp32, P and the output packed to bf16. Grouped-query attention
//! (`kv_heads` K/V heads shared by the query heads, Qwen3's) maps the head in the reader; causal
//! attention skips the key tiles above a query tile row's diagonal and masks the diagonal tile
//! with a tile the reader builds in L1 (`kernels/reader_attention.cpp`'s header). Tested against
//! the emulator's `flash_attention` and f64.

use super::graph_steps::{AttentionStep, GraphStep};
use super::one_program;
use super::protocol::{ActDtype, KernelSet};
use super::registry::with_cb_ids;
use super::sfpu::{EltwiseRun, SfpuError, compose_compute};
use super::task_table::with_task_table;
use super::worker::TtnnWorker;

/// The compute kernel (the library is pasted in, the scale a compile-time constant).
pub const ATTENTION_KERNEL: &str = include_str!("kernels/attention_head.cpp");
/// Its reader: the scaler tile and the key mask once, then each head's Q, K and V tiles, cut out
/// of the projections' `[rows, heads·hd]` tensors on the way into L1 (tile geometry not yet
/// pasted in: [`reader_attention_kernel`] is the source the JIT gets).
const READER_ATTENTION_KERNEL: &str = include_str!("kernels/reader_attention.cpp");
/// Its writer: each head's output tiles put back into the `[rows, heads·hd]` layout on the way
/// out (a core owns whole output tiles); [`writer_merge_kernel`] is the JIT's source.
const WRITER_MERGE_KERNEL: &str = include_str!("kernels/writer_merge_heads.cpp");

/// The tile geometry our data-movement kernels share (`kernels/tile_columns.h`: a tile's element
/// offsets, a column copy between tile rows), pasted in at [`TILE_COLUMNS_MARKER`]: the JIT
/// takes one source string per kernel, so a shared header travels inside each.
const TILE_COLUMNS: &str = include_str!("kernels/tile_columns.h");
/// The line a data-movement kernel marks the place of [`TILE_COLUMNS`] with.
const TILE_COLUMNS_MARKER: &str = "//@@GR00T_TILE_COLUMNS@@";

/// `kernel` with the shared tile geometry pasted in at its marker, and its CB ids (the
/// registry's, [`with_cb_ids`]).
pub fn with_tile_columns(kernel: &str) -> String {
    debug_assert!(
        kernel.contains(TILE_COLUMNS_MARKER),
        "no tile-columns marker"
    );
    with_cb_ids(&kernel.replacen(TILE_COLUMNS_MARKER, TILE_COLUMNS, 1))
}

/// The attention reader as the JIT compiles it.
pub fn reader_attention_kernel() -> String {
    with_task_table(&with_tile_columns(READER_ATTENTION_KERNEL))
}

/// The head-merging writer as the JIT compiles it.
pub fn writer_merge_kernel() -> String {
    with_task_table(&with_tile_columns(WRITER_MERGE_KERNEL))
}

/// What a masked-out or padding key's score gets: its weight is 0.
const MASKED: f32 = -1.0e30;

/// The shapes of one attention call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    /// Query rows.
    pub mq: usize,
    /// Key / value rows.
    pub mk: usize,
    /// Heads (query heads).
    pub heads: usize,
    /// K/V heads: query head h reads K/V head h / (heads / kv_heads); divides `heads`.
    pub kv_heads: usize,
    /// Query row i attends key rows j <= i only (besides the key mask).
    pub causal: bool,
    /// Head dim.
    pub hd: usize,
}

impl AttentionShape {
    /// `heads` heads of `hd`, each its own K and V, every key for every query (the DiT's).
    pub fn new(mq: usize, mk: usize, heads: usize, hd: usize) -> Self {
        AttentionShape {
            mq,
            mk,
            heads,
            kv_heads: heads,
            causal: false,
            hd,
        }
    }

    /// The query heads that share one K/V head, or `None` when `kv_heads` does not divide
    /// `heads`.
    pub fn group(&self) -> Option<usize> {
        (self.kv_heads > 0 && self.heads.is_multiple_of(self.kv_heads))
            .then(|| self.heads / self.kv_heads)
    }
}

/// Whether q, k and v of `lens` values and a key mask of `mask_len` fit `shape`: K and V of
/// `kv_heads` heads, `kv_heads` dividing `heads`, nothing empty.
pub fn check_shape(
    shape: AttentionShape,
    lens: [usize; 3],
    mask_len: Option<usize>,
) -> Result<(), SfpuError> {
    let AttentionShape {
        mq,
        mk,
        heads,
        kv_heads,
        hd,
        ..
    } = shape;
    let (d, d_kv) = (heads * hd, kv_heads * hd);
    if mq == 0
        || mk == 0
        || d == 0
        || shape.group().is_none()
        || lens != [mq * d, mk * d_kv, mk * d_kv]
        || mask_len.is_some_and(|n| n != mk)
    {
        return Err(SfpuError::Shape {
            op: "attention".into(),
            what: format!(
                "q {}, k {}, v {} values for {heads} heads over {kv_heads} K/V heads of {hd}, \
                 {mq} queries, {mk} keys",
                lens[0], lens[1], lens[2]
            ),
        });
    }
    Ok(())
}

/// `softmax(QKᵀ/√hd)·V` for every head: q `[mq, heads·hd]`, k and v `[mk, kv_heads·hd]` (the
/// emulator's `flash_attention` layout; query head h reads K/V head h / (heads / kv_heads)),
/// `key_mask` (true = may attend; `None`: every key), causal when `shape.causal`. Returns
/// `[mq, heads·hd]` bf16 values. Heads are shared over `cores` cores.
pub fn attention(
    worker: &mut TtnnWorker,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    shape: AttentionShape,
    key_mask: Option<&[bool]>,
    cores: usize,
) -> Result<EltwiseRun, SfpuError> {
    let AttentionShape {
        mq,
        mk,
        heads,
        kv_heads,
        causal,
        hd,
    } = shape;
    let (d, d_kv) = (heads * hd, kv_heads * hd);
    check_shape(
        shape,
        [q.len(), k.len(), v.len()],
        key_mask.map(<[bool]>::len),
    )?;
    let pad = |n: usize| n.div_ceil(32) * 32;
    let (mp, np, dw, dw_kv) = (pad(mq), pad(mk), pad(d), pad(d_kv));
    // The projections' own layout, rows and columns zero-padded: [rows_p, width_p] (the reader
    // cuts the heads out on the device).
    let padded = |x: &[f32], rows: usize, rows_p: usize, width: usize, width_p: usize| {
        let mut out = vec![0f32; rows_p * width_p];
        for r in 0..rows {
            out[r * width_p..r * width_p + width].copy_from_slice(&x[r * width..(r + 1) * width]);
        }
        out
    };
    let mask: Vec<f32> = (0..np)
        .map(|j| {
            let keep = j < mk && key_mask.is_none_or(|m| m[j]);
            if keep { 0.0 } else { MASKED }
        })
        .collect();
    let mut inputs = one_program::Inputs::default();
    inputs.add("q", mp, dw, ActDtype::Bf16, &padded(q, mq, mp, d, dw));
    inputs.add(
        "k",
        np,
        dw_kv,
        ActDtype::Bf16,
        &padded(k, mk, np, d_kv, dw_kv),
    );
    inputs.add(
        "v",
        np,
        dw_kv,
        ActDtype::Bf16,
        &padded(v, mk, np, d_kv, dw_kv),
    );
    inputs.add("scaler", 32, 32, ActDtype::F32, &one_program::scaler_tile());
    inputs.add("mask", 32, np, ActDtype::F32, &one_program::row_tile(&mask));
    let scale = (hd as f32).powf(-0.5);
    let compute = compose_compute(
        ATTENTION_KERNEL,
        &[(
            "GR00T_ATTN_SCALE",
            &format!("__builtin_bit_cast(float, {:#010x}u)", scale.to_bits()),
        )],
    );
    let t = one_program::tensor;
    let step = GraphStep::Attention(AttentionStep {
        q: t("q"),
        k: t("k"),
        v: t("v"),
        scaler: t("scaler"),
        mask: t("mask"),
        out: t("o"),
        heads,
        kv_heads,
        causal,
        mp,
        np,
        hd,
        cores: cores.max(1),
        group: "attention".into(),
        kernels: KernelSet {
            reader: "reader".into(),
            compute: "compute".into(),
            writer: "writer".into(),
        },
    });
    let sources = one_program::sources([
        ("reader", reader_attention_kernel()),
        ("compute", compute),
        ("writer", writer_merge_kernel()),
    ]);
    let run = one_program::run(worker, inputs, step, sources, ("o", mp, dw), "attention")?;
    let mut values = vec![0f32; mq * d];
    for (r, row) in values.chunks_exact_mut(d).enumerate() {
        row.copy_from_slice(&run.values[r * dw..r * dw + d]);
    }
    Ok(EltwiseRun {
        values,
        program_ms: run.program_ms,
    })
}
