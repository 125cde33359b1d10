//! SigLIP2's encoder layer on the device (`vision_graph`) at full width on the simulated
//! p150a, vs the CPU reference's layer (`gr00t_runtime::model::vision`).

use std::time::Instant;

use tt_blackhole::ArenaDtype;
use tt_blackhole::backbone::BACKBONE_DTYPE;

use super::graph::{Graph, Upload};
use super::head_graph_tests::{compare, draw};
use super::protocol::ActDtype;
use super::tests::{require_simulator, sim_policy, sim_policy_with};
use super::vision_graph::{
    BACKBONE_ARENA, VisionShape, arena_constants, arena_upload, vision_constants, vision_layer,
};
use gr00t_megakernel::backbone_arena::BackboneArena;
use gr00t_megakernel::vision_layout::VisionLayout;
use gr00t_runtime::config::EagleConfig;
use gr00t_runtime::model::vision::VisionTower;
use gr00t_runtime::weights::{DType, RandomWeights};

/// The simulated device of `sim` with `arena` and its constants for `shape` put on it, and the
/// plan of the tiny DiT it was opened with (what a graph's DiT side is cut for).
fn put_backbone<'a>(
    sim: &'a gr00t_megakernel::MegakernelPolicy,
    arena: &BackboneArena,
    shape: VisionShape,
) -> (
    &'a super::backend::TtDevice,
    tt_blackhole::plan::MegakernelPlan,
) {
    put_arena(sim, arena, &[vision_constants(arena, shape).unwrap()])
}

/// The simulated device of `sim` with `arena`, its per-worker constants and `consts` put on
/// it, and the plan of the tiny DiT it was opened with.
pub(super) fn put_arena<'a>(
    sim: &'a gr00t_megakernel::MegakernelPolicy,
    arena: &BackboneArena,
    consts: &[Upload],
) -> (
    &'a super::backend::TtDevice,
    tt_blackhole::plan::MegakernelPlan,
) {
    let dev = crate::tests::tt(sim);
    let dims = gr00t_megakernel::dit_dims(&sim.model().cfg.gr00t, 1);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    dev.call(
        &arena_upload(BACKBONE_ARENA, &arena.weights),
        &arena.weights.bytes,
    )
    .unwrap();
    let per_worker = arena_constants(arena);
    for up in std::iter::once(&per_worker).chain(consts) {
        dev.call(&up.put(), &up.bytes()).unwrap();
    }
    (dev, plan)
}

/// `g` run on `dev` from `up`, its `outputs` read back (f32 values, in order): with the
/// simulator's wall seconds, the programs the graph packs into and those the worker ran.
pub(super) fn run_graph(
    dev: &super::backend::TtDevice,
    g: Graph<'_>,
    up: &Upload,
    outputs: &[(&str, usize, usize)],
) -> (Vec<f32>, f64, usize, u64) {
    let (request, programs) = g.request(up, outputs, None, true).unwrap();
    let started = Instant::now();
    let (reply, back) = dev.call(&request, &up.bytes()).unwrap();
    let wall = started.elapsed().as_secs_f64();
    let values = back
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (values, wall, programs, reply.answer.programs)
}

/// A graph over the tiny golden's DiT arena index and plan, on the p150a's worker grid, with
/// `arena` for its backbone matmuls: built without a device.
pub(super) fn offline_graph<'a>(
    index: &'a tt_blackhole::arena::ArenaIndex,
    plan: &'a tt_blackhole::plan::MegakernelPlan,
    arena: &'a BackboneArena,
) -> Graph<'a> {
    use tt_blackhole::plan::{GRID_X, GRID_Y};
    let mut g = Graph::for_arena(index, [GRID_X, GRID_Y], plan);
    g.backbone = Some(arena);
    g
}

/// The tiny golden's DiT dims' arena index and plan (what a graph's DiT side is cut for).
pub(super) fn tiny_dit() -> (
    tt_blackhole::arena::ArenaIndex,
    tt_blackhole::plan::MegakernelPlan,
) {
    use gr00t_runtime::config::ModelConfig;
    let cfg = ModelConfig::from_dir(&crate::golden_case::case_dir()).unwrap();
    let dims = gr00t_megakernel::dit_dims(&cfg.gr00t, 1);
    (
        tt_blackhole::arena::arena_layout(&dims, ArenaDtype::Bfp8B),
        tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap(),
    )
}

