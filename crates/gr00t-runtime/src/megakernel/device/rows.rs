//! The DiT block's row-wise pieces on the device, each one program of a row kernel (whole tile
//! rows per core; our reader `kernels/reader_rows.cpp`, our SFPU library pasted in, our tile
//! writer), output packed to bf16 (what the next matmul takes):
//!
//! * [`layernorm`] (`kernels/layernorm_rows.cpp`): `LN(x)·(1 + scale) + shift` before attention
//!   (AdaLN) and the plain `LN(x)` before the feed-forward. Row sums by the FPU's `reduce_tile`,
//!   mean / variance / rsqrt on the SFPU, normalisation and modulation as FPU broadcasts.
//!   Tested against the emulator's `norm_from_partials`.
//! * [`softmax`] (`kernels/softmax_rows.cpp`): attention's row softmax with max subtraction:
//!   row max by `reduce_tile`, exp on the SFPU, row sum by `reduce_tile`, its reciprocal on the
//!   SFPU, the scaling as a broadcast. Tested against f64.
//! * [`bias_act`] (`kernels/bias_act_rows.cpp`, read by `kernels/reader_finish.cpp`): the end of a
//!   matmul, `ACT(bf16(x + bias))` with ACT the FF-up's GELU or nothing, all on the SFPU in fp32
//!   (x and the bias unpacked straight to the fp32 DST), and with a residual stream given, the
//!   residual add of its output to the stream in the same program (the output projection's and
//!   FF-down's ends). Tested against the emulator's `finish_matmul` + `gelu_tanh`, and its
//!   `finish_matmul` + fp32 add.

use serde_json::json;
use tt_blackhole::bf16::round_to_bf16;

use super::sfpu::{EltwiseRun, SfpuError, WRITER_TILES_KERNEL, compose_compute};
use super::task_table::with_task_table;
use super::worker::TtnnWorker;

/// The LayerNorm compute kernel (the library is pasted in; 1/D and eps are compile-time
/// constants).
pub const LAYERNORM_KERNEL: &str = include_str!("kernels/layernorm_rows.cpp");
/// The softmax compute kernel (the library is pasted in).
pub const SOFTMAX_KERNEL: &str = include_str!("kernels/softmax_rows.cpp");
/// The matmul-end compute kernel (the library is pasted in, the activation chosen by a define).
pub const BIAS_ACT_KERNEL: &str = include_str!("kernels/bias_act_rows.cpp");
/// The row kernels' reader: the scaler tile and the per-column vectors once, then x tile row
/// by tile row.
pub const READER_ROWS_KERNEL: &str = include_str!("kernels/reader_rows.cpp");

/// `LN(x; eps)·(1 + scale) + shift` for `x` `[rows, d]` (the fp32 residual stream), per-column
/// `scale` and `shift` (`None`: the plain LayerNorm); returns `[rows, d]` bf16 values. Rows are
/// padded to whole tiles with zeros (normalised to 0, then dropped); `d` must be whole tiles.
/// One device program over `cores` cores (tile rows shared out).
pub fn layernorm(
    worker: &mut TtnnWorker,
    x: &[f32],
    d: usize,
    eps: f32,
    modulation: Option<(&[f32], &[f32])>,
    cores: usize,
) -> Result<EltwiseRun, SfpuError> {
    let shape = |what: String| SfpuError::Shape {
        op: "layernorm".into(),
        what,
    };
    if d == 0 || !d.is_multiple_of(32) || x.is_empty() || !x.len().is_multiple_of(d) {
        return Err(shape(format!(
            "{} values for rows of {d} (whole tiles)",
            x.len()
        )));
    }
    let rows = x.len() / d;
    let (g, b): (Vec<f32>, Vec<f32>) = match modulation {
        Some((scale, shift)) => {
            if scale.len() != d || shift.len() != d {
                return Err(shape(format!(
                    "scale {} and shift {} for d = {d}",
                    scale.len(),
                    shift.len()
                )));
            }
            (scale.iter().map(|s| 1.0 + s).collect(), shift.to_vec())
        }
        None => (vec![1.0; d], vec![0.0; d]),
    };
    let padded = rows.div_ceil(32) * 32;
    let mut payload = Vec::with_capacity((padded * d + 2 * d) * 4);
    for v in x
        .iter()
        .chain(std::iter::repeat_n(&0.0, (padded - rows) * d))
        .chain(&g)
        .chain(&b)
    {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    let float = |v: f32| format!("__builtin_bit_cast(float, {:#010x}u)", v.to_bits());
    let compute = compose_compute(
        LAYERNORM_KERNEL,
        &[
            ("GR00T_LN_INV_D", &float(1.0 / d as f32)),
            ("GR00T_LN_EPS", &float(eps)),
        ],
    );
    let header = json!({
        "op": "layernorm", "rows": padded, "d": d, "cores": cores.max(1),
        "kernels": {
            "reader": with_task_table(READER_ROWS_KERNEL),
            "writer": with_task_table(WRITER_TILES_KERNEL), "compute": compute,
        },
    });
    let (ans, out) = worker.call(&header, &payload)?;
    if out.len() != padded * d * 4 {
        return Err(SfpuError::Reply {
            op: "layernorm".into(),
            got: out.len(),
            want: padded * d * 4,
        });
    }
    Ok(EltwiseRun {
        values: out
            .chunks_exact(4)
            .take(rows * d)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        program_ms: ans["program_ms"].as_f64().unwrap_or(0.0),
    })
}

/// What a padding column of the scores holds: its exponential is 0, so it weighs nothing.
const MASKED: f32 = -1.0e30;

/// Row softmax of `s` `[rows, n]` (scores already scaled; any `n`): `exp(s - max) / sum` per
/// row, as bf16 values. Rows are padded to whole tiles with zeros and columns with a large
/// negative number (weight 0), both dropped from the result. One device program over `cores`
/// cores.
pub fn softmax(
    worker: &mut TtnnWorker,
    s: &[f32],
    n: usize,
    cores: usize,
) -> Result<EltwiseRun, SfpuError> {
    if n == 0 || s.is_empty() || !s.len().is_multiple_of(n) {
        return Err(SfpuError::Shape {
            op: "softmax".into(),
            what: format!("{} values for rows of {n}", s.len()),
        });
    }
    let rows = s.len() / n;
    let (rows_p, n_p) = (rows.div_ceil(32) * 32, n.div_ceil(32) * 32);
    let mut payload = Vec::with_capacity(rows_p * n_p * 4);
    for r in 0..rows_p {
        for c in 0..n_p {
            let v = match (r < rows, c < n) {
                (true, true) => s[r * n + c],
                (_, false) => MASKED,
                (false, true) => 0.0,
            };
            payload.extend_from_slice(&v.to_le_bytes());
        }
    }
    let header = json!({
        "op": "softmax", "rows": rows_p, "d": n_p, "cores": cores.max(1),
        "kernels": {
            "reader": with_task_table(READER_ROWS_KERNEL),
            "writer": with_task_table(WRITER_TILES_KERNEL),
            "compute": compose_compute(SOFTMAX_KERNEL, &[]),
        },
    });
    let (ans, out) = worker.call(&header, &payload)?;
    if out.len() != rows_p * n_p * 4 {
        return Err(SfpuError::Reply {
            op: "softmax".into(),
            got: out.len(),
            want: rows_p * n_p * 4,
        });
    }
    let at = |r: usize, c: usize| {
        let i = (r * n_p + c) * 4;
        f32::from_le_bytes([out[i], out[i + 1], out[i + 2], out[i + 3]])
    };
    Ok(EltwiseRun {
        values: (0..rows)
            .flat_map(|r| (0..n).map(move |c| (r, c)))
            .map(|(r, c)| at(r, c))
            .collect(),
        program_ms: ans["program_ms"].as_f64().unwrap_or(0.0),
    })
}

/// The activation after a matmul's bias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowAct {
    /// None: the matmul's output as the next op takes it (bias added, packed to bf16).
    Identity,
    /// The FF-up's GELU, tanh form, on the packed output (as the emulator does).
    GeluTanh,
}

