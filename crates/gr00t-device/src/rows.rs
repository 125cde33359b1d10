//! The DiT block's row-wise pieces on the device, each one program of a row kernel (whole tile
//! rows per core; our reader `kernels/reader_rows.cpp`, our SFPU library pasted in, our tile
//! writer), output packed to bf16 (what the next matmul takes):
//!
//! * [`layernorm`] (`kernels/layernorm_rows.cpp`): `LN(x)·(1 + scale) + shift` before attention
//!   (AdaLN) and the plain `LN(x)` before the feed-forward. Row sums by the FPU's `reduce_tile`,
//!   mean / variance / rsqrt on the SFPU, normalisation and modulation as FPU broadcasts.
//!   Tested against the emulator's `norm_from_partials`.
//! * [`norm_stream`] (`kernels/norm_stream.cpp`, read by `kernels/reader_rows_stream.cpp`):
//!   LayerNorm or RMSNorm with its own γ / β for any width (the backbone's 4608- and 2048-wide
//!   norms): a row streamed through L1 a chunk at a time, twice (statistics, then output), so
//!   its L1 does not grow with the width. Tested against f64 and `layernorm`.
//! * [`softmax`] (`kernels/softmax_rows.cpp`): attention's row softmax with max subtraction:
//!   row max by `reduce_tile`, exp on the SFPU, row sum by `reduce_tile`, its reciprocal on the
//!   SFPU, the scaling as a broadcast. Tested against f64.
//! * [`bias_act`] (`kernels/bias_act_rows.cpp`, read by `kernels/reader_finish.cpp`): the end of a
//!   matmul, `ACT(bf16(x + bias))` with ACT the FF-up's GELU or nothing, all on the SFPU in fp32
//!   (x and the bias unpacked straight to the fp32 DST), and with a residual stream given, the
//!   residual add of its output to the stream in the same program (the output projection's and
//!   FF-down's ends). Tested against the emulator's `finish_matmul` + `gelu_tanh`, and its
//!   `finish_matmul` + fp32 add.

use tt_blackhole::bf16::round_to_bf16;

use super::graph_steps::{FinishJob, FinishStep, GraphStep, RowsStep};
use super::one_program;
use super::protocol::{ActDtype, KernelSet};
use super::registry::cb_id;
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
    let mut xp = x.to_vec();
    xp.resize(padded * d, 0.0);
    let float = |v: f32| format!("__builtin_bit_cast(float, {:#010x}u)", v.to_bits());
    let compute = compose_compute(
        LAYERNORM_KERNEL,
        &[
            ("GR00T_LN_INV_D", &float(1.0 / d as f32)),
            ("GR00T_LN_EPS", &float(eps)),
        ],
    );
    let mut inputs = one_program::Inputs::default();
    inputs.add("x", padded, d, ActDtype::F32, &xp);
    inputs.add("scaler", 32, 32, ActDtype::F32, &one_program::scaler_tile());
    inputs.add("g", 32, d, ActDtype::F32, &one_program::row_tile(&g));
    inputs.add("b", 32, d, ActDtype::F32, &one_program::row_tile(&b));
    let wt = d / 32;
    // Without the AdaLN define the kernel keeps h in cb_w0: no cb_w2.
    let work_cbs = [
        ("cb_g", wt),
        ("cb_b", wt),
        ("cb_w0", wt),
        ("cb_w1", wt),
        ("cb_mean", 1),
        ("cb_rstd", 1),
    ]
    .map(|(n, pages)| (cb_id("layernorm_rows.cpp", n), pages))
    .to_vec();
    let step = rows_step("layernorm", padded, d, wt, true, work_cbs, cores);
    let sources = one_program::sources([
        ("reader", with_task_table(READER_ROWS_KERNEL)),
        ("compute", compute),
        ("writer", with_task_table(WRITER_TILES_KERNEL)),
    ]);
    let mut run = one_program::run(worker, inputs, step, sources, ("y", padded, d), "layernorm")?;
    run.values.truncate(rows * d);
    Ok(run)
}

/// The streaming row norm's compute kernel (the library is pasted in; 1/D, eps and the chunk
/// are compile-time constants, RMSNorm by a define).
pub const NORM_STREAM_KERNEL: &str = include_str!("kernels/norm_stream.cpp");
/// Its reader: x twice per tile row, a chunk at a time, the vectors' chunks with the second.
pub const READER_ROWS_STREAM_KERNEL: &str = include_str!("kernels/reader_rows_stream.cpp");
/// Tiles of a row the streaming norm holds per CB chunk: its L1 is a fixed few dozen tiles at
/// any width (four keep the FPU's inits per tile low and the reads in flight).
pub const NORM_STREAM_CHUNK: usize = 4;

/// Which norm the streaming kernel computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamNorm {
    /// `(x - mean)·rstd·γ + β`, rstd over the variance.
    Layer,
    /// `x·rstd·γ`, rstd over `E[x²]` (no mean, no β): Qwen3's.
    Rms,
}