/// A full-width SigLIP2 layer's graph (one layer of the default config), built without a
/// device and lowered: the request and the packed steps its programs come from.
pub(super) fn full_width_vision_layer()
-> (super::protocol::Graph, Vec<super::graph_steps::GraphStep>) {
    use super::vision_graph::vision_layer;

    let mut cfg = EagleConfig::default();
    cfg.vision_config.num_hidden_layers = 1;
    let v = &cfg.vision_config;
    let ws = RandomWeights {
        seed: 40,
        dtype: DType::Bf16,
    };
    let arena = BackboneArena::new(BACKBONE_DTYPE)
        .with_vision_layers(&ws, &cfg, 0..1)
        .unwrap();
    let shape = VisionShape {
        layout: VisionLayout::new(18, 18).unwrap(),
        width: v.hidden_size,
        heads: v.num_attention_heads,
    };
    let (index, plan) = tiny_dit();
    let mut g = offline_graph(&index, &plan, &arena);
    vision_layer(&mut g, &arena, 0, shape, "t/v/x0", "t/v/y").unwrap();
    assert_eq!(g.steps(), 4, "LN + QKV, attention + O, LN + fc1, fc2");
    g.lowered(&Upload::new(), &[], None, true).unwrap()
}

/// A full-width SigLIP2 layer's graph: its four matmul steps (each with the LayerNorm or
/// attention before it) packed into one program, fc2's units cut into K blocks (two per column
/// beside the split's two pieces: 4 pieces) to fit L1 at 12 tile rows.
#[test]
fn a_full_width_vision_layer_is_one_program_with_fc2_in_k_blocks() {
    use super::graph_steps::GraphStep;

    let (request, steps) = full_width_vision_layer();
    assert_eq!(request.programs.len(), 1);
    let [GraphStep::Chain(chain)] = steps.as_slice() else {
        panic!("one chain: {:?}", steps.len());
    };
    let pieces: Vec<usize> = chain
        .steps
        .iter()
        .map(|s| s.matmul.jobs[0].k_split)
        .collect();
    // Q/K/V and O: 36 columns over 96 cores split K in 2; fc1 (135 columns) does not; fc2
    // splits in 2 and cuts each half in 2 blocks.
    assert_eq!(pieces, [2, 2, 1, 4]);
    let fc2 = &chain.steps[3].matmul.jobs[0];
    assert!(fc2.cbs.act <= 12 * 34, "{:?}", fc2.cbs);
}

/// The full-size projector's LayerNorm (4608 features) is too wide for our whole-row kernel
/// (~3.6 MB of a core's L1): the graph takes the streaming norm for it, whose L1 is the same at
/// any width, and the tower's norms (1152) keep the whole-row one.
#[test]
fn the_full_size_projector_norm_streams() {
    use super::graph_steps::{BeforeStep, GraphStep, RowsStep};
    use super::vision_graph::projector;

    let cfg = EagleConfig::default();
    let ws = RandomWeights {
        seed: 41,
        dtype: DType::Bf16,
    };
    let arena = BackboneArena::new(BACKBONE_DTYPE)
        .with_projector(&ws, &cfg)
        .unwrap();
    let shape = VisionShape {
        layout: VisionLayout::new(18, 18).unwrap(),
        width: cfg.vision_config.hidden_size,
        heads: cfg.vision_config.num_attention_heads,
    };
    let (index, plan) = tiny_dit();
    let mut g = offline_graph(&index, &plan, &arena);
    projector(&mut g, &arena, shape, "t/v/out", "t/p/y").unwrap();
    let (_, steps) = g.lowered(&Upload::new(), &[], None, true).unwrap();
    let norms: Vec<&RowsStep> = steps
        .iter()
        .flat_map(|st| match st {
            GraphStep::Rows(r) => vec![r],
            GraphStep::Chain(c) => c
                .steps
                .iter()
                .filter_map(|m| match &m.before {
                    Some(BeforeStep::Rows(r)) => Some(r),
                    _ => None,
                })
                .collect(),
            _ => vec![],
        })
        .collect();
    let [norm] = norms.as_slice() else {
        panic!("one norm: {}", norms.len());
    };
    assert_eq!((norm.label.as_str(), norm.vec_len), ("ln_stream", 4608));
    assert!(
        norm.l1_bytes() <= tt_blackhole::plan::L1_BUDGET / 4,
        "{}",
        norm.l1_bytes()
    );
}

