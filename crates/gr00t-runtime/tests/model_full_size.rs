//! The FULL-SIZE N1.6-3B architecture (SigLIP2 1152×27, Qwen3 2048×16, DiT 1536×32, horizon 50,
//! width 128) with seeded random bf16 weights generated in memory: shapes and finite output.

use gr00t_runtime::config::ModelConfig;
use gr00t_runtime::model::synthetic::full_size_inputs;
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::weights::{DType, RandomWeights};

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
