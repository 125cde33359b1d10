//! Attention per head on the simulated p150a, full size: the 32 heads of 48 of a cross block,
//! 51 queries over the GR1 prompt's 116 context tokens, against the emulator's
//! `flash_attention` (the reference the device path is held to) and f64. `#[ignore]`d like
//! every `sim_*` test: `scripts/device-sim-tests.sh` runs it.

use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::dims::DitDims;

use super::attention::{AttentionShape, attention, check_shape};
use super::sfpu_tests::open_sim;
use crate::golden_case::pcc;
use gr00t_megakernel::emulator::flash_attention;

/// A deterministic uniform value in [-1, 1).
fn rand(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// f64 attention of the same bf16 inputs: per query head h, K/V head h / (heads / kv_heads);
/// key j dropped when `keep[j]` is false or, causal, when j > i.
fn reference(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, keep: &[bool]) -> Vec<f32> {
    let (d, d_kv) = (s.heads * s.hd, s.kv_heads * s.hd);
    let group = s.group().expect("kv_heads divides heads");
    let mut out = vec![0f32; s.mq * d];
    for h in 0..s.heads {
        let (qc, kc) = (h * s.hd, (h / group) * s.hd);
        for i in 0..s.mq {
            let qi = &q[i * d + qc..i * d + qc + s.hd];
            let scores: Vec<f64> = (0..s.mk)
                .map(|j| {
                    let kj = &k[j * d_kv + kc..j * d_kv + kc + s.hd];
                    let dot: f64 = qi.iter().zip(kj).map(|(a, b)| *a as f64 * *b as f64).sum();
                    if keep[j] && (!s.causal || j <= i) {
                        dot / (s.hd as f64).sqrt()
                    } else {
                        f64::NEG_INFINITY
                    }
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|x| (x - m).exp()).collect();
            let sum: f64 = e.iter().sum();
            for c in 0..s.hd {
                let acc: f64 = (0..s.mk)
                    .map(|j| e[j] / sum * v[j * d_kv + kc + c] as f64)
                    .sum();
                out[i * d + qc + c] = acc as f32;
            }
        }
    }
    out
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_attention_per_head_matches_emulator() {
    let dims = DitDims::FULL;
    let mut w = open_sim("sim_attention_per_head_matches_emulator");
    // The full size (hd = 48: the reader and writer move whole faces), then the tiny config's
    // hd = 10 (heads share tiles: element by element, one core owns the shared output tiles).
    for shape in [
        AttentionShape::new(
            dims.sa_tokens,
            dims.ctx_tokens,
            dims.num_heads,
            dims.head_dim,
        ),
        AttentionShape::new(25, 40, 4, 10),
    ] {
        check_attention(&mut w, shape, true);
    }
}

/// Qwen3-1.7B's self attention over a prompt, full width: 16 query heads over 8 K/V heads of
/// 128 (GQA), causal, 116 query and key rows (a query tile row's diagonal key tile masked in L1,
/// the tiles above it skipped).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_attention_gqa_causal_qwen3_prompt() {
    let mut w = open_sim("sim_attention_gqa_causal_qwen3_prompt");
    let shape = AttentionShape {
        kv_heads: 8,
        causal: true,
        ..AttentionShape::new(116, 116, 16, 128)
    };
    check_attention(&mut w, shape, false);
}

/// GQA and causal, tiny: 2 query heads over one K/V head of 16, 40 rows (the second query tile
/// row's diagonal tile holds padding keys too), every key and with a key mask.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_attention_gqa_causal_tiny() {
    let mut w = open_sim("sim_attention_gqa_causal_tiny");
    let shape = AttentionShape {
        kv_heads: 1,
        causal: true,
        ..AttentionShape::new(40, 40, 2, 16)
    };
    check_attention(&mut w, shape, true);
}

/// Attention of `shape` on the device against f64 (and the emulator, for the plain attention it
/// has): every key, then (`with_key_mask`) a key mask dropping every third key.
fn check_attention(w: &mut crate::worker::TtnnWorker, shape: AttentionShape, with_key_mask: bool) {
    let (d, d_kv) = (shape.heads * shape.hd, shape.kv_heads * shape.hd);
    let mut seed = 0xa77eu64;
    let mut bf16s = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| round_to_bf16(2.0 * rand(&mut seed)))
            .collect()
    };
    let (q, k, v) = (
        bf16s(shape.mq * d),
        bf16s(shape.mk * d_kv),
        bf16s(shape.mk * d_kv),
    );
    // Every key, then a key mask (a text cross block attends to part of the context).
    let keep_some: Vec<bool> = (0..shape.mk).map(|j| j % 3 != 1).collect();
    let masks = if with_key_mask {
        vec![None, Some(&keep_some[..])]
    } else {
        vec![None]
    };
    for mask in masks {
        let started = std::time::Instant::now();
        let run = attention(w, &q, &k, &v, shape, mask, 8)
            .unwrap_or_else(|e| panic!("attention on the device: {e}"));
        let keep = mask.map_or_else(|| vec![true; shape.mk], <[bool]>::to_vec);
        let f64_ref = reference(&q, &k, &v, shape, &keep);
        let max_err = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max)
        };
        let (p_f64, e_f64) = (pcc(&run.values, &f64_ref), max_err(&run.values, &f64_ref));
        let mut line = format!(
            "attention {} heads over {} K/V heads of {} x [{} x {}] ({}{}): PCC {p_f64:.7} vs f64 \
             (max |err| {e_f64:.2e})",
            shape.heads,
            shape.kv_heads,
            shape.hd,
            shape.mq,
            shape.mk,
            if mask.is_some() {
                "key mask"
            } else {
                "all keys"
            },
            if shape.causal { ", causal" } else { "" }
        );
        if mask.is_none() && shape == AttentionShape::new(shape.mq, shape.mk, shape.heads, shape.hd)
        {
            // The emulator's flash-style attention takes every key.
            let emu = flash_attention(&q, &k, &v, shape.mq, shape.mk, shape.heads, shape.hd);
            let (p_emu, e_emu) = (pcc(&run.values, &emu), max_err(&run.values, &emu));
            line += &format!(", PCC {p_emu:.7} vs the emulator (max |err| {e_emu:.2e})");
            assert!(p_emu >= 0.9999, "PCC vs the emulator {p_emu}");
            assert!(e_emu <= 0.02, "max |err| vs the emulator {e_emu}");
        }
        eprintln!(
            "{line}; program {:.0} ms, call {:.1} s (simulator)",
            run.program_ms,
            started.elapsed().as_secs_f64()
        );
        assert!(p_f64 >= 0.9999, "PCC vs f64 {p_f64}");
        assert!(e_f64 <= 0.02, "max |err| vs f64 {e_f64}");
    }
}

