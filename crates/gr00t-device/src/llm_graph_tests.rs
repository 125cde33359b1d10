//! Qwen3's decoder layers on the device (`llm_graph`): the graph built without a device, one
//! full-width layer (Qwen3-1.7B's widths) on the simulated p150a vs the CPU reference's
//! `Qwen3Layer`, and the tiny checkpoint's body from the golden's embedded prompt vs NVIDIA's
//! taps.

use tt_blackhole::ArenaDtype;
use tt_blackhole::backbone::BACKBONE_DTYPE;

use super::graph::{Graph, Upload};
use super::head_graph_tests::{compare, draw};
use super::llm_graph::{LlmShape, llm_constants, qwen3_body, qwen3_layer};
use super::protocol::ActDtype;
use super::tests::{require_simulator, sim_policy, sim_policy_with};
use super::vision_graph_tests::{put_arena, run_graph};
use gr00t_megakernel::backbone_arena::BackboneArena;
use gr00t_runtime::config::EagleConfig;
use gr00t_runtime::model::llm::rope_tables;
use gr00t_runtime::model::qwen3_layer::{Qwen3Dims, Qwen3Layer, Qwen3Scratch};
use gr00t_runtime::weights::{DType, RandomWeights};

/// The checkpoint's prefix of the Qwen3 body.
const LLM: &str = "backbone.model.language_model.model";

/// The simulated device of `sim` with `arena`, its constants and the prompt's put on it, and
/// the plan of the tiny DiT it was opened with.
fn put_llm<'a>(
    sim: &'a gr00t_megakernel::MegakernelPolicy,
    arena: &BackboneArena,
    shape: LlmShape,
) -> (
    &'a super::backend::TtDevice,
    tt_blackhole::plan::MegakernelPlan,
) {
    put_arena(sim, arena, &[llm_constants(shape).unwrap()])
}

/// The tiny checkpoint's body as a graph, built without a device: its two layers and the
/// final norm in the programs a layer's steps pack into, every weight a backbone one.
#[test]
fn the_tiny_qwen3_body_builds_without_a_device() {
    use crate::golden_case::case_dir;
    use gr00t_runtime::config::ModelConfig;
    use gr00t_runtime::weights::WeightStore;
    use tt_blackhole::plan::{GRID_X, GRID_Y};

    let model = ModelConfig::from_dir(&case_dir()).unwrap();
    let cfg = &model.eagle;
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    let n = model.gr00t.select_layer;
    let arena = BackboneArena::new(BACKBONE_DTYPE)
        .with_llm_layers(&ws, cfg, n, 0..n)
        .unwrap()
        .with_llm_final_norm(&ws, cfg)
        .unwrap();
    let shape = LlmShape::new(&cfg.text_config, 115);
    let dims = gr00t_megakernel::dit_dims(&model.gr00t, 1);
    let index = tt_blackhole::arena::arena_layout(&dims, ArenaDtype::Bfp8B);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    let mut g = Graph::for_arena(&index, [GRID_X, GRID_Y], &plan);
    g.backbone = Some(&arena);
    qwen3_body(&mut g, &arena, shape, n, "t/l/x", "t/l/out").unwrap();
    let steps = g.steps();
    let up = Upload::new();
    let rows = 32 * shape.row_tiles();
    let (request, programs) = g
        .request(&up, &[("t/l/out", 115, shape.hidden)], None, true)
        .unwrap();
    assert!(programs >= 1 && programs <= steps, "{programs} of {steps}");
    let text = serde_json::to_string(&request).unwrap();
    for name in ["b/rope/cos", "b/mask/llm", "t/l/qr", "t/l/kr", "t/l/out"] {
        assert!(text.contains(name), "the graph names {name}");
    }
    // Per layer: the norm with Q/K, V, both head norms and RoPEs, attention with O, the post
    // norm with the gate, up, down; then the final norm.
    eprintln!("tiny Qwen3 body: {steps} steps, {programs} programs, {rows} rows");
    assert_eq!(steps, n * 10 + 1);

    // A model whose heads have no tile layout is refused by name.
    let mut odd = cfg.text_config.clone();
    odd.head_dim = 72;
    let Err(err) = llm_constants(LlmShape::new(&odd, 115)) else {
        panic!("heads of 72 columns were laid out");
    };
    assert!(err.to_string().contains("72"), "{err}");
}