/// The Eagle projector at N1.6's full width (the tower's 1152 → 4608 unshuffled → 2048 →
/// 2048, the 81 blocks of one 18 × 18 grid) on the simulator from a tower output in the
/// device's token order: the unshuffle as tile-row copies, the streaming LayerNorm over the
/// permuted features, fc1 with the exact GELU, fc2; vs the CPU reference's projector (raster
/// order, torch's feature order).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_full_width_projector_matches_the_cpu_reference() {
    use gr00t_runtime::model::Taps;
    use gr00t_runtime::model::vision::Projector;

    use super::vision_graph::projector;

    require_simulator("sim_full_width_projector_matches_the_cpu_reference");
    let cfg = EagleConfig::default();
    let v = &cfg.vision_config;
    let ws = RandomWeights {
        seed: 41,
        dtype: DType::Bf16,
    };
    let reference = Projector::load(&ws, &cfg).unwrap();
    let arena = BackboneArena::new(BACKBONE_DTYPE)
        .with_projector(&ws, &cfg)
        .unwrap();
    let layout = VisionLayout::new(18, 18).unwrap();
    let shape = VisionShape {
        layout,
        width: v.hidden_size,
        heads: v.num_attention_heads,
    };
    let (t, c, d) = (layout.tokens(), shape.width, cfg.text_config.hidden_size);
    let mut seed = 0x41_u64;
    let x = draw(&mut seed, t * c, 1.5);
    let want = reference.forward(&x, 18, 18, &mut Taps::none(), false);
    let sim = sim_policy_with(&gr00t_megakernel::MegakernelConfig {
        device: "sim".into(),
        device_timeout: std::time::Duration::from_secs(600),
        ..gr00t_megakernel::MegakernelConfig::default()
    });
    let (dev, plan) = put_backbone(&sim, &arena, shape);
    let mut up = Upload::new();
    let rows = 32 * shape.row_tiles();
    up.add("t/v/out", rows, c, ActDtype::F32, &layout.to_device(&x, c));
    let mut g = Graph::new(dev, &plan);
    g.backbone = Some(&arena);
    projector(&mut g, &arena, shape, "t/v/out", "t/p/y").unwrap();
    let (got, wall, programs, ran) = run_graph(dev, g, &up, &[("t/p/y", layout.blocks(), d)]);
    let (p, err, top) = compare("projector", &got, &want);
    eprintln!(
        "full-width projector on the simulator: {wall:.1} s, {programs} programs ({ran} ran); \
         vs the CPU reference: PCC {p:.8}, max |err| {err:.3e} (max |value| {top:.3})"
    );
    assert!(p >= 0.9999, "PCC {p}");
    assert!(err <= top / 64.0, "max |err| {err} of {top}");
}

/// One SigLIP2 encoder layer at N1.6's full width (1152 wide, 16 heads of 72, MLP 4304) over
/// the 64 patches of an 8 × 8-patch view (the same programs as a full view's, over fewer rows),
/// seeded random bf16 weights packed bf16 (the backbone's format): the layer's output and its
/// update vs the CPU reference in f32. The full view runs by hand
/// (`sim_long_full_view_vision_layer_matches_the_cpu_reference`).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_full_width_vision_layer_matches_the_cpu_reference() {
    require_simulator("sim_full_width_vision_layer_matches_the_cpu_reference");
    sim_vision_layer(8);
}

/// [`sim_full_width_vision_layer_matches_the_cpu_reference`] over the 324 patches of one
/// 252 × 252 view (in the device's token order: 384 rows): minutes on the simulator, so
/// `scripts/device-sim-tests.sh --long` runs it, not CI.
#[test]
#[ignore = "a full view on the simulated p150a, minutes: scripts/device-sim-tests.sh --long"]
fn sim_long_full_view_vision_layer_matches_the_cpu_reference() {
    require_simulator("sim_long_full_view_vision_layer_matches_the_cpu_reference");
    sim_vision_layer(18);
}

