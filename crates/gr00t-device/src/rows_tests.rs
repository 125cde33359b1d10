//! The row kernels on the simulated p150a, full size: LayerNorm / AdaLN over 51 tokens of the
//! 1536-wide DiT stream against the emulator's `norm_from_partials` (the reference the device
//! path is held to); the attention softmax over 51 queries x 116 context keys against f64; the
//! end of a matmul (bias, bf16, GELU) against the emulator's `finish_matmul` + `gelu_tanh`, and
//! with the residual add against `finish_matmul` + the emulator's fp32 add.
//! `#[ignore]`d like every `sim_*` test: `scripts/device-sim-tests.sh` runs it.

use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::dims::DitDims;

use tt_blackhole::plan::L1_BUDGET;

use super::graph_steps::RowsStep;
use super::protocol::KernelSet;
use super::registry::cb_id;
use super::rows::{
    NORM_STREAM_CHUNK, RowAct, StreamNorm, bias_act, layernorm, norm_stream, norm_stream_sources,
    norm_stream_unpack_to_dest, norm_stream_work_cbs, softmax,
};
use super::sfpu_tests::open_sim;
use crate::golden_case::pcc;
use gr00t_megakernel::emulator::{finish_matmul, norm_from_partials};
use gr00t_runtime::cpu::norms::gelu_tanh;

