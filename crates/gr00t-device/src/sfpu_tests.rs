//! Our SFPU library on the simulated p150a, each op against its f64 definition.
//!
//! Like `tests.rs`, the `sim_*` tests are `#[ignore]`d: a plain `cargo test` reports them as
//! ignored, never as passed; `scripts/device-sim-tests.sh` runs them with the simulator, where a
//! missing simulator is a failure. Each test opens its own worker, builds one compute kernel
//! (the op's) and runs 4 tiles through it.

use tt_blackhole::bf16::{f32_to_bf16_bits, round_to_bf16};

use super::TtnnWorker;
use super::sfpu::{EltwiseSpec, SfpuError, SfpuOp, TileDtype, eltwise};

/// A worker on the simulated p150a; the simulator must be there (these tests run only when
/// asked for).
pub(super) fn open_sim(test: &str) -> TtnnWorker {
    assert!(
        std::env::var_os("TT_METAL_SIMULATOR").is_some(),
        "{test}: TT_METAL_SIMULATOR is not set (source the simulator's env.sh, or run \
         scripts/device-sim-tests.sh)"
    );
    let mut w = TtnnWorker::spawn().expect("start the ttnn worker");
    w.call(
        &super::protocol::Open {
            device: "sim".into(),
        },
        &[],
    )
    .unwrap_or_else(|e| panic!("{test}: open the simulated device: {e}"));
    w
}

/// The smallest normal f32: DST holds no subnormals (loads and stores flush them to 0).
const MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;

/// What the device should give for input `x` as a bf16 result: the f64 definition of `x` as DST
/// holds it, rounded once to f32 (subnormals flushed) and once to bf16. (Rounding twice can
/// differ from one rounding to bf16 only at an exact f32 tie, which no test input meets.)
fn want_bf16(op: SfpuOp, x: f32) -> f32 {
    let x = if (x.abs() as f64) < MIN_NORMAL {
        0.0
    } else {
        x as f64
    };
    let r = op.reference(x) as f32;
    round_to_bf16(if (r.abs() as f64) < MIN_NORMAL {
        0.0 * r
    } else {
        r
    })
}

/// Distance in bf16 units in the last place (a NaN only matches a NaN; ±0 are equal).
fn bf16_ulps(a: f32, b: f32) -> u32 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u32::MAX
        };
    }
    let key = |v: f32| {
        let u = f32_to_bf16_bits(v) as i32;
        if u & 0x8000 != 0 { -(u & 0x7FFF) } else { u }
    };
    key(a).abs_diff(key(b))
}

/// A deterministic uniform value in [lo, hi).
fn uniform(seed: &mut u64, lo: f64, hi: f64) -> f64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    lo + (hi - lo) * ((*seed >> 11) as f64 / (1u64 << 53) as f64)
}

/// 4 tiles of inputs over the op's working range, then its edge cases.
fn inputs(op: SfpuOp) -> Vec<f32> {
    let n = 4 * 1024;
    let mut seed = 0x5f0 + op as u64;
    let (mut x, edges): (Vec<f64>, &[f64]) = match op {
        SfpuOp::Exp => (
            (0..n).map(|_| uniform(&mut seed, -20.0, 4.0)).collect(),
            &[0.0, 1.0, -1.0, -87.0, -88.0, -100.0, 88.5, 89.0, 80.0],
        ),
        SfpuOp::Reciprocal => (
            (0..n)
                .map(|i| {
                    let m = uniform(&mut seed, -20.0, 20.0).exp();
                    if i % 2 == 0 { m } else { -m }
                })
                .collect(),
            &[0.0, 1.0, -1.0, 2.0, 0.5, 3.0e38, -3.0e38, 1.0e-37],
        ),
        SfpuOp::Rsqrt => (
            (0..n)
                .map(|_| uniform(&mut seed, -12.0, 12.0).exp())
                .collect(),
            &[0.0, 1.0, 4.0, 2.0, 1.0e-30, 1.0e30, 3.0e38, f64::INFINITY],
        ),
        SfpuOp::Relu => (
            (0..n).map(|_| uniform(&mut seed, -12.0, 12.0)).collect(),
            &[0.0, 1.0, -1.0, 3.0e38, -3.0e38, 1.0e-37, -1.0e-37],
        ),
        SfpuOp::Silu => (
            (0..n).map(|_| uniform(&mut seed, -12.0, 12.0)).collect(),
            &[0.0, 100.0, -100.0, -50.0, 1.0, -1.0],
        ),
        SfpuOp::GeluTanh => (
            (0..n).map(|_| uniform(&mut seed, -8.0, 8.0)).collect(),
            &[0.0, 50.0, -50.0, -12.0, 1.0, -1.0],
        ),
        SfpuOp::GeluErf => (
            (0..n).map(|_| uniform(&mut seed, -8.0, 8.0)).collect(),
            &[0.0, 50.0, -50.0, -12.0, -9.0, 1.0, -1.0, 3.0e38, -3.0e38],
        ),
    };
    x.truncate(n - edges.len());
    x.extend_from_slice(edges);
    // The device holds bf16 inputs: the reference starts from the same values.
    x.iter().map(|&v| round_to_bf16(v as f32)).collect()
}

