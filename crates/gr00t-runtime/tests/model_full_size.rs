//! The FULL-SIZE N1.6-3B architecture (SigLIP2 1152×27, Qwen3 2048×16, DiT 1536×32, horizon 50,
//! width 128) with seeded random bf16 weights generated in memory: shapes and finite output.

use gr00t_runtime::config::ModelConfig;
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::policy::ModelInputs;
use gr00t_runtime::weights::{DType, RandomWeights};

/// Inputs shaped like a GR1 observation: 12 instruction tokens, one 252×252 camera (81 tokens).
pub fn full_size_inputs(cfg: &ModelConfig) -> ModelInputs {
    let mut ids: Vec<u32> = vec![
        151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
    ];
    ids.extend([
        29245, 279, 23268, 504, 279, 5546, 323, 1992, 432, 304, 279, 14024,
    ]);
    ids.extend([27, 1805, 220, 16, 29, 151670]);
    ids.extend(std::iter::repeat_n(cfg.eagle.image_token_index, 81));
    ids.extend([151671, 151645, 198]);
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let g = &cfg.gr00t;
    ModelInputs {
        input_ids: ids,
        pixel_values: vec![(0..3 * 252 * 252).map(|_| rnd()).collect()],
        image_hw: (252, 252),
        state: (0..g.max_state_dim)
            .map(|i| if i < 58 { rnd() } else { 0.0 })
            .collect(),
        embodiment_id: 20,
        noise: (0..g.action_horizon * g.max_action_dim)
            .map(|_| rnd() * 1.7)
            .collect(),
    }
}

#[test]
#[ignore = "full-size: ~6 GB of bf16 weights, ~1 TFLOP; ~170 s on the shared 2-core box, run with --ignored"]
fn full_size_random_weights_give_finite_chunk() {
    let cfg = ModelConfig::full_size();
    let ws = RandomWeights {
        seed: 1601,
        dtype: DType::Bf16,
    };
    let model = Gr00tModel::from_source(cfg.clone(), &ws).expect("build full-size model");
    let inputs = full_size_inputs(&cfg);
    let mut shapes = Vec::new();
    let mut sink = |name: &str, shape: &[usize], data: &[f32]| {
        assert!(data.iter().all(|v| v.is_finite()), "{name} not finite");
        shapes.push((name.to_owned(), shape.to_vec()));
    };
    let chunk = model
        .forward(&inputs, &mut Taps::new(&mut sink))
        .expect("forward");
    assert_eq!((chunk.horizon, chunk.dim), (50, 128));
    assert_eq!(chunk.data.len(), 50 * 128);
    assert!(chunk.data.iter().all(|v| v.is_finite()));
    let find = |n: &str| {
        shapes
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, s)| s.clone())
            .unwrap()
    };
    assert_eq!(find("vision.last_hidden_state"), vec![1, 324, 1152]);
    assert_eq!(find("projector.output"), vec![1, 81, 2048]);
    assert_eq!(find("backbone.features"), vec![1, 116, 2048]);
    assert_eq!(find("action_head.state_features"), vec![1, 1, 1536]);
    assert_eq!(find("flow.step3.dit_block31"), vec![1, 51, 1536]);
    assert_eq!(find("flow.step3.dit_output"), vec![1, 51, 1024]);
    assert_eq!(find("flow.step3.decoder_output"), vec![1, 51, 128]);
    // The chunk moved away from the noise (the head did something) but stayed bounded.
    let moved = chunk
        .data
        .iter()
        .zip(&inputs.noise)
        .any(|(a, b)| (a - b).abs() > 1e-3);
    assert!(moved);
}