/// One Qwen3 layer at Qwen3-1.7B's widths (2048, 16 query heads over 8 K/V heads of 128,
/// SwiGLU 6144) over a 40-token prompt (two tile rows, the last one partial) on the simulator,
/// random bf16 weights packed bf16: the layer's output and its update (output minus input) vs
/// the CPU reference in f32. The GR1 prompt's 116 tokens run by hand
/// (`sim_long_full_prompt_qwen3_layer_matches_the_cpu_reference`).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_full_width_qwen3_layer_matches_the_cpu_reference() {
    require_simulator("sim_full_width_qwen3_layer_matches_the_cpu_reference");
    full_width_qwen3_layer(40);
}

/// [`sim_full_width_qwen3_layer_matches_the_cpu_reference`] over a 116-token prompt: minutes
/// on the simulator, so `scripts/device-sim-tests.sh --long` runs it, not CI.
#[test]
#[ignore = "a full prompt on the simulated p150a, minutes: scripts/device-sim-tests.sh --long"]
fn sim_long_full_prompt_qwen3_layer_matches_the_cpu_reference() {
    require_simulator("sim_long_full_prompt_qwen3_layer_matches_the_cpu_reference");
    full_width_qwen3_layer(116);
}

/// One full-width Qwen3 layer over `tokens` on the simulator vs the CPU reference.
fn full_width_qwen3_layer(tokens: usize) {
    let cfg = EagleConfig::default();
    let t = &cfg.text_config;
    let ws = RandomWeights {
        seed: 41,
        dtype: DType::Bf16,
    };
    let dims = Qwen3Dims::of(t);
    let layer = Qwen3Layer::load(&ws, &format!("{LLM}.layers.0"), &dims).unwrap();
    let arena = BackboneArena::new(BACKBONE_DTYPE)
        .with_llm_layers(&ws, &cfg, 1, 0..1)
        .unwrap();
    let shape = LlmShape::new(t, tokens);
    let (d, rows) = (t.hidden_size, 32 * shape.row_tiles());
    let mut seed = 0x41_u64;
    let x = draw(&mut seed, tokens * d, 1.0);
    let mut want = x.clone();
    let (cos, sin) = rope_tables(tokens, t.head_dim, t.rope_theta);
    let mut scratch = Qwen3Scratch::new(tokens, &dims);
    layer.forward(&mut want, tokens, &dims, &cos, &sin, &mut scratch);

    // A full-width layer's programs take minutes on the simulator: a deadline to match.
    let sim = sim_policy_with(&gr00t_megakernel::MegakernelConfig {
        device: "sim".into(),
        device_timeout: std::time::Duration::from_secs(1200),
        ..gr00t_megakernel::MegakernelConfig::default()
    });
    let (dev, plan) = put_llm(&sim, &arena, shape);
    let mut up = Upload::new();
    up.add_padded("t/l/x0", &x, tokens, d, rows, d, ActDtype::F32);
    let mut g = Graph::new(dev, &plan);
    g.backbone = Some(&arena);
    qwen3_layer(&mut g, &arena, 0, shape, "t/l/x0", "t/l/y").unwrap();
    let (got, wall, programs, ran) = run_graph(dev, g, &up, &[("t/l/y", tokens, d)]);
    let delta = |y: &[f32]| -> Vec<f32> { y.iter().zip(&x).map(|(a, b)| a - b).collect() };
    let out = compare("output", &got, &want);
    let upd = compare("update", &delta(&got), &delta(&want));
    eprintln!(
        "full-width Qwen3 layer, {tokens} tokens, on the simulator: {wall:.1} s, {programs} programs ({ran} ran); \
         vs the CPU reference: output PCC {:.8}, max |err| {:.3e} (max |value| {:.3}); \
         update PCC {:.8}, max |err| {:.3e} (max |value| {:.3})",
        out.0, out.1, out.2, upd.0, upd.1, upd.2
    );
    assert!(out.0 >= 0.9999, "output PCC {}", out.0);
    assert!(upd.0 >= 0.9999, "update PCC {}", upd.0);
    // bf16 activations between the matmuls: within 4 bf16 ulps of the largest value.
    assert!(
        out.1 <= out.2 / 64.0,
        "output max |err| {} of {}",
        out.1,
        out.2
    );
}