/// A shape from `new` is the plain attention: every head its own K and V, not causal.
#[test]
fn a_new_shape_is_plain_attention() {
    let s = AttentionShape::new(51, 116, 32, 48);
    assert_eq!((s.kv_heads, s.causal, s.group()), (32, false, Some(1)));
    let gqa = AttentionShape {
        kv_heads: 8,
        ..AttentionShape::new(116, 116, 16, 128)
    };
    assert_eq!(gqa.group(), Some(2));
    let uneven = AttentionShape { kv_heads: 3, ..gqa };
    assert_eq!(uneven.group(), None);
    assert_eq!(AttentionShape { kv_heads: 0, ..gqa }.group(), None);
}

/// An attention step read without `kv_heads` and `causal` (a graph from before them) has every
/// head its own K and V and is not causal; with them, they are read; an unknown key is refused.
#[test]
fn attention_steps_default_to_every_head_its_own_kv_and_not_causal() {
    use super::graph_steps::AttentionStep;
    let base = serde_json::json!({
        "q": "t/q", "k": "t/k", "v": "t/v", "scaler": "c/scaler", "mask": "o/mask", "out": "t/o",
        "heads": 16, "mp": 128, "np": 128, "hd": 128, "cores": 8, "group": "attention",
        "kernels": {"reader": "r", "compute": "c", "writer": "w"}
    });
    let old: AttentionStep = serde_json::from_value(base.clone()).expect("reads");
    assert_eq!((old.kv_heads, old.causal), (16, false));
    let mut with = base.clone();
    with["kv_heads"] = 8.into();
    with["causal"] = true.into();
    let new: AttentionStep = serde_json::from_value(with).expect("reads");
    assert_eq!((new.kv_heads, new.causal), (8, true));
    // Written and read back unchanged.
    let again: AttentionStep =
        serde_json::from_value(serde_json::to_value(&new).expect("writes")).expect("reads");
    assert_eq!(again, new);
    let mut bad = base;
    bad["kv_head"] = 8.into();
    let err = serde_json::from_value::<AttentionStep>(bad).unwrap_err();
    assert!(err.to_string().contains("kv_head"), "{err}");
}

/// Shapes the device cannot run are refused before anything is sent: K/V heads that do not
/// divide the query heads, K and V of the query heads' width when there are fewer K/V heads.
#[test]
fn attention_refuses_uneven_groups_and_wrong_kv_widths() {
    let tiny = AttentionShape {
        kv_heads: 1,
        causal: true,
        ..AttentionShape::new(40, 40, 2, 16)
    };
    let (q, kv) = (40 * 2 * 16, 40 * 16);
    assert!(check_shape(tiny, [q, kv, kv], Some(40)).is_ok());
    assert!(
        check_shape(tiny, [q, q, q], None).is_err(),
        "k, v of 2 heads"
    );
    assert!(
        check_shape(tiny, [q, kv, kv], Some(39)).is_err(),
        "a short mask"
    );
    let uneven = AttentionShape {
        kv_heads: 3,
        ..AttentionShape::new(40, 40, 4, 16)
    };
    let err = check_shape(uneven, [40 * 64, 40 * 48, 40 * 48], None).unwrap_err();
    assert!(
        err.to_string().contains("4 heads over 3 K/V heads"),
        "{err}"
    );
}
