//! Qwen3's norms as graph steps on the simulated p150a (issue 40): the RMSNorm over the
//! residual stream's 2048 columns and the per-head q/k RMSNorm over 128-wide heads (the same
//! streaming kernel over the tensor's head-by-head view), vs the CPU reference's `rms_norm`.

use tt_blackhole::ArenaDtype;

use super::graph::{Graph, Upload};
use super::head_graph_tests::{compare, draw};
use super::one_program::{row_tile, scaler_tile};
use super::protocol::ActDtype;
use super::tests::{require_simulator, sim_policy};
use gr00t_runtime::cpu::norms::rms_norm;

/// Qwen3-1.7B's widths over a 116-token prompt: the layer's input RMSNorm (2048 columns) and
/// q_norm over 16 heads of 128, one graph; each vs the CPU reference (outputs bf16).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_qwen3_norms_match_the_cpu_reference() {
    require_simulator("sim_qwen3_norms_match_the_cpu_reference");
    let (t, d, heads, hd, eps) = (116_usize, 2048, 16, 128, 1e-6_f32);
    let rt = t.div_ceil(32);
    let mut seed = 0x0e_u64;
    let x = draw(&mut seed, t * d, 3.0);
    let g_in: Vec<f32> = draw(&mut seed, d, 0.5).iter().map(|v| 1.0 + v).collect();
    let g_head: Vec<f32> = draw(&mut seed, hd, 0.5).iter().map(|v| 1.0 + v).collect();
    let mut want_in = x.clone();
    rms_norm(&mut want_in, d, &g_in, eps);
    // The per-head norm: each row's heads normalised alone (the reference's view, [t·heads, hd]).
    let mut want_head = x.clone();
    rms_norm(&mut want_head, hd, &g_head, eps);

    let sim = sim_policy(ArenaDtype::Bfp8B);
    let dev = crate::tests::tt(&sim);
    let dims = gr00t_megakernel::dit_dims(&sim.model().cfg.gr00t, 1);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    let mut up = Upload::new();
    up.add("c/scaler", 32, 32, ActDtype::F32, &scaler_tile());
    up.add("t/n/gin", 32, d, ActDtype::F32, &row_tile(&g_in));
    up.add("t/n/ghead", 32, hd, ActDtype::F32, &row_tile(&g_head));
    up.add_padded("t/n/x", &x, t, d, 32 * rt, d, ActDtype::F32);
    let mut g = Graph::new(dev, &plan);
    g.rms_norm("t/n/x", [d, rt], "t/n/gin", ("t/n/in", false), eps);
    g.head_rms_norm("t/n/x", [heads, hd, rt], "t/n/ghead", ("t/n/q", false), eps)
        .unwrap();
    // The head norm's output is the view's `[32·rt·heads, hd]`.
    let outputs = [("t/n/in", t, d), ("t/n/q", 32 * rt * heads, hd)];
    let (request, programs) = g.request(&up, &outputs, None, true).unwrap();
    let (reply, back) = dev.call(&request, &up.bytes()).unwrap();
    let vals: Vec<f32> = back
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let (got_in, view) = vals.split_at(t * d);
    // Back from the view: view row (trow·heads + h)·32 + i holds row trow·32 + i, head h.
    let mut got_head = vec![0f32; t * d];
    for r in 0..t {
        let (trow, i) = (r / 32, r % 32);
        for h in 0..heads {
            let v = ((trow * heads + h) * 32 + i) * hd;
            got_head[r * d + h * hd..r * d + (h + 1) * hd].copy_from_slice(&view[v..v + hd]);
        }
    }
    let checks = [
        ("input RMSNorm", compare("input", got_in, &want_in)),
        ("q_norm", compare("q_norm", &got_head, &want_head)),
    ];
    eprintln!(
        "Qwen3 norms on the simulator: {programs} programs ({} ran); vs the CPU reference:",
        reply.answer.programs
    );
    for (name, (p, err, top)) in &checks {
        eprintln!("  {name:>14}: PCC {p:.8}, max |err| {err:.3e} (max |value| {top:.3})");
    }
    for (name, (p, err, top)) in &checks {
        assert!(*p >= 0.9999, "{name}: PCC {p}");
        // bf16 outputs: within 4 bf16 ulps of the largest value.
        assert!(*err <= top / 64.0, "{name}: max |err| {err} of {top}");
    }
}