/// The defines both streaming kernels take (the compute kernel's constants, the chunk, RMS).
pub fn norm_stream_defines(d: usize, eps: f32, norm: StreamNorm) -> Vec<(&'static str, String)> {
    let float = |v: f32| format!("__builtin_bit_cast(float, {:#010x}u)", v.to_bits());
    let mut defs = vec![
        ("GR00T_LN_INV_D", float(1.0 / d as f32)),
        ("GR00T_LN_EPS", float(eps)),
        ("GR00T_NORM_CHUNK", NORM_STREAM_CHUNK.to_string()),
    ];
    if norm == StreamNorm::Rms {
        defs.push(("GR00T_NORM_RMS", "1".into()));
    }
    defs
}

/// The streaming norm's (reader, compute) sources for width `d`, composed (task table, CB ids,
/// SFPU library pasted in): the `kernels.reader` and `kernels.compute` of its [`RowsStep`].
pub fn norm_stream_sources(d: usize, eps: f32, norm: StreamNorm) -> (String, String) {
    let defs = norm_stream_defines(d, eps, norm);
    let defs: Vec<(&str, &str)> = defs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let reader = with_task_table(&compose_compute(READER_ROWS_STREAM_KERNEL, &defs));
    (reader, compose_compute(NORM_STREAM_KERNEL, &defs))
}

/// The streaming norm's fp32 work CBs `(id, pages)` for a [`RowsStep`]: x (given here, so the
/// worker does not size it to a whole row), g and b two chunks each, the work CBs a chunk each,
/// mean / rstd / the shift a tile, the running sums two. Independent of the width.
pub fn norm_stream_work_cbs(norm: StreamNorm) -> Vec<(u8, usize)> {
    let two = 2 * NORM_STREAM_CHUNK;
    let mut cbs = vec![
        ("cb_x", two),
        ("cb_g", two),
        ("cb_w0", NORM_STREAM_CHUNK),
        ("cb_rstd", 1),
        ("cb_sumsq", 2),
    ];
    if norm == StreamNorm::Layer {
        cbs.extend([
            ("cb_b", two),
            ("cb_w1", NORM_STREAM_CHUNK),
            ("cb_mean", 1),
            ("cb_sum", 2),
            ("cb_shift", 1),
        ]);
    }
    cbs.into_iter()
        .map(|(n, pages)| (cb_id("norm_stream.cpp", n), pages))
        .collect()
}

/// The CBs the streaming norm unpacks straight to the fp32 DST (its running sums: they must
/// not pass the FPU's 19-bit source registers): a [`RowsStep`]'s `unpack_to_dest`.
pub fn norm_stream_unpack_to_dest(norm: StreamNorm) -> Vec<u8> {
    let mut ids = vec![cb_id("norm_stream.cpp", "cb_sumsq")];
    if norm == StreamNorm::Layer {
        ids.push(cb_id("norm_stream.cpp", "cb_sum"));
    }
    ids
}

/// LayerNorm (`gamma`, `beta`) or RMSNorm (`gamma`; `beta` ignored) of `x` `[rows, d]` (fp32)
/// with the streaming kernel, which fits L1 at any width: bf16 values `[rows, d]`. Rows are
/// padded to whole tiles with zeros (then dropped); `d` must be whole tiles. One device program
/// over `cores` cores (tile rows shared out).
#[allow(clippy::too_many_arguments)]
pub fn norm_stream(
    worker: &mut TtnnWorker,
    x: &[f32],
    d: usize,
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
    norm: StreamNorm,
    cores: usize,
) -> Result<EltwiseRun, SfpuError> {
    let beta_len = if norm == StreamNorm::Layer {
        d
    } else {
        beta.len()
    };
    if d == 0
        || !d.is_multiple_of(32)
        || x.is_empty()
        || !x.len().is_multiple_of(d)
        || gamma.len() != d
        || beta.len() != beta_len
    {
        return Err(SfpuError::Shape {
            op: "norm_stream".into(),
            what: format!(
                "{} values, gamma {}, beta {} for rows of {d} (whole tiles)",
                x.len(),
                gamma.len(),
                beta.len()
            ),
        });
    }
    let rows = x.len() / d;
    let padded = rows.div_ceil(32) * 32;
    let mut xp = x.to_vec();
    xp.resize(padded * d, 0.0);
    let b = if norm == StreamNorm::Layer {
        beta.to_vec()
    } else {
        vec![0.0; d]
    };
    let mut inputs = one_program::Inputs::default();
    inputs.add("x", padded, d, ActDtype::F32, &xp);
    inputs.add("scaler", 32, 32, ActDtype::F32, &one_program::scaler_tile());
    inputs.add("g", 32, d, ActDtype::F32, &one_program::row_tile(gamma));
    inputs.add("b", 32, d, ActDtype::F32, &one_program::row_tile(&b));
    let wt = d / 32;
    let work_cbs = norm_stream_work_cbs(norm);
    let mut step = rows_step("norm_stream", padded, d, wt, true, work_cbs, cores);
    if let GraphStep::Rows(r) = &mut step {
        r.unpack_to_dest = norm_stream_unpack_to_dest(norm);
    }
    let (reader, compute) = norm_stream_sources(d, eps, norm);
    let sources = one_program::sources([
        ("reader", reader),
        ("compute", compute),
        ("writer", with_task_table(WRITER_TILES_KERNEL)),
    ]);
    let mut run = one_program::run(
        worker,
        inputs,
        step,
        sources,
        ("y", padded, d),
        "norm_stream",
    )?;
    run.values.truncate(rows * d);
    Ok(run)
}

