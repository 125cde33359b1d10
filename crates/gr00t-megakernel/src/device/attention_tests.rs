//! Attention per head on the simulated p150a, full size: the 32 heads of 48 of a cross block,
//! 51 queries over the GR1 prompt's 116 context tokens, against the emulator's
//! `flash_attention` (the reference the device path is held to) and f64. `#[ignore]`d like
//! every `sim_*` test: `scripts/device-sim-tests.sh` runs it.

use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::dims::DitDims;

use super::attention::{AttentionShape, attention};
use super::sfpu_tests::open_sim;
use crate::emulator::flash_attention;
use crate::tests::pcc;

/// A deterministic uniform value in [-1, 1).
fn rand(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// f64 attention of the same bf16 inputs.
fn reference(q: &[f32], k: &[f32], v: &[f32], s: AttentionShape, keep: &[bool]) -> Vec<f32> {
    let d = s.heads * s.hd;
    let mut out = vec![0f32; s.mq * d];
    for h in 0..s.heads {
        for i in 0..s.mq {
            let qi = &q[i * d + h * s.hd..i * d + (h + 1) * s.hd];
            let scores: Vec<f64> = (0..s.mk)
                .map(|j| {
                    let kj = &k[j * d + h * s.hd..j * d + (h + 1) * s.hd];
                    let dot: f64 = qi.iter().zip(kj).map(|(a, b)| *a as f64 * *b as f64).sum();
                    if keep[j] {
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
                    .map(|j| e[j] / sum * v[j * d + h * s.hd + c] as f64)
                    .sum();
                out[i * d + h * s.hd + c] = acc as f32;
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
        AttentionShape {
            mq: dims.sa_tokens,
            mk: dims.ctx_tokens,
            heads: dims.num_heads,
            hd: dims.head_dim,
        },
        AttentionShape {
            mq: 25,
            mk: 40,
            heads: 4,
            hd: 10,
        },
    ] {
        check_attention(&mut w, shape);
    }
}

fn check_attention(w: &mut crate::device::worker::TtnnWorker, shape: AttentionShape) {
    let d = shape.heads * shape.hd;
    let mut seed = 0xa77eu64;
    let mut bf16s = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| round_to_bf16(2.0 * rand(&mut seed)))
            .collect()
    };
    let (q, k, v) = (
        bf16s(shape.mq * d),
        bf16s(shape.mk * d),
        bf16s(shape.mk * d),
    );
    // Every key, then a key mask (a text cross block attends to part of the context).
    let keep_some: Vec<bool> = (0..shape.mk).map(|j| j % 3 != 1).collect();
    for mask in [None, Some(&keep_some[..])] {
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
            "attention {} heads x [{} x {}] ({}): PCC {p_f64:.7} vs f64 (max |err| {e_f64:.2e})",
            shape.heads,
            shape.mq,
            shape.mk,
            if mask.is_some() {
                "key mask"
            } else {
                "all keys"
            }
        );
        if mask.is_none() {
            // The emulator's flash-style attention takes every key.
            let emu = flash_attention(&q, &k, &v, shape.mq, shape.mk, shape.heads, shape.hd);
            let (p_emu, e_emu) = (pcc(&run.values, &emu), max_err(&run.values, &emu));
            line += &format!(", PCC {p_emu:.7} vs the emulator (max |err| {e_emu:.2e})");
            assert!(p_emu >= 0.9999, "PCC vs the emulator {p_emu}");
            assert!(e_emu <= 0.02, "max |err| vs the emulator {e_emu}");
        }
        eprintln!("{line}; program {:.0} ms (simulator)", run.program_ms);
        assert!(p_f64 >= 0.9999, "PCC vs f64 {p_f64}");
        assert!(e_f64 <= 0.02, "max |err| vs f64 {e_f64}");
    }
}
