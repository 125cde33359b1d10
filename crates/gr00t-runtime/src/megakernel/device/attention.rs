//! Attention per head on the device, one program for all heads (`kernels/attention_head.cpp`,
//! read by `kernels/reader_attention.cpp`, with our SFPU library): `softmax(scale·QKᵀ + mask)·V`
//! per head, Q/K/V as bf16 tiles with the head dim zero-padded to whole tiles, the scores and
//! the softmax statistics in fp32, P and the output packed to bf16. Tested against the
//! emulator's `flash_attention` and f64.

use serde_json::json;

use super::sfpu::{EltwiseRun, SfpuError, WRITER_TILES_KERNEL, compose_compute};
use super::worker::TtnnWorker;

/// The compute kernel (the library is pasted in, the scale a compile-time constant).
pub const ATTENTION_KERNEL: &str = include_str!("kernels/attention_head.cpp");
/// Its reader: the scaler tile and the key mask once, then each head's Q, K and V tiles.
pub const READER_ATTENTION_KERNEL: &str = include_str!("kernels/reader_attention.cpp");

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
    let (mp, np, dp) = (pad(mq), pad(mk), pad(hd));
    // Per head, rows padded, head dim zero-padded: [heads, rows, dp].
    let per_head = |x: &[f32], rows: usize, rows_p: usize| {
        let mut out = vec![0f32; heads * rows_p * dp];
        for h in 0..heads {
            for r in 0..rows {
                let src = &x[r * d + h * hd..r * d + (h + 1) * hd];
                out[(h * rows_p + r) * dp..(h * rows_p + r) * dp + hd].copy_from_slice(src);
            }
        }
        out
    };
    let mask: Vec<f32> = (0..np)
        .map(|j| {
            let keep = j < mk && key_mask.is_none_or(|m| m[j]);
            if keep { 0.0 } else { MASKED }
        })
        .collect();
    let mut payload = Vec::new();
    for x in [
        per_head(q, mq, mp),
        per_head(k, mk, np),
        per_head(v, mk, np),
        mask,
    ] {
        for val in x {
            payload.extend_from_slice(&val.to_le_bytes());
        }
    }
    let scale = (hd as f32).powf(-0.5);
    let compute = compose_compute(
        ATTENTION_KERNEL,
        &[(
            "GR00T_ATTN_SCALE",
            &format!("__builtin_bit_cast(float, {:#010x}u)", scale.to_bits()),
        )],
    );
    let header = json!({
        "op": "attention", "heads": heads, "mp": mp, "np": np, "dp": dp, "cores": cores.max(1),
        "kernels": {"reader": READER_ATTENTION_KERNEL, "writer": WRITER_TILES_KERNEL, "compute": compute},
    });
    let (ans, out) = worker.call(&header, &payload)?;
    let want = heads * mp * dp * 4;
    if out.len() != want {
        return Err(SfpuError::Reply {
            op: "attention".into(),
            got: out.len(),
            want,
        });
    }
    let at = |h: usize, r: usize, c: usize| {
        let i = ((h * mp + r) * dp + c) * 4;
        f32::from_le_bytes([out[i], out[i + 1], out[i + 2], out[i + 3]])
    };
    let mut values = vec![0f32; mq * d];
    for r in 0..mq {
        for h in 0..heads {
            for c in 0..hd {
                values[r * d + h * hd + c] = at(h, r, c);
            }
        }
    }
    Ok(EltwiseRun {
        values,
        program_ms: ans["program_ms"].as_f64().unwrap_or(0.0),
    })
}
