//! The emulated megakernel against the f32 CPU backend on golden case1 (the tiny checkpoint).

use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::CacheOutcome;
use tt_blackhole::split::split_matmul as plan_split;

use super::MegakernelPolicy;
use super::emulator::{flash_attention, norm_from_partials, split_matmul};
use super::golden_case::{case_dir, golden_inputs, pcc};
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::policy::{HostStages, Policy};
use gr00t_runtime::weights::WeightStore;

fn policy(dtype: ArenaDtype, cache: Option<&std::path::Path>) -> MegakernelPolicy {
    let model = Gr00tModel::load(&case_dir()).expect("tiny checkpoint");
    let ws = WeightStore::open_dir(&case_dir()).expect("tiny weights");
    MegakernelPolicy::new(model, &ws, dtype, cache, "golden-tiny-case1", "emulator")
        .expect("megakernel policy")
}

#[test]
fn emulation_matches_f32_cpu_on_golden_case1() {
    let inputs = golden_inputs();
    let model = Gr00tModel::load(&case_dir()).unwrap();
    let reference = model.forward(&inputs, &mut Taps::none()).unwrap();
    let mut report = Vec::new();
    for dtype in [ArenaDtype::Bfp8B, ArenaDtype::Bfp4B, ArenaDtype::Bf16] {
        let p = policy(dtype, None);
        assert_eq!(p.backend_name(), "megakernel-emulated");
        let (chunk, timing) = p.predict(&inputs).unwrap();
        // The host emulates the device: it ran every model stage.
        assert_eq!(
            timing.host_stages,
            HostStages::BACKBONE.union(HostStages::HEAD),
            "{dtype}"
        );
        assert_eq!(
            (chunk.horizon, chunk.dim),
            (reference.horizon, reference.dim)
        );
        assert!(chunk.data.iter().all(|v| v.is_finite()));
        // The emulation is not the f32 forward: it must differ (block-float weights, bf16 packs).
        assert!(
            chunk.data != reference.data,
            "{dtype}: identical to f32, the emulation did nothing"
        );
        report.push((dtype, pcc(&chunk.data, &reference.data)));
    }
    eprintln!("PCC of the normalized action chunk vs the f32 CPU backend: {report:?}");
    let get = |d| report.iter().find(|(x, _)| *x == d).unwrap().1;
    assert!(
        get(ArenaDtype::Bfp8B) >= 0.9995,
        "bfp8_b PCC {}",
        get(ArenaDtype::Bfp8B)
    );
    assert!(
        get(ArenaDtype::Bf16) >= 0.9995,
        "bf16 PCC {}",
        get(ArenaDtype::Bf16)
    );
    // bfp4_b is only reported; it must still be a meaningful prediction.
    assert!(
        get(ArenaDtype::Bfp4B) > 0.9,
        "bfp4_b PCC {}",
        get(ArenaDtype::Bfp4B)
    );
}

#[test]
fn arena_cache_is_reused_and_card_choice_fails() {
    let dir = std::env::temp_dir().join(format!("gr00t-mk-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let a = policy(ArenaDtype::Bfp8B, Some(&dir));
    assert!(matches!(a.arena_outcome, CacheOutcome::Built { .. }));
    let b = policy(ArenaDtype::Bfp8B, Some(&dir));
    assert_eq!(b.arena_outcome, CacheOutcome::Hit);
    let inputs = golden_inputs();
    assert_eq!(
        a.predict(&inputs).unwrap().0.data,
        b.predict(&inputs).unwrap().0.data
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let model = Gr00tModel::load(&case_dir()).unwrap();
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    // Without a device backend's opener the card is refused as not built in (gr00t-device's
    // tests refuse it with one, on a machine without a card).
    let err = MegakernelPolicy::new(model, &ws, ArenaDtype::Bfp8B, None, "x", "p150a")
        .err()
        .expect("p150a must fail");
    assert!(err.to_string().contains("not built in"), "{err}");
}

/// The emulator's split matmul, flash attention and LayerNorm (host code: the device runs none
/// of these) against their plain definitions.
#[test]
fn emulator_ops_agree_with_plain_math() {
    // Split matmul (K cut in pieces) equals the plain product up to fp32 reassociation.
    let (m, k, n): (usize, usize, usize) = (5, 100, 70);
    let x: Vec<f32> = (0..m * k)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
        .collect();
    let w: Vec<f32> = (0..k * n)
        .map(|i| ((i * 53 % 97) as f32 - 48.0) / 97.0)
        .collect();
    let split = plan_split(k.div_ceil(32), n.div_ceil(32), 96);
    assert!(split.k_split > 1);
    let y = split_matmul(&x, m, &w, k, n, &split);
    for r in 0..m {
        for c in 0..n {
            let want: f64 = (0..k)
                .map(|kk| x[r * k + kk] as f64 * w[kk * n + c] as f64)
                .sum();
            assert!((y[r * n + c] as f64 - want).abs() < 1e-4, "({r},{c})");
        }
    }
    // Flash attention equals a plain softmax (up to the bf16 packs).
    let (mq, mk, heads, hd) = (3, 70, 2, 8);
    let q: Vec<f32> = (0..mq * heads * hd)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 6.0)
        .collect();
    let kk: Vec<f32> = (0..mk * heads * hd)
        .map(|i| ((i * 11 % 17) as f32 - 8.0) / 8.0)
        .collect();
    let v: Vec<f32> = (0..mk * heads * hd)
        .map(|i| ((i * 5 % 19) as f32 - 9.0) / 9.0)
        .collect();
    let o = flash_attention(&q, &kk, &v, mq, mk, heads, hd);
    let d = heads * hd;
    for h in 0..heads {
        for i in 0..mq {
            let s: Vec<f64> = (0..mk)
                .map(|j| {
                    (0..hd)
                        .map(|t| q[i * d + h * hd + t] as f64 * kk[j * d + h * hd + t] as f64)
                        .sum::<f64>()
                        / (hd as f64).sqrt()
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::MIN, f64::max);
            let z: f64 = s.iter().map(|x| (x - mx).exp()).sum();
            for t in 0..hd {
                let want: f64 = (0..mk)
                    .map(|j| (s[j] - mx).exp() / z * v[j * d + h * hd + t] as f64)
                    .sum();
                assert!(
                    (o[i * d + h * hd + t] as f64 - want).abs() < 2e-2,
                    "head {h} row {i} col {t}"
                );
            }
        }
    }
    // LayerNorm from partial sums: mean 0, unit variance (before the bf16 pack).
    let row: Vec<f32> = (0..96)
        .map(|i| (i as f32 * 0.37).sin() * 3.0 + 1.0)
        .collect();
    let h = norm_from_partials(&row, 96, 1e-5, None);
    let mean: f32 = h.iter().sum::<f32>() / 96.0;
    let var: f32 = h.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / 96.0;
    assert!(
        mean.abs() < 1e-2 && (var - 1.0).abs() < 1e-2,
        "mean {mean} var {var}"
    );
}