/// One full-width SigLIP2 layer over a `side` × `side`-patch view on the simulator (the
/// output and the update, output minus input, what the layer computes beside the residual)
/// vs the CPU reference.
fn sim_vision_layer(side: usize) {
    let mut cfg = EagleConfig::default();
    cfg.vision_config.num_hidden_layers = 1;
    let v = &cfg.vision_config;
    let ws = RandomWeights {
        seed: 40,
        dtype: DType::Bf16,
    };
    let tower = VisionTower::load(&ws, v).unwrap();
    let arena = BackboneArena::new(BACKBONE_DTYPE)
        .with_vision_layers(&ws, &cfg, 0..1)
        .unwrap();
    let layout = VisionLayout::new(side, side).unwrap();
    let shape = VisionShape {
        layout,
        width: v.hidden_size,
        heads: v.num_attention_heads,
    };
    let (t, c, rows) = (layout.tokens(), shape.width, 32 * shape.row_tiles());
    let mut seed = 0x40_u64;
    let x = draw(&mut seed, t * c, 1.0);
    let mut want = x.clone();
    tower.encoder_layer(0, &mut want, t);

    // A full-width layer's programs take minutes on the simulator: a deadline to match.
    let sim = sim_policy_with(&gr00t_megakernel::MegakernelConfig {
        device: "sim".into(),
        device_timeout: std::time::Duration::from_secs(1200),
        ..gr00t_megakernel::MegakernelConfig::default()
    });
    let (dev, plan) = put_backbone(&sim, &arena, shape);
    let mut up = Upload::new();
    up.add("t/v/x0", rows, c, ActDtype::F32, &layout.to_device(&x, c));
    let mut g = Graph::new(dev, &plan);
    g.backbone = Some(&arena);
    vision_layer(&mut g, &arena, 0, shape, "t/v/x0", "t/v/y").unwrap();
    let (got, wall, programs, ran) = run_graph(dev, g, &up, &[("t/v/y", rows, c)]);
    let got = layout.to_raster(&got, c);
    let delta = |y: &[f32]| -> Vec<f32> { y.iter().zip(&x).map(|(a, b)| a - b).collect() };
    let out = compare("output", &got, &want);
    let upd = compare("update", &delta(&got), &delta(&want));
    eprintln!(
        "full-width SigLIP2 layer, {t} patches, on the simulator: {wall:.1} s, {programs} programs ({} ran); \
         vs the CPU reference: output PCC {:.8}, max |err| {:.3e} (max |value| {:.3}); \
         update PCC {:.8}, max |err| {:.3e} (max |value| {:.3})",
        ran, out.0, out.1, out.2, upd.0, upd.1, upd.2
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

/// The tiny checkpoint's whole vision stage on the simulator from the golden's pixels: the
/// patch embedding with the resized position table, both encoder layers, the post-LayerNorm
/// and the projector, one graph, each stage's output vs NVIDIA's f32 tap.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_tiny_vision_and_projector_match_the_golden_taps() {
    use crate::golden_case::{case_dir, golden_tap, pcc};
    use gr00t_runtime::config::ModelConfig;
    use gr00t_runtime::weights::WeightStore;

    use super::vision_graph::{patch_input, projector, vision_tower};

    require_simulator("sim_tiny_vision_and_projector_match_the_golden_taps");
    let cfg = ModelConfig::from_dir(&case_dir()).unwrap().eagle;
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    let v = &cfg.vision_config;
    let layers = v.num_hidden_layers;
    let arena = BackboneArena::vision_stage(&ws, &cfg, BACKBONE_DTYPE).unwrap();
    let (shape_px, pixels) = golden_tap("input.pixel_values");
    let (h, w, p) = (shape_px[2], shape_px[3], v.patch_size);
    let layout = VisionLayout::new(h / p, w / p).unwrap();
    let shape = VisionShape {
        layout,
        width: v.hidden_size,
        heads: v.num_attention_heads,
    };
    let (c, rows, d) = (
        shape.width,
        32 * shape.row_tiles(),
        cfg.text_config.hidden_size,
    );

    let sim = sim_policy(ArenaDtype::Bfp8B);
    let (dev, plan) = put_backbone(&sim, &arena, shape);
    let mut up = Upload::new();
    patch_input(&mut up, "t/v/p", &pixels, [v.num_channels, h, w, p], layout);
    let mut g = Graph::new(dev, &plan);
    g.backbone = Some(&arena);
    vision_tower(&mut g, &arena, shape, layers, "t/v/p", "t/v/out").unwrap();
    projector(&mut g, &arena, shape, "t/v/out", "t/p/y").unwrap();
    assert_eq!(
        layers, 2,
        "the streams below are the tiny tower's two layers"
    );
    let outputs = [
        ("t/v/s1", rows, c),
        ("t/v/s0", rows, c),
        ("t/v/out", rows, c),
        ("t/p/y", layout.blocks(), d),
    ];
    let (vals, wall, programs, ran) = run_graph(dev, g, &up, &outputs);
    let (layer0, rest) = vals.split_at(rows * c);
    let (layer1, rest) = rest.split_at(rows * c);
    let (tower, proj) = rest.split_at(rows * c);
    let stages = [
        ("vision.encoder_layer0", layout.to_raster(layer0, c)),
        ("vision.encoder_layer1", layout.to_raster(layer1, c)),
        ("vision.last_hidden_state", layout.to_raster(tower, c)),
        ("projector.output", proj.to_vec()),
    ];
    eprintln!(
        "tiny vision + projector on the simulator: {wall:.1} s, {programs} programs ({} ran); \
         vs the golden:",
        ran
    );
    let mut checks = Vec::new();
    for (tap, got) in &stages {
        let (_, want) = golden_tap(tap);
        let (p, err, top) = compare(tap, got, &want);
        eprintln!("  {tap:>26}: PCC {p:.6}, max |err| {err:.3e} (max |value| {top:.3})");
        checks.push((*tap, p, pcc(got, &want)));
    }
    for (tap, p, _) in &checks {
        assert!(*p >= 0.999, "{tap}: PCC {p}");
    }
}
