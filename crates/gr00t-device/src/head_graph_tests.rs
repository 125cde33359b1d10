//! The action head on the device (`head_graph`): the whole forward as one graph on the
//! simulated p150a vs NVIDIA's f32 run and the host-conducted device path, its counters, and
//! its replay; the pure layout pieces without the simulator.

use std::time::Instant;

use tt_blackhole::ArenaDtype;

use super::head_graph::{HeadRows, forward_inputs};
use super::tests::require_simulator;
use crate::golden_case::{case_dir, golden_inputs, pcc};
use gr00t_megakernel::{MegakernelConfig, MegakernelPolicy};
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::policy::{ModelInputs, Policy};
use gr00t_runtime::weights::WeightStore;

/// The state's row sits alone in the tile row after the actions', and the self-attention
/// keeps exactly the actions and the state.
#[test]
fn the_state_row_follows_the_actions_tile_rows() {
    for (hz, ta) in [(16, 1), (24, 1), (32, 1), (40, 2)] {
        let r = HeadRows::new(hz);
        assert_eq!(r.ta, ta);
        assert_eq!(r.state_row(), 32 * ta);
        assert_eq!(r.token_tiles(), ta + 1);
        assert_eq!(r.token_m().div_ceil(32), ta + 1, "every tile row is read");
        let keys = r.self_keys();
        assert_eq!(keys.len(), 32 * (ta + 1));
        assert_eq!(keys.iter().filter(|k| **k).count(), hz + 1);
        assert!(keys[..hz].iter().all(|k| *k) && keys[32 * ta]);
    }
}

/// A forward's inputs: the state alone, put at the state's row (the rest of the tensor is
/// zero on the device), the noise as fp32 and as bf16, each padded to whole tiles by the
/// worker (only the real values are sent, each in its tensor's format).
#[test]
fn forward_inputs_put_the_state_in_its_row() {
    let r = HeadRows::new(24);
    let state: Vec<f32> = (0..64).map(|i| i as f32 + 1.0).collect();
    let noise: Vec<f32> = (0..24 * 36).map(|i| i as f32 * 0.5).collect();
    let up = forward_inputs(r, &state, &noise, 36);
    let specs = up.specs();
    assert_eq!(specs.len(), 3);
    assert_eq!(
        (specs[0].rows, specs[0].cols, specs[0].real, specs[0].at),
        (64, 64, Some([1, 64]), Some([32, 0]))
    );
    assert_eq!(
        (specs[1].rows, specs[1].cols, specs[1].real),
        (32, 64, Some([24, 36]))
    );
    // The state's row as bf16 (its tensor's format), the noise as fp32, then as bf16.
    let bytes = up.bytes();
    assert_eq!(bytes.len(), 2 * 64 + 4 * noise.len() + 2 * noise.len());
    let bf16 = |b: &[u8]| -> Vec<f32> {
        b.chunks_exact(2)
            .map(|h| tt_blackhole::bf16::bf16_bits_to_f32(u16::from_le_bytes([h[0], h[1]])))
            .collect()
    };
    assert_eq!(
        bf16(&bytes[..128]),
        state,
        "the state's row alone, exact in bf16"
    );
    let fp32: Vec<f32> = bytes[128..128 + 4 * noise.len()]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(fp32, noise);
    let rounded: Vec<f32> = noise
        .iter()
        .map(|v| tt_blackhole::bf16::round_to_bf16(*v))
        .collect();
    assert_eq!(bf16(&bytes[128 + 4 * noise.len()..]), rounded);
}

/// What a replayed forward with the head on the device sends (each value as its tensor stores
/// it): the forward's inputs, the state's row and the noise twice (fp32 and bf16); and the
/// observation's, once per observation (a predict is one): its context rows (or, when the
/// device's backbone left the context there, their indices: `context_on_device`), the key
/// masks' rows of the self, text and image attentions.
pub(super) fn replayed_head_bytes(
    model: &Gr00tModel,
    inputs: &ModelInputs,
    context_on_device: bool,
) -> u64 {
    let g = &model.cfg.gr00t;
    let (sd, ad, hz, cross) = (
        g.max_state_dim,
        g.max_action_dim,
        g.action_horizon,
        g.backbone_embedding_dim,
    );
    let seq = inputs.input_ids.len();
    let images = (inputs.input_ids.iter())
        .filter(|&&id| id == model.cfg.eagle.image_token_index)
        .count();
    let mask = |n: usize| n.max(1).div_ceil(32) * 32;
    // bf16 values go as 2 bytes, f32 as 4: the state's row, the noise's bf16 copy and the
    // context rows are bf16; the noise's fp32 copy, the masks and the rows' indices f32.
    let (rows, indices) = match context_on_device {
        false => (seq * cross, 0),
        true => (0, seq),
    };
    let bf16 = sd + hz * ad + rows;
    let f32 = hz * ad + mask(hz + 1) + mask(seq - images) + mask(images) + indices;
    (2 * bf16 + 4 * f32) as u64
}

