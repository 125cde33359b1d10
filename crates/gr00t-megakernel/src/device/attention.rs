//! Attention per head on the device, one program for all heads (`kernels/attention_head.cpp`,
//! read by `kernels/reader_attention.cpp`, written by `kernels/writer_merge_heads.cpp`, with our
//! SFPU library): `softmax(scale·QKᵀ + mask)·V` per head, Q/K/V read from the projections'
//! `[rows, heads·hd]` layout (the head split and merge are in the reader and writer, not
//! programs of their own), in L1 as bf16 tiles with the head dim zero-padded, the scores and
//! the softmax statistics in fp32, P and the output packed to bf16. Tested against the
//! emulator's `flash_attention` and f64.

use super::one_program;
use super::protocol::{ActDtype, AttentionStep, GraphStep, KernelSet};
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
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Query rows.
    pub mq: usize,
    /// Key / value rows.
    pub mk: usize,
    /// Heads.
    pub heads: usize,
    /// Head dim.
    pub hd: usize,
}

/// `softmax(QKᵀ/√hd)·V` for every head: q `[mq, heads·hd]`, k and v `[mk, heads·hd]` (the
/// emulator's `flash_attention` layout), `key_mask` (true = may attend; `None`: every key).
/// Returns `[mq, heads·hd]` bf16 values. Heads are shared over `cores` cores.
pub fn attention(
    worker: &mut TtnnWorker,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    shape: AttentionShape,
    key_mask: Option<&[bool]>,
    cores: usize,
) -> Result<EltwiseRun, SfpuError> {
    let AttentionShape { mq, mk, heads, hd } = shape;
    let d = heads * hd;
    if mq == 0
        || mk == 0
        || d == 0
        || q.len() != mq * d
        || k.len() != mk * d
        || v.len() != mk * d
        || key_mask.is_some_and(|m| m.len() != mk)
    {
        return Err(SfpuError::Shape {
            op: "attention".into(),
            what: format!(
                "q {}, k {}, v {} values for {heads} heads of {hd}, {mq} queries, {mk} keys",
                q.len(),
                k.len(),
                v.len()
            ),
        });
    }
    let pad = |n: usize| n.div_ceil(32) * 32;
    let (mp, np, dw) = (pad(mq), pad(mk), pad(d));
    // The projections' own layout, rows and columns zero-padded: [rows_p, dw] (the reader cuts
    // the heads out on the device).
    let padded = |x: &[f32], rows: usize, rows_p: usize| {
        let mut out = vec![0f32; rows_p * dw];
        for r in 0..rows {
            out[r * dw..r * dw + d].copy_from_slice(&x[r * d..(r + 1) * d]);
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
    inputs.add("q", mp, dw, ActDtype::Bf16, &padded(q, mq, mp));
    inputs.add("k", np, dw, ActDtype::Bf16, &padded(k, mk, np));
    inputs.add("v", np, dw, ActDtype::Bf16, &padded(v, mk, np));
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