/// The tiny checkpoint's backbone text side on the simulator from the golden's token ids and
/// the projector's rows: the prompt's rows gathered on the device, both layers, the final norm
/// and the action head's vlln, one graph, each stage vs NVIDIA's f32 tap.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_tiny_qwen3_body_matches_the_golden_taps() {
    use super::gather::{TokenSource, ids_tile};
    use crate::golden_case::{case_dir, golden_inputs, golden_tap};
    use gr00t_runtime::config::ModelConfig;
    use gr00t_runtime::weights::WeightStore;

    require_simulator("sim_tiny_qwen3_body_matches_the_golden_taps");
    let model = ModelConfig::from_dir(&case_dir()).unwrap();
    let cfg = &model.eagle;
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    let n = model.gr00t.select_layer;
    assert_eq!(n, 2, "the streams below are the tiny body's two layers");
    let d = cfg.text_config.hidden_size;
    let arena = BackboneArena::new(BACKBONE_DTYPE)
        .with_llm_embedding(&ws, cfg)
        .unwrap()
        .with_llm_layers(&ws, cfg, n, 0..n)
        .unwrap()
        .with_llm_final_norm(&ws, cfg)
        .unwrap()
        .with_vlln(&ws, d)
        .unwrap();
    let ids = golden_inputs().input_ids;
    let (_, image_rows) = golden_tap("projector.output");
    let images = image_rows.len() / d;
    let mut next = 0;
    let tokens: Vec<TokenSource> = ids
        .iter()
        .map(|&id| {
            if id == cfg.image_token_index {
                next += 1;
                TokenSource::Image(next - 1)
            } else {
                TokenSource::Text(id)
            }
        })
        .collect();
    assert_eq!(next, images, "one projector row per image token");
    let t = tokens.len();
    let shape = LlmShape::new(&cfg.text_config, t);
    let (dp, tt) = (d.div_ceil(32) * 32, t.div_ceil(32) * 32);

    let sim = sim_policy(ArenaDtype::Bfp8B);
    let (dev, plan) = put_llm(&sim, &arena, shape);
    let table = arena.embed.as_ref().unwrap();
    let mut up = Upload::new();
    super::backend::embed_table(&mut up, table);
    let ids = ids_tile(&tokens);
    up.add_padded("t/l/ids", &ids[..t], 1, t, 32, tt, ActDtype::F32);
    let img_rows = images.div_ceil(32) * 32;
    up.add_padded(
        "t/l/img",
        &image_rows,
        images,
        d,
        img_rows,
        dp,
        ActDtype::F32,
    );
    let mut g = Graph::new(dev, &plan);
    g.backbone = Some(&arena);
    g.gather_rows("t/l/ids", t, ["b/embed", "t/l/img"], d, "t/l/x0")
        .unwrap();
    qwen3_body(&mut g, &arena, shape, n, "t/l/x0", "t/l/out").unwrap();
    let outputs = [
        ("t/l/x0", t, d),
        ("t/l/s1", t, d),
        ("t/l/s0", t, d),
        ("t/l/feats", t, d),
        ("t/l/out", t, d),
    ];
    let (vals, wall, programs, ran) = run_graph(dev, g, &up, &outputs);
    let taps = [
        "llm.inputs_embeds",
        "llm.layer0.output",
        "llm.layer1.output",
        "llm.hidden_states.2",
        "action_head.vl_embeds",
    ];
    eprintln!(
        "tiny Qwen3 body + vlln on the simulator: {wall:.1} s, {programs} programs ({ran} ran); \
         vs the golden:"
    );
    let mut checks = Vec::new();
    for (tap, got) in taps.iter().zip(vals.chunks_exact(t * d)) {
        let (_, want) = golden_tap(tap);
        let (p, err, top) = compare(tap, got, &want);
        eprintln!("  {tap:>22}: PCC {p:.6}, max |err| {err:.3e} (max |value| {top:.3})");
        checks.push((*tap, p));
    }
    for (tap, p) in &checks {
        assert!(*p >= 0.999, "{tap}: PCC {p}");
    }
}