fn head_policy(head: bool) -> MegakernelPolicy {
    let model = Gr00tModel::load(&case_dir()).expect("tiny checkpoint");
    let ws = WeightStore::open_dir(&case_dir()).expect("tiny weights");
    let config = MegakernelConfig {
        device: "sim".into(),
        head_embodiment: head.then(|| golden_inputs().embodiment_id),
        ..MegakernelConfig::default()
    };
    MegakernelPolicy::with_config(
        model,
        &ws,
        "golden-tiny-case1",
        &config,
        Some(&crate::TtnnOpener),
    )
    .unwrap_or_else(|e| panic!("open the simulated device: {e}"))
}

/// The tiny forward with the whole action head on the device, one graph per forward: the
/// actions vs NVIDIA's f32 run (PCC ≥ 0.999) and vs the host-conducted device path (the same
/// kernels, the encoders and decoder on the host: PCC ≥ 0.9999); then a second forward
/// replays the kept graph: only the state and the noise go in, the chunk comes back, in the
/// programs the first one measured.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_tiny_forward_with_the_head_on_the_device() {
    require_simulator("sim_tiny_forward_with_the_head_on_the_device");
    let inputs = golden_inputs();
    let model = Gr00tModel::load(&case_dir()).unwrap();
    let reference = model.forward(&inputs, &mut Taps::none()).unwrap();
    let host_led = head_policy(false);
    let (want, _) = host_led.predict(&inputs).unwrap();
    drop(host_led);
    let sim = head_policy(true);
    let t = Instant::now();
    let (got, _) = sim.predict(&inputs).unwrap();
    let first = t.elapsed().as_secs_f64();
    let (p_host, p_f32) = (pcc(&got.data, &want.data), pcc(&got.data, &reference.data));
    let stats = crate::tests::tt(&sim).stats().expect("a finished forward");
    eprintln!(
        "tiny forward, head on the device: {first:.1} s; PCC vs host-led device {p_host:.6}, vs f32 \
         {p_f32:.6}; {stats:?}"
    );
    assert!(p_f32 >= 0.999, "PCC vs f32 {p_f32}");
    assert!(p_host >= 0.9999, "PCC vs the host-led device path {p_host}");
    assert_eq!(stats.steps, 4, "{stats:?}");
    assert!(stats.per_step.is_empty(), "no step of its own: {stats:?}");
    // Second forward, same observation: the kept graph replayed, nothing else.
    let t = Instant::now();
    let (again, _) = sim.predict(&inputs).unwrap();
    let replay = t.elapsed().as_secs_f64();
    assert_eq!(again.data, got.data, "a replay computes what the graph did");
    let st2 = crate::tests::tt(&sim).stats().unwrap();
    let (hz, ad) = (
        sim.model().cfg.gr00t.action_horizon,
        sim.model().cfg.gr00t.max_action_dim,
    );
    eprintln!("replayed forward: {replay:.1} s; {st2:?}");
    assert_eq!(
        st2.host_to_device_bytes_per_forward,
        replayed_head_bytes(sim.model(), &inputs, false),
        "{st2:?}"
    );
    assert_eq!(
        st2.device_to_host_bytes_per_forward,
        (4 * hz * ad) as u64,
        "{st2:?}"
    );
    // The observation's cross K/V (one program) and the whole forward (one program).
    assert_eq!(st2.programs_per_forward, 2, "{st2:?}");
}

/// A deterministic uniform value in `[-scale, scale)`.
pub(super) fn draw(seed: &mut u64, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| super::tests::rand(seed) * scale).collect()
}

/// PCC, max |err|, and the largest |want| (what the error is measured against).
pub(super) fn compare(name: &str, got: &[f32], want: &[f32]) -> (f64, f32, f32) {
    assert_eq!(got.len(), want.len(), "{name}");
    assert!(got.iter().all(|v| v.is_finite()), "{name}: not finite");
    let err = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let top = want.iter().map(|v| v.abs()).fold(0f32, f32::max);
    (pcc(got, want), err, top)
}