/// Run `op` on the simulator over [`inputs`], bf16 in and out with an fp32 DST; assert every
/// output within 1 bf16 ulp of the f64 definition and at least 99 % of them equal to it.
fn check_op(test: &str, op: SfpuOp) {
    let x = inputs(op);
    let mut w = open_sim(test);
    let spec = EltwiseSpec {
        op,
        rows: x.len() / 32,
        cols: 32,
        input: TileDtype::Bf16,
        output: TileDtype::Bf16,
        cores: 2,
    };
    let run = eltwise(&mut w, &spec, &x).unwrap_or_else(|e| panic!("{op:?} on the device: {e}"));
    let mut worst = (0u32, 0usize);
    let mut exact = 0usize;
    for (i, (&xi, &got)) in x.iter().zip(&run.values).enumerate() {
        let u = bf16_ulps(got, want_bf16(op, xi));
        exact += usize::from(u == 0);
        if u > worst.0 {
            worst = (u, i);
        }
    }
    let frac = exact as f64 / x.len() as f64;
    let (u, i) = worst;
    eprintln!(
        "{op:?}: {} values, max {u} bf16 ulp (x = {:e}: got {:e}, want {:e}), {:.2} % exact; program {:.1} ms",
        x.len(),
        x[i],
        run.values[i],
        want_bf16(op, x[i]),
        frac * 100.0,
        run.program_ms
    );
    assert!(
        u <= 1,
        "{op:?}: {u} bf16 ulp at x = {:e}: got {:e}, want {:e}",
        x[i],
        run.values[i],
        want_bf16(op, x[i])
    );
    assert!(frac >= 0.99, "{op:?}: only {:.3} % exact", frac * 100.0);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_exp_matches_f64() {
    check_op("sim_sfpu_exp_matches_f64", SfpuOp::Exp);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_reciprocal_matches_f64() {
    check_op("sim_sfpu_reciprocal_matches_f64", SfpuOp::Reciprocal);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_rsqrt_matches_f64() {
    check_op("sim_sfpu_rsqrt_matches_f64", SfpuOp::Rsqrt);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_relu_matches_f64() {
    check_op("sim_sfpu_relu_matches_f64", SfpuOp::Relu);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_silu_matches_f64() {
    check_op("sim_sfpu_silu_matches_f64", SfpuOp::Silu);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_gelu_tanh_matches_f64() {
    check_op("sim_sfpu_gelu_tanh_matches_f64", SfpuOp::GeluTanh);
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_gelu_erf_matches_f64() {
    check_op("sim_sfpu_gelu_erf_matches_f64", SfpuOp::GeluErf);
}

/// The f32 path (what chained on-device ops use): f32 in, unpacked straight to the fp32 DST, f32
/// out. exp, SiLU, rsqrt and the exact GELU within a few f32 ulp of f64: the library's own error, which the bf16
/// tests' rounding hides.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_sfpu_f32_path_is_fp32_accurate() {
    let mut w = open_sim("sim_sfpu_f32_path_is_fp32_accurate");
    let mut seed = 0xf32u64;
    let x: Vec<f32> = (0..2048)
        .map(|_| uniform(&mut seed, -10.0, 10.0) as f32)
        .collect();
    for op in [SfpuOp::Exp, SfpuOp::Silu, SfpuOp::Rsqrt, SfpuOp::GeluErf] {
        // rsqrt over |x|, and one negative input, which must come back NaN (a bf16 output would
        // show it as inf: the packer of the simulated p150a turns NaN into inf).
        let x: Vec<f32> = if op == SfpuOp::Rsqrt {
            std::iter::once(-1.0)
                .chain(x[1..].iter().map(|v| v.abs()))
                .collect()
        } else {
            x.clone()
        };
        let spec = EltwiseSpec {
            op,
            rows: 64,
            cols: 32,
            input: TileDtype::F32,
            output: TileDtype::F32,
            cores: 1,
        };
        let run = eltwise(&mut w, &spec, &x).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let rel = x
            .iter()
            .zip(&run.values)
            .filter(|(xi, _)| **xi >= 0.0 || op != SfpuOp::Rsqrt)
            .map(|(&xi, &got)| {
                let want = op.reference(xi as f64);
                // The exact GELU's far negative tail is e^(-x²/2) scaled: its exponent's own f32
                // rounding (x²/2 up to 50 here) is a relative error of a few 1e-6 in values below
                // 1e-10, which an absolute floor of 1e-10 lets through.
                let floor = if op == SfpuOp::GeluErf { 1e-10 } else { 0.0 };
                ((got as f64 - want).abs() - floor).max(0.0) / want.abs().max(MIN_NORMAL)
            })
            .fold(0f64, f64::max);
        eprintln!("{op:?} f32 -> f32: max relative error {rel:.3e}");
        if op == SfpuOp::Rsqrt {
            assert!(run.values[0].is_nan(), "rsqrt(-1) = {}", run.values[0]);
        }
        assert!(
            rel < 8.0 * f32::EPSILON as f64,
            "{op:?}: relative error {rel:e}"
        );
    }
}

/// The f64 erfc the exact GELU is tested against, at published values and across the switch
/// from its series to its continued fraction.
#[test]
fn reference_erfc_matches_published_values() {
    use super::sfpu::erfc;
    for (z, want) in [
        (0.0, 1.0),
        (0.5, 0.479_500_122_186_953_5),
        (1.0, 0.157_299_207_050_285_1),
        (2.0, 4.677_734_981_047_266e-3),
        (3.0, 2.209_049_699_858_544e-5),
        (5.0, 1.537_459_794_428_035e-12),
        (10.0, 2.088_487_583_762_545e-45),
        (-1.0, 1.842_700_792_949_715),
    ] {
        let got = erfc(z);
        assert!(
            ((got - want) / want).abs() < 1e-11,
            "erfc({z}) = {got:e}, want {want:e}"
        );
    }
    let (below, above) = (erfc(2.5 - 1e-12), erfc(2.5));
    assert!(
        ((below - above) / above).abs() < 1e-10,
        "{below:e} vs {above:e}"
    );
}

/// Shapes that are not whole tiles, or inputs that do not fill them, are refused before
/// anything reaches the device.
#[test]
fn eltwise_refuses_partial_tiles() {
    let spec = |rows, cols| EltwiseSpec {
        op: SfpuOp::Exp,
        rows,
        cols,
        input: TileDtype::Bf16,
        output: TileDtype::Bf16,
        cores: 1,
    };
    assert!(spec(64, 32).check(64 * 32).is_ok());
    for (rows, cols, len) in [
        (30, 32, 30 * 32),
        (32, 48, 32 * 48),
        (0, 32, 0),
        (32, 32, 1000),
    ] {
        let err = spec(rows, cols).check(len).unwrap_err();
        assert!(matches!(err, SfpuError::Shape { .. }), "{err}");
    }
}

/// The shared compute pieces (`kernels/compute_pieces.h`) reach each compute kernel that calls
/// them once, after the SFPU library whose routines they run and outside its `TRISC_MATH` block
/// (they run on all three threads), and no kernel keeps a copy of a piece of its own.
#[test]
fn compute_kernels_take_the_shared_pieces_once() {
    use super::registry::{KERNELS, Role};
    use super::sfpu::{COMPUTE_PIECES, SFPU_LIB, compose_compute};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels");
    let mut users = Vec::new();
    for k in KERNELS.iter().filter(|k| k.role == Role::Compute) {
        let raw = std::fs::read_to_string(dir.join(k.file)).expect("read a kernel");
        for piece in ["pass(", "pack_dst0(", "reduce_row_tiles(", "row_softmax("] {
            assert!(
                !raw.contains(&format!("inline void {piece}")),
                "{}: a copy of `{piece}…)` of its own",
                k.file
            );
        }
        let composed = compose_compute(&raw, &[]);
        assert!(
            !composed.contains("//@@GR00T_SFPU_LIB@@")
                && !composed.contains("//@@GR00T_COMPUTE_PIECES@@"),
            "{}: a marker left",
            k.file
        );
        if !raw.contains("gr00t_compute::") {
            assert!(!composed.contains(COMPUTE_PIECES), "{}", k.file);
            continue;
        }
        users.push(k.file);
        assert_eq!(composed.matches(COMPUTE_PIECES).count(), 1, "{}", k.file);
        let (lib, pieces) = (composed.find(SFPU_LIB), composed.find(COMPUTE_PIECES));
        assert!(
            lib.is_some() && lib < pieces,
            "{}: the pieces before the library",
            k.file
        );
        let before = &raw[..raw.find("//@@GR00T_COMPUTE_PIECES@@").expect("its marker")];
        assert!(
            before.rfind("#endif") > before.rfind("#ifdef TRISC_MATH"),
            "{}: the pieces inside the MATH thread's block",
            k.file
        );
    }
    users.sort_unstable();
    assert_eq!(
        users,
        [
            "attention_head.cpp",
            "bias_act_rows.cpp",
            "layernorm_rows.cpp",
            "norm_stream.cpp",
            "pass_rows.cpp",
            "rope_rows.cpp",
            "softmax_rows.cpp",
        ],
        "the kernels that share the pieces"
    );
}
