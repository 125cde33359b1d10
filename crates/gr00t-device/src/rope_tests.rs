//! RoPE as a graph step (issue 40), `rope.rs`: offline, the tables, the rotation tile and the
//! kernel's tile plan (partner tile and sign) against the CPU reference's `apply_rotate_half`;
//! on the simulated p150a, the kernels at Qwen3-1.7B's widths and at the tiny checkpoint's
//! (heads of 16 padded to a tile), vs the CPU reference with the runtime's tables.

use std::time::Instant;

use tt_blackhole::ArenaDtype;

use super::graph::{Graph, Upload};
use super::graph_steps::rows_l1_bytes;
use super::head_graph_tests::{compare, draw};
use super::protocol::ActDtype;
use super::registry::cb_id;
use super::rope::{padded_head, rope_rotation, rope_tables, rope_unpack_to_dest, rope_work_cbs};
use super::tests::{require_simulator, sim_policy};
use gr00t_runtime::cpu::rope::apply_rotate_half;

/// `x` `[rows, heads·hd]` laid out as the device holds it: `[32·row_tiles, heads·hp]`, each
/// head's columns at the start of its `hp`, the rest (and the rows past `rows`) zero.
fn pad_heads(x: &[f32], rows: usize, [heads, hd, row_tiles]: [usize; 3]) -> Vec<f32> {
    let hp = padded_head(hd).unwrap();
    let mut out = vec![0f32; 32 * row_tiles * heads * hp];
    for r in 0..rows {
        for h in 0..heads {
            let src = &x[(r * heads + h) * hd..][..hd];
            out[(r * heads + h) * hp..][..hd].copy_from_slice(src);
        }
    }
    out
}

/// What the kernels compute, tile for tile and in f64, from the padded `x` and the device's
/// tables and rotation tile: per head, output tile t is `x_t·cos_t ∓ x_p·sin_t` with p the
/// tile `n/2` away (− in the first half) for whole-tile halves, `x_t·cos_t + (x_t @ R)·sin_t`
/// for one-tile heads. Answers `[32·row_tiles, heads·hp]`.
fn emulate(
    xp: &[f32],
    [heads, hd, row_tiles]: [usize; 3],
    (cos, sin): (&[f32], &[f32]),
    rot: &[f32],
) -> Vec<f64> {
    let hp = padded_head(hd).unwrap();
    let n = hp / 32;
    let w = heads * hp;
    let mut out = vec![0f64; 32 * row_tiles * w];
    for r in 0..32 * row_tiles {
        for h in 0..heads {
            let head = &xp[r * w + h * hp..][..hp];
            for t in 0..n {
                for i in 0..32 {
                    let c = 32 * t + i;
                    let b = if hd <= 32 {
                        (0..32)
                            .map(|k| head[k] as f64 * rot[k * 32 + c] as f64)
                            .sum::<f64>()
                    } else if t < n / 2 {
                        -(head[c + hp / 2] as f64)
                    } else {
                        head[c - hp / 2] as f64
                    };
                    let (cs, sn) = (cos[r * hp + c] as f64, sin[r * hp + c] as f64);
                    out[r * w + h * hp + c] = head[c] as f64 * cs + b * sn;
                }
            }
        }
    }
    out
}

/// The CPU reference: `apply_rotate_half` over `[rows, heads·hd]` with the runtime's tables.
fn reference(x: &[f32], rows: usize, heads: usize, hd: usize, theta: f64) -> Vec<f32> {
    let (cos, sin) = gr00t_runtime::model::llm::rope_tables(rows, hd, theta);
    let mut want = x.to_vec();
    apply_rotate_half(&mut want, rows, heads * hd, 0, heads, hd, &cos, &sin);
    want
}

