//! The row kernels on the simulated p150a, full size: LayerNorm / AdaLN over 51 tokens of the
//! 1536-wide DiT stream against the emulator's `norm_from_partials` (the reference the device
//! path is held to); the attention softmax over 51 queries x 116 context keys against f64; the
//! end of a matmul (bias, bf16, GELU) against the emulator's `finish_matmul` + `gelu_tanh`, and
//! with the residual add against `finish_matmul` + the emulator's fp32 add.
//! `#[ignore]`d like every `sim_*` test: `scripts/device-sim-tests.sh` runs it.

use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::dims::DitDims;

use super::rows::{RowAct, bias_act, layernorm, softmax};
use super::sfpu_tests::open_sim;
use crate::emulator::{finish_matmul, norm_from_partials};
use crate::tests::pcc;
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

/// The largest `|a - b|` over two equally long slices.
fn max_abs_err(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}
