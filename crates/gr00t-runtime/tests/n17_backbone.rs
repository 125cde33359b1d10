//! N1.7 backbone against the golden case1 taps (see n17_golden): every vision.* / llm.* /
//! backbone.features float tap within the README tolerance, the M-RoPE position ids exactly;
//! plus the released (full-size) backbone built from random weights.

use crate::n17_golden::{self, Tensors, assert_all_close};
use gr00t_runtime::model::Taps;
use gr00t_runtime::n17::backbone::{BackboneConfig, Qwen3VlBackbone, rope_index};
use gr00t_runtime::weights::{DType, RandomWeights, WeightStore};
use std::collections::HashMap;

/// `select_layer` of the GR00T checkpoint's own config.json (case1).
fn select_layer() -> usize {
    let path = n17_golden::case_dir().join("config.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["select_layer"].as_u64().expect("select_layer") as usize
}

fn golden_config() -> BackboneConfig {
    BackboneConfig::from_dir(&n17_golden::processor_dir()).expect("backbone config")
}

/// `(input_ids, grid_thw, pixel_values)` of the golden taps.
fn inputs(taps: &Tensors) -> (Vec<u32>, Vec<[usize; 3]>, Vec<f32>) {
    let ids = taps.i64s["input.input_ids"]
        .1
        .iter()
        .map(|&v| v as u32)
        .collect();
    let grid = taps.i64s["input.image_grid_thw"]
        .1
        .chunks_exact(3)
        .map(|g| [g[0] as usize, g[1] as usize, g[2] as usize])
        .collect();
    let pixels = taps.f32s["input.pixel_values"].1.clone();
    (ids, grid, pixels)
}

#[test]
fn position_ids_and_masks_match_golden_exactly() {
    let taps = n17_golden::taps();
    let cfg = golden_config();
    let (ids, grid, _) = inputs(&taps);
    let r = rope_index(
        &ids,
        &grid,
        cfg.image_token_id,
        cfg.vision_start_token_id,
        cfg.vision.spatial_merge_size,
    )
    .unwrap();
    let (shape, want) = &taps.i64s["llm.position_ids"];
    assert_eq!(shape, &vec![3, 1, ids.len()]);
    assert_eq!(r.positions.concat(), *want);
    assert_eq!(vec![r.delta], taps.i64s["llm.rope_deltas"].1);
    let mask: Vec<i64> = ids
        .iter()
        .map(|&id| (id == cfg.image_token_id) as i64)
        .collect();
    assert_eq!(mask, taps.i64s["llm.visual_pos_mask"].1);
    assert_eq!(mask, taps.i64s["backbone.image_mask"].1);
    assert_eq!(mask.iter().sum::<i64>(), 256);
}

#[test]
fn backbone_taps_match_golden() {
    let taps = n17_golden::taps();
    let cfg = golden_config();
    let ws = WeightStore::open_dir(&n17_golden::case_dir()).expect("checkpoint");
    let bb = Qwen3VlBackbone::load(&ws, &cfg, select_layer()).expect("load backbone");
    let (ids, grid, pixels) = inputs(&taps);
    let mut got: HashMap<String, (Vec<usize>, Vec<f32>)> = HashMap::new();
    let mut sink = |name: &str, shape: &[usize], data: &[f32]| {
        got.insert(name.to_owned(), (shape.to_vec(), data.to_vec()));
    };
    let features = bb
        .forward(&pixels, &grid, &ids, &mut Taps::new(&mut sink))
        .expect("forward");
    assert_eq!(features.len(), ids.len() * cfg.text.hidden_size);
    assert_eq!(features, got["backbone.features"].1);

    // Every float tap of the golden this stage produces must have been emitted.
    let mut names: Vec<&String> = taps
        .f32s
        .keys()
        .filter(|n| {
            (n.starts_with("vision.") || n.starts_with("llm.") || *n == "backbone.features")
                && !n.ends_with("_UNUSED")
        })
        .collect();
    names.sort();
    let missing: Vec<&&String> = names.iter().filter(|n| !got.contains_key(**n)).collect();
    assert!(missing.is_empty(), "taps not emitted: {missing:?}");
    assert!(
        names.len() >= 20,
        "only {} backbone taps in the golden",
        names.len()
    );
    for n in &names {
        let (gs, _) = &got[*n];
        let (ws, _) = &taps.f32s[*n];
        let numel = |s: &[usize]| s.iter().product::<usize>();
        assert_eq!(numel(gs), numel(ws), "{n}: shape {gs:?} vs golden {ws:?}");
        let (_, g) = &got[*n];
        let (_, w) = &taps.f32s[*n];
        let (mut abs, mut rel) = (0.0f32, 0.0f32);
        for (&a, &b) in g.iter().zip(w) {
            abs = abs.max((a - b).abs());
            rel = rel.max((a - b).abs() / (1e-4 + 1e-4 * b.abs()));
        }
        println!(
            "{n:28} worst |a-b| {abs:.3e}  (tolerance used {:.1}%)",
            rel * 100.0
        );
    }
    assert_all_close(
        names
            .iter()
            .map(|n| (n.as_str(), got[*n].1.as_slice(), taps.f32s[*n].1.as_slice())),
    );
}

#[test]
fn released_config_matches_full_config_json() {
    let full = n17_golden::golden_root().join("full_config.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&full).unwrap()).unwrap();
    let section = &v["cosmos_reason2_2b_config [3rd-party]"];
    assert!(
        section.is_object(),
        "no Cosmos-Reason2-2B section in {}",
        full.display()
    );
    let dir = std::env::temp_dir().join(format!("n17-bb-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), section.to_string()).unwrap();
    let parsed = BackboneConfig::from_dir(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        parsed.expect("parse released config"),
        BackboneConfig::cosmos_reason2_2b()
    );
}

#[test]
fn bad_select_layer_and_inputs_are_typed_errors() {
    let cfg = golden_config();
    let ws = WeightStore::open_dir(&n17_golden::case_dir()).expect("checkpoint");
    let too_many = cfg.text.num_hidden_layers + 1;
    assert!(Qwen3VlBackbone::load(&ws, &cfg, too_many).is_err());
    assert!(Qwen3VlBackbone::load(&ws, &cfg, 0).is_err());
    let bb = Qwen3VlBackbone::load(&ws, &cfg, 1).expect("one layer");
    // One 2x2-patch image = one image token, but the prompt holds none.
    let pixels = vec![0.0; 4 * cfg.vision.patch_dim()];
    let e = bb.forward(&pixels, &[[1, 2, 2]], &[1, 2, 3], &mut Taps::none());
    assert!(e.is_err());
}

/// The released shapes (24 vision blocks of 1024, 16 text layers of 2048) build from random bf16
/// weights, and one small image (2×2 patches = 1 image token) runs through in seconds.
#[test]
fn full_size_backbone_builds_from_random_weights() {
    let cfg = BackboneConfig::cosmos_reason2_2b();
    let ws = RandomWeights {
        seed: 1701,
        dtype: DType::Bf16,
    };
    let t0 = std::time::Instant::now();
    let bb = Qwen3VlBackbone::load(&ws, &cfg, 16).expect("build full-size backbone");
    println!(
        "full-size backbone built in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let pixels: Vec<f32> = (0..4 * cfg.vision.patch_dim())
        .map(|i| ((i % 255) as f32 / 127.5) - 1.0)
        .collect();
    let (vs, img, ve) = (cfg.vision_start_token_id, cfg.image_token_id, 151_653);
    let ids = [151_644, 872, 198, vs, img, ve, 3838, 151_645];
    let mut shapes = HashMap::new();
    let mut sink = |name: &str, shape: &[usize], data: &[f32]| {
        assert!(data.iter().all(|v| v.is_finite()), "{name} not finite");
        shapes.insert(name.to_owned(), shape.to_vec());
    };
    let out = bb
        .forward(&pixels, &[[1, 2, 2]], &ids, &mut Taps::new(&mut sink))
        .expect("forward");
    assert_eq!(out.len(), ids.len() * 2048);
    assert_eq!(shapes["vision.block23"], vec![4, 1024]);
    assert_eq!(shapes["vision.deepstack2"], vec![1, 2048]);
    assert_eq!(shapes["vision.merger_out"], vec![1, 2048]);
    assert_eq!(shapes["llm.rope_cos"], vec![1, 8, 128]);
    assert_eq!(shapes["llm.layer15.output"], vec![1, 8, 2048]);
    assert!(!shapes.contains_key("llm.layer16.output"));
}

/// The released shapes on the golden prompt (4 images of 16×16 patches, 279 tokens): what one
/// real observation costs on the CPU. Finite features of the right shape.
#[test]
#[ignore = "full-size forward on a real prompt shape: ~1 TFLOP, ~40 s forward after a ~30-70 s build on the shared 2-core box; run with --ignored"]
fn full_size_backbone_runs_the_golden_prompt_shape() {
    let cfg = BackboneConfig::cosmos_reason2_2b();
    let ws = RandomWeights {
        seed: 1702,
        dtype: DType::Bf16,
    };
    let bb = Qwen3VlBackbone::load(&ws, &cfg, 16).expect("build full-size backbone");
    let taps = n17_golden::taps();
    let (ids, grid, pixels) = inputs(&taps);
    let t0 = std::time::Instant::now();
    let out = bb
        .forward(&pixels, &grid, &ids, &mut Taps::none())
        .expect("forward");
    println!(
        "full-size backbone forward, {} tokens / {} patches: {:.1} s",
        ids.len(),
        pixels.len() / cfg.vision.patch_dim(),
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(out.len(), ids.len() * 2048);
    assert!(out.iter().all(|v| v.is_finite()));
}