#[test]
fn rope_refuses_head_widths_it_cannot_rotate() {
    for (hd, hp) in [
        (2, 32),
        (16, 32),
        (32, 32),
        (64, 64),
        (128, 128),
        (256, 256),
    ] {
        assert_eq!(padded_head(hd).unwrap(), hp, "hd {hd}");
    }
    for hd in [0, 15, 33, 48, 96, 160] {
        assert!(padded_head(hd).is_err(), "hd {hd}");
        assert!(rope_rotation(hd).is_err(), "hd {hd}");
        assert!(rope_tables(4, 1, hd, 1e6).is_err(), "hd {hd}");
    }
    assert!(
        rope_tables(33, 1, 16, 1e6).is_err(),
        "33 rows in one tile row"
    );
}

/// The tables are the runtime's, placed: each row's `hd` values at the start of its `hp`,
/// zeros after and in the rows past the positions.
#[test]
fn rope_tables_are_the_runtimes_padded() {
    for (rows, rt, hd) in [(20, 1, 16), (116, 4, 128), (40, 2, 64)] {
        let (want_c, want_s) = gr00t_runtime::model::llm::rope_tables(rows, hd, 1e6);
        let (cos, sin) = rope_tables(rows, rt, hd, 1e6).unwrap();
        let hp = padded_head(hd).unwrap();
        assert_eq!(cos.len(), 32 * rt * hp);
        for (got, want) in [(&cos, &want_c), (&sin, &want_s)] {
            for r in 0..32 * rt {
                for c in 0..hp {
                    let v = got[r * hp + c];
                    if r < rows && c < hd {
                        assert_eq!(v, want[r * hd + c], "hd {hd} row {r} col {c}");
                    } else {
                        assert_eq!(v, 0.0, "hd {hd} row {r} col {c}: padding");
                    }
                }
            }
        }
    }
}

/// `x @ R` is rotate_half on the head's columns and zero on the padding, exactly (f64).
#[test]
fn rope_rotation_tile_is_rotate_half() {
    let mut seed = 0x40_u64;
    for hd in [2, 8, 16, 32] {
        let rot = rope_rotation(hd).unwrap();
        assert_eq!(rot.len(), 32 * 32);
        assert!(rot.iter().all(|v| [0.0, 1.0, -1.0].contains(v)));
        let half = hd / 2;
        for _ in 0..4 {
            let row: Vec<f64> = draw(&mut seed, 32, 2.0).iter().map(|&v| v as f64).collect();
            for c in 0..32 {
                let got: f64 = (0..32).map(|k| row[k] * rot[k * 32 + c] as f64).sum();
                let want = match c {
                    _ if c < half => -row[c + half],
                    _ if c < hd => row[c - half],
                    _ => 0.0,
                };
                assert_eq!(got, want, "hd {hd} column {c}");
            }
        }
    }
    // Whole-tile halves read no rotation: the tile is zero.
    assert!(rope_rotation(128).unwrap().iter().all(|&v| v == 0.0));
}

/// The kernels' plan (partner tile and sign, or `x @ R`; the padded tables), emulated in f64,
/// is the CPU reference's RoPE, and zero on the padding (columns and rows).
#[test]
fn rope_tile_plan_matches_apply_rotate_half() {
    let mut seed = 0x41_u64;
    for (rows, heads, hd) in [(40_usize, 3, 128), (20, 4, 16), (33, 2, 64), (7, 2, 32)] {
        let rt = rows.div_ceil(32);
        let x = draw(&mut seed, rows * heads * hd, 3.0);
        let want = reference(&x, rows, heads, hd, 1e6);
        // The rows past the positions 1.0, not 0: the zero tables alone must zero them.
        let mut xp = pad_heads(&x, rows, [heads, hd, rt]);
        let hp = padded_head(hd).unwrap();
        for v in xp[rows * heads * hp..].iter_mut() {
            *v = 1.0;
        }
        let (cos, sin) = rope_tables(rows, rt, hd, 1e6).unwrap();
        let rot = rope_rotation(hd).unwrap();
        let got = emulate(&xp, [heads, hd, rt], (&cos, &sin), &rot);
        let want_p = pad_heads(&want, rows, [heads, hd, rt]);
        for (i, (g, w)) in got.iter().zip(&want_p).enumerate() {
            // f32 reference vs f64: within a few f32 roundings of |x| ≤ 3.
            assert!((g - *w as f64).abs() < 3e-6, "hd {hd} at {i}: {g} vs {w}");
        }
    }
}