/// The head's stages at full N1.6 width (D 1536, hidden 1024, state and action 128, horizon
/// 50: the actions take two tile rows, the state the third) on the simulator, each vs the CPU
/// emulation of the same packed weights (`gr00t_megakernel::head_emulator`): the timestep's rows
/// (the action encoder's time half, the output layer's modulation), the state encoder, the
/// action encoder with the position embedding, the decoder with the Euler update. One graph.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_full_width_head_stages_match_emulation() {
    use gr00t_megakernel::head_arena::HeadArena;
    use gr00t_megakernel::head_emulator::{
        HeadAct, emulate_actions, emulate_decode_euler, emulate_proj_rows, emulate_state,
        emulate_time_bias,
    };
    use gr00t_runtime::config::Gr00tConfig;
    use gr00t_runtime::cpu::norms::silu;
    use gr00t_runtime::model::action_head::{ActionHead, action_time_encoding};
    use gr00t_runtime::weights::{DType, RandomWeights};

    use super::graph::Graph;
    use super::graph_builder::{End, Job, Weight};
    use super::head_graph::{
        HEAD_ARENA, head_bias_name, head_constants, head_timestep, out_rows_name, time_bias_name,
    };
    use super::protocol::ActDtype;
    use gr00t_megakernel::head_arena::HeadWeight;

    require_simulator("sim_full_width_head_stages_match_emulation");
    let mut cfg = Gr00tConfig::full_size();
    cfg.diffusion_model_cfg.num_layers = 0;
    cfg.max_num_embodiments = 2;
    let ws = RandomWeights {
        seed: 39,
        dtype: DType::Bf16,
    };
    let head = ActionHead::load(&ws, &cfg).unwrap();
    let a = HeadArena::build(&ws, &cfg, 1, ArenaDtype::Bfp8B).unwrap();
    let (d, hz, ad, sd, od) = (
        cfg.input_embedding_dim,
        cfg.action_horizon,
        cfg.max_action_dim,
        cfg.max_state_dim,
        cfg.diffusion_model_cfg.output_dim,
    );
    let rows = HeadRows::new(hz);
    let mut seed = 0x5eed_u64;
    let state = draw(&mut seed, sd, 1.0);
    let x = draw(&mut seed, hz * ad, 1.7);
    let y: Vec<f32> = draw(&mut seed, hz * od, 2.0)
        .into_iter()
        .map(tt_blackhole::bf16::round_to_bf16)
        .collect();
    let temb = draw(&mut seed, d, 2.0);
    let mut silu_temb = temb.clone();
    silu(&mut silu_temb);
    silu_temb
        .iter_mut()
        .for_each(|v| *v = tt_blackhole::bf16::round_to_bf16(*v));
    let enc = action_time_encoding(head.timestep(2), d);
    let pos = head.position_embedding(hz);

    // The device: the tiny golden DiT arena (the head's matmuls read the head arena alone).
    let sim = super::tests::sim_policy(ArenaDtype::Bfp8B);
    let dev = crate::tests::tt(&sim);
    let dims = gr00t_megakernel::dit_dims(&sim.model().cfg.gr00t, 1);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    let upload = super::vision_graph::arena_upload(HEAD_ARENA, &a.weights);
    dev.call(&upload, &a.weights.bytes).unwrap();
    let consts = head_constants(&a, rows, d, &pos);
    dev.call(&consts.put(), &consts.bytes()).unwrap();

    let mut up = super::head_graph::forward_inputs(rows, &state, &x, ad);
    up.add_padded(
        "c/temb/0",
        &silu_temb,
        1,
        d,
        32,
        d.div_ceil(32) * 32,
        ActDtype::Bf16,
    );
    up.add_padded(
        "t/p2",
        &y,
        hz,
        od,
        32 * rows.ta,
        od.div_ceil(32) * 32,
        ActDtype::Bf16,
    );
    let mut g = Graph::new(dev, &plan);
    g.head = Some(&a);
    head_timestep(&mut g, &mut up, &enc, 0).unwrap();
    let job = |w: HeadWeight, act: &str, m: usize, out: &str| Job {
        weight: Weight::Head(w),
        act: act.into(),
        m,
        out: out.into(),
        bias: head_bias_name(w),
        out_rows: None,
        out_row0: 0,
    };
    let tm = rows.token_m();
    g.jobs(
        &[job(HeadWeight::StateL1, "t/state", tm, "t/sh")],
        End::Relu,
        false,
    )
    .unwrap();
    g.jobs(
        &[job(HeadWeight::StateL2, "t/sh", tm, "t/sa")],
        End::Plain,
        true,
    )
    .unwrap();
    g.jobs(
        &[job(HeadWeight::ActW1, "t/fxb0", hz, "t/a1")],
        End::Plain,
        false,
    )
    .unwrap();
    let mut w2 = job(HeadWeight::ActW2Act, "t/a1", hz, "t/a2");
    w2.bias = time_bias_name(0);
    g.jobs(&[w2], End::Silu, false).unwrap();
    let mut w3 = job(HeadWeight::ActW3, "t/a2", hz, "t/sa");
    w3.out_rows = Some(rows.token_tiles());
    g.jobs(&[w3], End::Stream("h/pos"), true).unwrap();
    g.jobs(
        &[job(HeadWeight::DecL1, "t/p2", hz, "t/d1")],
        End::Relu,
        false,
    )
    .unwrap();
    g.jobs(
        &[job(HeadWeight::DecL2, "t/d1", hz, "t/fx1")],
        End::Stream("t/fx0"),
        true,
    )
    .unwrap();
    // The exact-GELU end (the projector's, which has no arena yet) on the decoder's first
    // weight: the SFPU library's erf routine at a matmul's end.
    g.jobs(
        &[job(HeadWeight::DecL1, "t/p2", hz, "t/d1g")],
        End::GeluErf,
        false,
    )
    .unwrap();
    // The gated end (SwiGLU's, which Qwen3 will use) on the same weight: the gate's SiLU end
    // writes fp32, the second product's end multiplies by it.
    g.jobs(
        &[job(HeadWeight::DecL1, "t/p2", hz, "t/gate")],
        End::Silu,
        true,
    )
    .unwrap();
    g.jobs(
        &[job(HeadWeight::DecL1, "t/p2", hz, "t/gated")],
        End::Gated("t/gate"),
        false,
    )
    .unwrap();
    let hidden = a.entry(HeadWeight::DecL1).kn_shape[1];
    let (ab, pr) = (time_bias_name(0), out_rows_name(0));
    let outputs = [
        (ab.as_str(), 1, d),
        (pr.as_str(), 1, 2 * d),
        ("t/sa", 32 * rows.token_tiles(), d),
        ("t/fx1", hz, ad),
        ("t/d1g", hz, hidden),
        ("t/gated", hz, hidden),
    ];
    let (request, programs) = g.request(&up, &outputs, None, true).unwrap();
    let t = Instant::now();
    let (reply, back) = dev.call(&request, &up.bytes()).unwrap();
    let wall = t.elapsed().as_secs_f64();
    let vals: Vec<f32> = back
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let (time_got, rest) = vals.split_at(d);
    let (proj_got, rest) = rest.split_at(2 * d);
    let (sa_got, rest) = rest.split_at(32 * rows.token_tiles() * d);
    let (x1_got, rest) = rest.split_at(hz * ad);
    let (gelu_got, gated_got) = rest.split_at(hz * hidden);
    let time_want = emulate_time_bias(&a, &enc);
    let state_row = &sa_got[rows.state_row() * d..(rows.state_row() + 1) * d];
    let checks = [
        ("time_bias", compare("time_bias", time_got, &time_want)),
        (
            "proj_rows",
            compare("proj_rows", proj_got, &emulate_proj_rows(&a, &silu_temb)),
        ),
        (
            "state",
            compare("state", state_row, &emulate_state(&a, &state)),
        ),
        (
            "actions",
            compare(
                "actions",
                &sa_got[..hz * d],
                &emulate_actions(&a, &x, &time_want, &pos),
            ),
        ),
        (
            "decode_euler",
            compare("decode_euler", x1_got, &emulate_decode_euler(&a, &y, &x)),
        ),
        (
            "gelu_erf_end",
            compare(
                "gelu_erf_end",
                gelu_got,
                &a.linear(HeadWeight::DecL1, &y, hz, None, HeadAct::GeluErf, false),
            ),
        ),
        ("gated_end", {
            let gate = a.linear(HeadWeight::DecL1, &y, hz, None, HeadAct::Silu, true);
            let up = a.linear(HeadWeight::DecL1, &y, hz, None, HeadAct::None, true);
            let want: Vec<f32> = up
                .iter()
                .zip(&gate)
                .map(|(u, g)| tt_blackhole::bf16::round_to_bf16(u * g))
                .collect();
            compare("gated_end", gated_got, &want)
        }),
    ];
    eprintln!(
        "full-width head stages on the simulator: {wall:.1} s, {programs} programs ({} ran); vs the emulation:",
        reply.answer.programs
    );
    for (name, (p, err, top)) in &checks {
        eprintln!("  {name:>12}: PCC {p:.8}, max |err| {err:.3e} (max |value| {top:.3})");
    }
    for (name, (p, err, top)) in &checks {
        assert!(*p >= 0.9999, "{name}: PCC {p}");
        // The same packed weights and roundings: within 4 bf16 ulps of the largest value.
        assert!(
            *err <= top.max(1.0) / 64.0,
            "{name}: max |err| {err} of {top}"
        );
    }
}