use super::tests::rand;

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_layernorm_adaln_matches_emulator() {
    let d = DitDims::FULL.width();
    let tokens = DitDims::FULL.sa_tokens;
    let mut seed = 0x1a7e7u64;
    // A residual stream with a per-row offset and spread (LayerNorm must remove both), and the
    // AdaLN scale / shift as the ada matmul leaves them: bf16.
    let x: Vec<f32> = (0..tokens)
        .flat_map(|r| {
            let (off, spread) = (0.5 * (r as f32 % 7.0 - 3.0), 1.0 + (r % 5) as f32);
            (0..d)
                .map(|_| off + spread * rand(&mut seed))
                .collect::<Vec<_>>()
        })
        .collect();
    let scale: Vec<f32> = (0..d)
        .map(|_| round_to_bf16(0.2 * rand(&mut seed)))
        .collect();
    let shift: Vec<f32> = (0..d)
        .map(|_| round_to_bf16(0.2 * rand(&mut seed)))
        .collect();
    let mut w = open_sim("sim_layernorm_adaln_matches_emulator");
    for modulation in [Some((&scale[..], &shift[..])), None] {
        let want = norm_from_partials(&x, d, 1e-5, modulation);
        let run = layernorm(&mut w, &x, d, 1e-5, modulation, 2)
            .unwrap_or_else(|e| panic!("layernorm on the device: {e}"));
        assert_eq!(run.values.len(), want.len());
        let p = pcc(&run.values, &want);
        let max_err = max_abs_err(&run.values, &want);
        let same =
            run.values.iter().zip(&want).filter(|(a, b)| a == b).count() as f64 / want.len() as f64;
        eprintln!(
            "layernorm {} on [{tokens}, {d}]: PCC {p:.7} vs the emulator, max |err| {max_err:.4}, \
             {:.1} % bit-equal; program {:.0} ms (simulator)",
            if modulation.is_some() {
                "+ AdaLN"
            } else {
                "(plain)"
            },
            100.0 * same,
            run.program_ms
        );
        assert!(p >= 0.9999, "PCC {p}");
        // Outputs reach about 4: one bf16 step there is 2^-6 = 0.016; allow two.
        assert!(max_err <= 0.032, "max |err| {max_err}");
    }
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_softmax_rows_match_f64() {
    // One head's scores of a cross block: 51 action/state queries over the GR1 prompt's 116
    // context tokens (keys padded to 128 on the device), spread like scaled QK^T.
    let (rows, n) = (DitDims::FULL.sa_tokens, DitDims::FULL.ctx_tokens);
    let mut seed = 0x50f7u64;
    let s: Vec<f32> = (0..rows * n).map(|_| 4.0 * rand(&mut seed)).collect();
    let mut w = open_sim("sim_softmax_rows_match_f64");
    let run = softmax(&mut w, &s, n, 2).unwrap_or_else(|e| panic!("softmax on the device: {e}"));
    let mut want = Vec::with_capacity(s.len());
    for row in s.chunks_exact(n) {
        let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let sum: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| (v / sum) as f32));
    }
    let p = pcc(&run.values, &want);
    let (mut max_abs, mut max_rel) = (0f32, 0f32);
    for (a, b) in run.values.iter().zip(&want) {
        max_abs = max_abs.max((a - b).abs());
        max_rel = max_rel.max((a - b).abs() / b);
    }
    let worst_sum = run
        .values
        .chunks_exact(n)
        .map(|r| (r.iter().sum::<f32>() - 1.0).abs())
        .fold(0f32, f32::max);
    eprintln!(
        "softmax [{rows}, {n}]: PCC {p:.7} vs f64, max |err| {max_abs:.2e}, max relative {max_rel:.2e}, \
         worst |row sum - 1| {worst_sum:.2e}; program {:.0} ms (simulator)",
        run.program_ms
    );
    assert!(p >= 0.9999, "PCC {p}");
    // bf16 output (2^-9 relative) plus s - max through the FPU's 19-bit source registers
    // (|s| <= 4: 2^-9 absolute in the exponent).
    assert!(max_rel <= 0.01, "max relative error {max_rel}");
    assert!(max_abs <= 2e-3, "max |err| {max_abs}");
    assert!(worst_sum <= 0.01, "row sum off by {worst_sum}");
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_bias_gelu_matches_emulator() {
    // A 1536-column slice of the FF-up output (51 x 6144 in the model): the fp32 sums as the
    // matmul leaves them, and a bias.
    let (rows, n) = (DitDims::FULL.sa_tokens, DitDims::FULL.width());
    let mut seed = 0xb1a5u64;
    let x: Vec<f32> = (0..rows * n).map(|_| 3.0 * rand(&mut seed)).collect();
    let bias: Vec<f32> = (0..n).map(|_| 0.5 * rand(&mut seed)).collect();
    let mut w = open_sim("sim_bias_gelu_matches_emulator");
    for act in [RowAct::GeluTanh, RowAct::Identity] {
        let mut want = x.clone();
        finish_matmul(&mut want, n, Some(&bias));
        if act == RowAct::GeluTanh {
            gelu_tanh(&mut want);
            want.iter_mut().for_each(|v| *v = round_to_bf16(*v));
        }
        let run = bias_act(&mut w, &x, &bias, act, None, 2)
            .unwrap_or_else(|e| panic!("{act:?} on the device: {e}"));
        let p = pcc(&run.values, &want);
        let max_err = max_abs_err(&run.values, &want);
        let same =
            run.values.iter().zip(&want).filter(|(a, b)| a == b).count() as f64 / want.len() as f64;
        eprintln!(
            "bias + {act:?} on [{rows}, {n}]: PCC {p:.7} vs the emulator, max |err| {max_err:.2e}, \
             {:.2} % bit-equal; program {:.0} ms (simulator)",
            100.0 * same,
            run.program_ms
        );
        assert!(p >= 0.9999, "{act:?}: PCC {p}");
        match act {
            // The bias add and the bf16 rounding are exact fp32 on both sides.
            RowAct::Identity => assert_eq!(same, 1.0, "bias + bf16 differs from finish_matmul"),
            // Two GELU implementations (the emulator's f32 fast_exp, our SFPU exp): at most a
            // bf16 step apart (values up to 3.5: 2^-6), almost always equal.
            RowAct::GeluTanh => {
                assert!(max_err <= 0.016, "max |err| {max_err}");
                assert!(same >= 0.99, "only {:.2} % bit-equal", 100.0 * same);
            }
        }
    }
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_matmul_end_with_residual_matches_emulator() {
    // The output projection's end on the 51 x 1536 stream: the fp32 sums and a bias, rounded to
    // bf16 (the emulator's `finish_matmul`), then added to the fp32 residual stream: exact fp32
    // on both sides, in one program.
    let (rows, d) = (DitDims::FULL.sa_tokens, DitDims::FULL.width());
    let mut seed = 0x7e5u64;
    let x: Vec<f32> = (0..rows * d).map(|_| 2.0 * rand(&mut seed)).collect();
    let bias: Vec<f32> = (0..d).map(|_| 0.5 * rand(&mut seed)).collect();
    let stream: Vec<f32> = (0..rows * d).map(|_| 5.0 * rand(&mut seed)).collect();
    let mut w = open_sim("sim_matmul_end_with_residual_matches_emulator");
    let run = bias_act(&mut w, &x, &bias, RowAct::Identity, Some(&stream), 2)
        .unwrap_or_else(|e| panic!("bias + residual: {e}"));
    let mut o = x.clone();
    finish_matmul(&mut o, d, Some(&bias));
    let want: Vec<f32> = stream.iter().zip(&o).map(|(a, b)| a + b).collect();
    let same = run.values.iter().zip(&want).filter(|(a, b)| a == b).count();
    let max_err = max_abs_err(&run.values, &want);
    eprintln!(
        "bias + residual on [{rows}, {d}]: {same} of {} bit-equal to the emulator, max |err| \
         {max_err:.2e}; program {:.0} ms (simulator)",
        want.len(),
        run.program_ms
    );
    assert_eq!(
        same,
        want.len(),
        "finish_matmul + the residual add is not exact fp32"
    );
}

/// The streaming norm's step at width `d` (as `norm_stream` builds it), for its L1.
fn stream_step(d: usize, norm: StreamNorm) -> RowsStep {
    let wt = d / 32;
    RowsStep {
        x: "x".into(),
        scaler: "s".into(),
        g: "g".into(),
        b: "b".into(),
        b_col: 0,
        vec_len: d,
        out: "y".into(),
        out_f32: false,
        wt,
        row_tiles: 3,
        vec_tiles: wt,
        label: "norm_stream".into(),
        work_cbs: norm_stream_work_cbs(norm),
        unpack_to_dest: norm_stream_unpack_to_dest(norm),
        cores: 1,
        group: "norm_stream".into(),
        kernels: KernelSet {
            reader: "reader".into(),
            compute: "compute".into(),
            writer: "writer".into(),
        },
    }
}

#[test]
fn the_streaming_norm_fits_l1_at_any_width() {
    for norm in [StreamNorm::Layer, StreamNorm::Rms] {
        let l1: Vec<usize> = [1536, 2048, 4608, 32 * 1024]
            .iter()
            .map(|&d| stream_step(d, norm).l1_bytes())
            .collect();
        eprintln!("{norm:?}: {} bytes per core at every width", l1[0]);
        assert!(l1.iter().all(|&b| b == l1[0]), "{norm:?}: L1 {l1:?}");
        // A small fixed share of the budget (the whole-row kernel needs 3.6 MB at 4608).
        assert!(l1[0] <= L1_BUDGET / 4, "{norm:?}: {} bytes", l1[0]);
    }
    // x is sized by the step's own entry, not to a whole row.
    let x_id = cb_id("reader_rows.cpp", "cb_x");
    let x = norm_stream_work_cbs(StreamNorm::Layer)
        .into_iter()
        .find(|(id, _)| *id == x_id)
        .map(|(_, pages)| pages);
    assert_eq!(x, Some(2 * NORM_STREAM_CHUNK));
}

#[test]
fn the_streaming_norm_defines_say_the_width_and_kind() {
    let (reader, compute) = norm_stream_sources(4608, 1e-6, StreamNorm::Rms);
    for src in [&reader, &compute] {
        assert!(src.contains("#define GR00T_NORM_RMS 1"));
        assert!(src.contains(&format!("#define GR00T_NORM_CHUNK {NORM_STREAM_CHUNK}")));
        let marker_left = src.lines().any(|l| l.trim_start().starts_with("//@@"));
        assert!(!marker_left, "a marker line left");
    }
    let inv_d = format!("{:#010x}u", (1.0f32 / 4608.0).to_bits());
    assert!(compute.contains(&inv_d));
    let (reader, compute) = norm_stream_sources(1536, 1e-5, StreamNorm::Layer);
    let rms = "#define GR00T_NORM_RMS";
    assert!(!reader.contains(rms) && !compute.contains(rms));
}

/// f64 LayerNorm (`beta` given) or RMSNorm of `x` rows of `d`, with `gamma`.
fn norm_f64(x: &[f32], d: usize, gamma: &[f32], beta: Option<&[f32]>, eps: f64) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(d) {
        let n = d as f64;
        let mean = if beta.is_some() {
            row.iter().map(|&v| v as f64).sum::<f64>() / n
        } else {
            0.0
        };
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let rstd = 1.0 / (var + eps).sqrt();
        for (c, &v) in row.iter().enumerate() {
            let b = beta.map_or(0.0, |b| b[c] as f64);
            out.push(((v as f64 - mean) * rstd * gamma[c] as f64 + b) as f32);
        }
    }
    out
}