/// The reader, the compute kernel and the writer agree on the CBs they pass, the step sizes
/// every CB the kernel uses (the worker gives x, the scaler slot and the output by the row
/// kernels' ids: ours must be the same ids or sized here), and a head of 128 fits L1 with room.
#[test]
fn rope_kernels_agree_on_their_cbs() {
    for name in ["cb_x", "cb_cos", "cb_sin", "cb_rot", "cb_xm"] {
        assert_eq!(
            cb_id("reader_rope.cpp", name),
            cb_id("rope_rows.cpp", name),
            "{name}"
        );
    }
    assert_eq!(
        cb_id("rope_rows.cpp", "cb_y"),
        cb_id("writer_tiles.cpp", "cb_out")
    );
    // The worker's own CBs of a row step: x and the scaler slot, which ours resize.
    assert_eq!(
        cb_id("rope_rows.cpp", "cb_x"),
        cb_id("reader_rows.cpp", "cb_x")
    );
    assert_eq!(
        cb_id("rope_rows.cpp", "cb_cos"),
        cb_id("reader_rows.cpp", "cb_scaler")
    );
    for (n, in_tile) in [(1, true), (4, false), (2, false)] {
        let work = rope_work_cbs(n, in_tile);
        let mut names = vec!["cb_x", "cb_cos", "cb_sin"];
        if in_tile {
            names.extend(["cb_rot", "cb_xm", "cb_w"]);
        }
        let ids: Vec<u8> = work.iter().map(|(id, _)| *id).collect();
        let want: Vec<u8> = names.iter().map(|c| cb_id("rope_rows.cpp", c)).collect();
        assert_eq!(ids, want, "n {n}");
        // A matmul operand must not be unpacked to DST; every SFPU input must be.
        let dest = rope_unpack_to_dest(in_tile);
        assert!(!dest.contains(&cb_id("rope_rows.cpp", "cb_xm")));
        assert!(!dest.contains(&cb_id("rope_rows.cpp", "cb_rot")));
        assert_eq!(dest.len(), if in_tile { 4 } else { 3 });
        assert!(rows_l1_bytes(n, &work, false) < 256 * 1024, "n {n}");
    }
}

/// One RoPE case on the simulator: heads of `hd` over `rows` rows.
struct SimCase {
    name: &'static str,
    rows: usize,
    heads: usize,
    hd: usize,
    theta: f64,
}