/// The define that makes a matmul's end add the residual stream (`kernels/bias_act_rows.cpp`
/// and `kernels/reader_finish.cpp` both read it).
pub const FINISH_RESIDUAL_DEFINE: (&str, &str) = ("GR00T_FINISH_RESIDUAL", "1");

/// `ACT(bf16(x + bias))` for a matmul's fp32 sums `x` `[rows, n]` (`n` whole tiles) and its
/// bias (rounded to bf16 first, as it sits in L1), packed to bf16: the emulator's
/// `finish_matmul` (+ `gelu_tanh` and its pack), op for op. With `residual` (the fp32 stream,
/// `x`'s shape), the stream plus that, in fp32 (an fp32 output): the end of the output
/// projection and of the FF-down. One device program.
pub fn bias_act(
    worker: &mut TtnnWorker,
    x: &[f32],
    bias: &[f32],
    act: RowAct,
    residual: Option<&[f32]>,
    cores: usize,
) -> Result<EltwiseRun, SfpuError> {
    let n = bias.len();
    if n == 0
        || !n.is_multiple_of(32)
        || x.is_empty()
        || !x.len().is_multiple_of(n)
        || residual.is_some_and(|r| r.len() != x.len())
    {
        return Err(SfpuError::Shape {
            op: "bias_act".into(),
            what: format!(
                "{} values (residual {:?}) for rows of {n} (whole tiles)",
                x.len(),
                residual.map(<[f32]>::len)
            ),
        });
    }
    let rows = x.len() / n;
    let padded = rows.div_ceil(32) * 32;
    let pad = (padded - rows) * n;
    let mut payload = Vec::with_capacity((2 * padded * n + n) * 4);
    let bias_l1 = bias.iter().map(|&b| round_to_bf16(b));
    let stream = residual
        .into_iter()
        .flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(0.0, pad)));
    for v in x
        .iter()
        .copied()
        .chain(std::iter::repeat_n(0.0, pad))
        .chain(bias_l1)
        .chain(stream)
    {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    let row = match act {
        RowAct::Identity => "gr00t_sfpu::no_act",
        RowAct::GeluTanh => "gr00t_sfpu::gelu_tanh_row",
    };
    let mut defines = vec![("GR00T_ACT_ROW", row)];
    let mut reader = super::graph::READER_FINISH_KERNEL.to_string();
    if residual.is_some() {
        defines.push(FINISH_RESIDUAL_DEFINE);
        reader = compose_compute(&reader, &[FINISH_RESIDUAL_DEFINE]);
    }
    let header = json!({
        "op": "bias_act", "rows": padded, "d": n, "cores": cores.max(1),
        "residual": residual.is_some(),
        "kernels": {
            "reader": with_task_table(&reader),
            "writer": with_task_table(super::graph::WRITER_RUNS_KERNEL),
            "compute": compose_compute(BIAS_ACT_KERNEL, &defines),
        },
    });
    let (ans, out) = worker.call(&header, &payload)?;
    if out.len() != padded * n * 4 {
        return Err(SfpuError::Reply {
            op: "bias_act".into(),
            got: out.len(),
            want: padded * n * 4,
        });
    }
    Ok(EltwiseRun {
        values: out
            .chunks_exact(4)
            .take(rows * n)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        program_ms: ans["program_ms"].as_f64().unwrap_or(0.0),
    })
}