/// Runs the streaming norm on `rows` x `d` inputs (row 1 offset by +20: the E[x²] − mean² form
/// must survive a large mean) against f64: PCC ≥ 0.9999, max |err| within three bf16 steps of
/// the largest output.
fn check_stream_norm(test: &str, rows: usize, d: usize, norm: StreamNorm, seed: u64) {
    super::tests::require_simulator(test);
    let mut seed = seed;
    let x: Vec<f32> = (0..rows)
        .flat_map(|r| {
            let off = if r == 1 { 20.0 } else { 0.5 * (r % 5) as f32 };
            let spread = 1.0 + (r % 3) as f32;
            (0..d)
                .map(|_| off + spread * rand(&mut seed))
                .collect::<Vec<_>>()
        })
        .collect();
    let gamma: Vec<f32> = (0..d).map(|_| 1.0 + 0.5 * rand(&mut seed)).collect();
    let beta: Vec<f32> = (0..d).map(|_| 0.5 * rand(&mut seed)).collect();
    let eps = 1e-6f32;
    let want = norm_f64(
        &x,
        d,
        &gamma,
        (norm == StreamNorm::Layer).then_some(&beta[..]),
        eps as f64,
    );
    let mut w = open_sim(test);
    let run = norm_stream(&mut w, &x, d, &gamma, &beta, eps, norm, 3)
        .unwrap_or_else(|e| panic!("{norm:?} on the device: {e}"));
    assert_eq!(run.values.len(), want.len());
    let p = pcc(&run.values, &want);
    let max_err = max_abs_err(&run.values, &want);
    let top = want.iter().fold(0f32, |a, v| a.max(v.abs()));
    let step = 2f32.powi(top.log2().floor() as i32 - 7);
    let big_row_err = max_abs_err(&run.values[d..2 * d], &want[d..2 * d]);
    let other_rows_err = max_abs_err(&run.values[..d], &want[..d])
        .max(max_abs_err(&run.values[2 * d..], &want[2 * d..]));
    eprintln!(
        "{norm:?} streaming on [{rows}, {d}]: PCC {p:.7} vs f64, max |err| {max_err:.4} (row with \
         mean +20: {big_row_err:.4}, others: {other_rows_err:.4}), largest |y| {top:.2} (bf16 step {step:.4}); program {:.0} ms \
         (simulator)",
        run.program_ms
    );
    assert!(p >= 0.9999, "PCC {p}");
    assert!(
        max_err <= 3.0 * step,
        "max |err| {max_err} > 3 bf16 steps of {top}"
    );
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_norm_stream_layernorm_4608_matches_f64() {
    // The Eagle projector's LayerNorm width, 80 rows (3 tile rows, the last padded).
    check_stream_norm(
        "sim_norm_stream_layernorm_4608_matches_f64",
        80,
        4608,
        StreamNorm::Layer,
        0x4608,
    );
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_norm_stream_rmsnorm_2048_matches_f64() {
    // Qwen3's RMSNorm width, 2 tile rows.
    check_stream_norm(
        "sim_norm_stream_rmsnorm_2048_matches_f64",
        64,
        2048,
        StreamNorm::Rms,
        0x2048,
    );
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_norm_stream_short_chunks_match_f64() {
    // Widths the chunk does not divide: 7 tiles (a chunk and a short one), and 3 (one short).
    let test = "sim_norm_stream_short_chunks_match_f64";
    check_stream_norm(test, 40, 7 * 32, StreamNorm::Layer, 0x7);
    check_stream_norm(test, 40, 3 * 32, StreamNorm::Rms, 0x3);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_norm_stream_matches_layernorm_rows() {
    // The DiT's AdaLN at 1536: the whole-row kernel and the streaming one (chunked, and its
    // statistics of x shifted by its row's first-tile mean) agree to a bf16 step or two.
    super::tests::require_simulator("sim_norm_stream_matches_layernorm_rows");
    let (d, tokens) = (DitDims::FULL.width(), DitDims::FULL.sa_tokens);
    let mut seed = 0x1536u64;
    let x: Vec<f32> = (0..tokens * d).map(|_| 3.0 * rand(&mut seed)).collect();
    let scale: Vec<f32> = (0..d)
        .map(|_| round_to_bf16(0.2 * rand(&mut seed)))
        .collect();
    let shift: Vec<f32> = (0..d)
        .map(|_| round_to_bf16(0.2 * rand(&mut seed)))
        .collect();
    let gamma: Vec<f32> = scale.iter().map(|s| 1.0 + s).collect();
    let mut w = open_sim("sim_norm_stream_matches_layernorm_rows");
    let whole = layernorm(&mut w, &x, d, 1e-5, Some((&scale, &shift)), 2)
        .unwrap_or_else(|e| panic!("layernorm: {e}"));
    let stream = norm_stream(&mut w, &x, d, &gamma, &shift, 1e-5, StreamNorm::Layer, 2)
        .unwrap_or_else(|e| panic!("norm_stream: {e}"));
    let p = pcc(&stream.values, &whole.values);
    let max_err = max_abs_err(&stream.values, &whole.values);
    let same = stream
        .values
        .iter()
        .zip(&whole.values)
        .filter(|(a, b)| a == b)
        .count() as f64
        / x.len() as f64;
    eprintln!(
        "norm_stream vs layernorm_rows on [{tokens}, {d}]: PCC {p:.7}, max |err| {max_err:.4}, \
         {:.1} % bit-equal; programs {:.0} / {:.0} ms (simulator)",
        100.0 * same,
        stream.program_ms,
        whole.program_ms
    );
    assert!(p >= 0.99999, "PCC {p}");
    // Outputs reach about 4: one bf16 step there is 2^-6.
    assert!(max_err <= 0.032, "max |err| {max_err}");
}

/// The largest `|a - b|` over two equally long slices.
fn max_abs_err(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}