/// Runs `case` on the simulator as one graph step and checks it against the CPU reference
/// (bf16 output: PCC ≥ 0.99999, max |err| within one bf16 ulp of the largest value; padding
/// columns and rows exactly zero).
fn sim_rope_case(case: &SimCase, seed: u64) {
    let SimCase {
        name,
        rows,
        heads,
        hd,
        theta,
    } = *case;
    let rt = rows.div_ceil(32);
    let hp = padded_head(hd).unwrap();
    let mut seed = seed;
    let x = draw(&mut seed, rows * heads * hd, 3.0);
    let want = reference(&x, rows, heads, hd, theta);
    // The padding columns zero (the norm's output has them so); the rows past the prompt
    // values (the norm's output of padding rows is not zero): the tables zero them.
    let mut xp = pad_heads(&x, rows, [heads, hd, rt]);
    let pad_rows = draw(&mut seed, (32 * rt - rows) * heads * hp, 3.0);
    xp[rows * heads * hp..].copy_from_slice(&pad_rows);
    let (cos, sin) = rope_tables(rows, rt, hd, theta).unwrap();
    let rot = rope_rotation(hd).unwrap();

    let sim = sim_policy(ArenaDtype::Bfp8B);
    let dev = crate::tests::tt(&sim);
    let dims = gr00t_megakernel::dit_dims(&sim.model().cfg.gr00t, 1);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    let mut up = Upload::new();
    up.add("t/r/x", 32 * rt, heads * hp, ActDtype::F32, &xp);
    up.add("t/r/cos", 32 * rt, hp, ActDtype::F32, &cos);
    up.add("t/r/sin", 32 * rt, hp, ActDtype::F32, &sin);
    up.add("t/r/rot", 32, rot.len() / 32, ActDtype::F32, &rot);
    let mut g = Graph::new(dev, &plan);
    g.rope(
        "t/r/x",
        [heads, hd, rt],
        ["t/r/cos", "t/r/sin", "t/r/rot"],
        "t/r/out",
    )
    .unwrap();
    // The output is the head-by-head view `[32·rt·heads, hp]`, page for page the layout.
    let outputs = [("t/r/out", 32 * rt * heads, hp)];
    let (request, programs) = g.request(&up, &outputs, None, true).unwrap();
    let t0 = Instant::now();
    let (reply, back) = dev.call(&request, &up.bytes()).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let view: Vec<f32> = back
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(view.len(), 32 * rt * heads * hp);
    // Back from the view: view row (trow·heads + h)·32 + i holds row trow·32 + i, head h.
    let mut got = vec![0f32; rows * heads * hd];
    let mut padding_nonzero = 0;
    for r in 0..32 * rt {
        let (trow, i) = (r / 32, r % 32);
        for h in 0..heads {
            let v = &view[((trow * heads + h) * 32 + i) * hp..][..hp];
            let real = if r < rows { hd } else { 0 };
            padding_nonzero += v[real..].iter().filter(|&&e| e != 0.0).count();
            if r < rows {
                got[(r * heads + h) * hd..][..hd].copy_from_slice(&v[..hd]);
            }
        }
    }
    let (p, err, top) = compare(name, &got, &want);
    eprintln!(
        "RoPE {name} ({heads} heads of {hd} → {hp}, {rows} rows) on the simulator: \
         {programs} programs ({} ran), {secs:.1} s; vs the CPU reference: PCC {p:.8}, \
         max |err| {err:.3e} (max |value| {top:.3}, one bf16 ulp of it {:.3e})",
        reply.answer.programs,
        top / 128.0
    );
    assert_eq!(
        padding_nonzero, 0,
        "{name}: padding columns or rows not zero"
    );
    assert!(p >= 0.99999, "{name}: PCC {p}");
    // bf16 outputs, each within half an ulp of its value plus the fp32 (and, for one-tile
    // heads, the FPU's 19-bit x) terms: within one ulp of the largest value.
    assert!(err <= top / 128.0, "{name}: max |err| {err} of {top}");
}

/// Qwen3-1.7B's q after its norm: 16 heads of 128 (four tiles, whole-tile halves: the SFPU
/// form) over a 116-token prompt (four tile rows, the last partly padding).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_rope_qwen3_widths_match_the_cpu_reference() {
    require_simulator("sim_rope_qwen3_widths_match_the_cpu_reference");
    let case = SimCase {
        name: "qwen3-1.7b",
        rows: 116,
        heads: 16,
        hd: 128,
        theta: 1e6,
    };
    sim_rope_case(&case, 0x40e);
}

/// The tiny checkpoint's widths: 4 heads of 16, each padded to one tile (the matmul form).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_rope_tiny_heads_match_the_cpu_reference() {
    require_simulator("sim_rope_tiny_heads_match_the_cpu_reference");
    let case = SimCase {
        name: "tiny",
        rows: 20,
        heads: 4,
        hd: 16,
        theta: 1e6,
    };
    sim_rope_case(&case, 0x40f);
}
