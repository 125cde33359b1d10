//! Full-size N1.6-3B forward on this machine: wall time per phase and peak RSS (VmHWM).
//! Weights: the checkpoint in `$GR00T_MODEL_DIR` if set, otherwise seeded random bf16 weights
//! of the full architecture generated in memory (same shapes, same work).
//! Run: `cargo bench -p gr00t-runtime --bench forward_full` (`GR00T_FULL_ITERS` = timed runs, default 2).

use gr00t_runtime::config::ModelConfig;
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::policy::ModelInputs;
use gr00t_runtime::weights::{DType, RandomWeights};
use std::time::Instant;

fn vm_hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of this process (all threads).
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn inputs(cfg: &ModelConfig) -> ModelInputs {
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
            .map(|_| rnd())
            .collect(),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` / `cargo bench -- --list`: nothing to list
    }
    let iters: usize = std::env::var("GR00T_FULL_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let t0 = Instant::now();
    let model = match std::env::var_os("GR00T_MODEL_DIR") {
        Some(dir) => Gr00tModel::load(std::path::Path::new(&dir)).expect("load checkpoint"),
        None => {
            let mut cfg = ModelConfig::full_size();
            // GR00T_FULL_SHALLOW=1: full widths, 2 vision / 2 LLM / 4 DiT layers (profiling).
            if std::env::var_os("GR00T_FULL_SHALLOW").is_some() {
                cfg.eagle.vision_config.num_hidden_layers = 2;
                cfg.gr00t.select_layer = 2;
                cfg.gr00t.diffusion_model_cfg.num_layers = 4;
            }
            Gr00tModel::from_source(
                cfg,
                &RandomWeights {
                    seed: 1601,
                    dtype: DType::Bf16,
                },
            )
            .expect("build")
        }
    };
    println!("threads: {}", rayon::current_num_threads());
    println!(
        "build/load: {:.2} s, VmHWM {:.2} GiB",
        t0.elapsed().as_secs_f64(),
        vm_hwm_kib() as f64 / 1048576.0
    );
    let inp = inputs(&model.cfg);
    for i in 0..=iters {
        let t = Instant::now();
        let c0 = cpu_seconds();
        let bb = model.encode(&inp, &mut Taps::none()).unwrap();
        let te = t.elapsed().as_secs_f64();
        let mut dit = model.cpu_dit();
        let chunk = model.act(&bb, &inp, &mut dit, &mut Taps::none()).unwrap();
        let tt = t.elapsed().as_secs_f64();
        assert!(chunk.data.iter().all(|v| v.is_finite()));
        println!(
            "{} forward: {:.3} s wall, {:.2} s CPU (backbone {:.3} s, action head {:.3} s), VmHWM {:.2} GiB",
            if i == 0 { "warm-up" } else { "timed" },
            tt,
            cpu_seconds() - c0,
            te,
            tt - te,
            vm_hwm_kib() as f64 / 1048576.0
        );
    }
}
