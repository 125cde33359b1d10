//! Seeded synthetic inputs of the real shapes, for the full-size test and benchmark (the
//! full-size checkpoint is not available here; these drive the same work through the model).

use crate::config::ModelConfig;
use crate::policy::ModelInputs;

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