/// A row kernel's step over `one/x` (`[rows_p, d]`) into `one/y`: the vectors `one/g` and
/// `one/b` (`vectors`), else none (the scaler tile in their place).
fn rows_step(
    label: &str,
    rows_p: usize,
    d: usize,
    wt: usize,
    vectors: bool,
    work_cbs: Vec<(u8, usize)>,
    cores: usize,
) -> GraphStep {
    let t = one_program::tensor;
    let (g, b) = if vectors {
        (t("g"), t("b"))
    } else {
        (t("scaler"), t("scaler"))
    };
    GraphStep::Rows(RowsStep {
        x: t("x"),
        scaler: t("scaler"),
        g,
        b,
        b_col: 0,
        vec_len: if vectors { d } else { 0 },
        out: t("y"),
        out_f32: false,
        wt,
        row_tiles: rows_p / 32,
        vec_tiles: if vectors { wt } else { 0 },
        label: label.into(),
        work_cbs,
        unpack_to_dest: Vec::new(),
        cores: cores.max(1),
        group: label.into(),
        kernels: KernelSet {
            reader: "reader".into(),
            compute: "compute".into(),
            writer: "writer".into(),
        },
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
    let mut x = Vec::with_capacity(rows_p * n_p);
    for r in 0..rows_p {
        for c in 0..n_p {
            x.push(match (r < rows, c < n) {
                (true, true) => s[r * n + c],
                (_, false) => MASKED,
                (false, true) => 0.0,
            });
        }
    }
    let mut inputs = one_program::Inputs::default();
    inputs.add("x", rows_p, n_p, ActDtype::F32, &x);
    inputs.add("scaler", 32, 32, ActDtype::F32, &one_program::scaler_tile());
    let nt = n_p / 32;
    let cb = |name: &str| cb_id("softmax_rows.cpp", name);
    let work_cbs = vec![(cb("cb_e"), nt), (cb("cb_max"), 1), (cb("cb_rsum"), 1)];
    let step = rows_step("softmax", rows_p, n_p, nt, false, work_cbs, cores);
    let sources = one_program::sources([
        ("reader", with_task_table(READER_ROWS_KERNEL)),
        ("compute", compose_compute(SOFTMAX_KERNEL, &[])),
        ("writer", with_task_table(WRITER_TILES_KERNEL)),
    ]);
    let run = one_program::run(worker, inputs, step, sources, ("y", rows_p, n_p), "softmax")?;
    let values = (0..rows)
        .flat_map(|r| (0..n).map(move |c| (r, c)))
        .map(|(r, c)| run.values[r * n_p + c])
        .collect();
    Ok(EltwiseRun {
        values,
        program_ms: run.program_ms,
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
    let mut inputs = one_program::Inputs::default();
    let mut xp = x.to_vec();
    xp.resize(padded * n, 0.0);
    inputs.add("x", padded, n, ActDtype::F32, &xp);
    // The bias as it sits in L1 (bf16 values), in every row of its tile row.
    let bias_l1: Vec<f32> = bias.iter().map(|&b| round_to_bf16(b)).collect();
    let bias_rows: Vec<f32> = (0..32).flat_map(|_| bias_l1.iter().copied()).collect();
    inputs.add("bias", 32, n, ActDtype::F32, &bias_rows);
    if let Some(r) = residual {
        let mut rp = r.to_vec();
        rp.resize(padded * n, 0.0);
        inputs.add("res", padded, n, ActDtype::F32, &rp);
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
    let t = one_program::tensor;
    let nt = n / 32;
    let step = GraphStep::Finish(FinishStep {
        jobs: vec![FinishJob {
            x: t("x"),
            bias: t("bias"),
            out: t("y"),
            mt: padded / 32,
            nt,
            k_split: 1,
            res: residual.map(|_| t("res")),
            out_rows: None,
            out_row0: 0,
        }],
        out_f32: residual.is_some(),
        // A unit per tile row, its units dealt over `cores` cores.
        unit_tiles: nt,
        group: "finish".into(),
        kernels: KernelSet {
            reader: "reader".into(),
            compute: "compute".into(),
            writer: "writer".into(),
        },
        cut: Some(cores.max(1)),
    });
    let sources = one_program::sources([
        ("reader", with_task_table(&reader)),
        ("compute", compose_compute(BIAS_ACT_KERNEL, &defines)),
        ("writer", with_task_table(super::graph::WRITER_RUNS_KERNEL)),
    ]);
    let mut run = one_program::run(worker, inputs, step, sources, ("y", padded, n), "finish")?;
    run.values.truncate(rows * n);
    Ok(run)
}
