//! Full-size N1.6-3B forward on this machine: wall time per phase and peak RSS (VmHWM).
//! Weights: the checkpoint in `$GR00T_MODEL_DIR` if set, otherwise seeded random bf16 weights
//! of the full architecture generated in memory (same shapes, same work).
//! Run: `cargo bench -p gr00t-runtime --bench forward_full` (`GR00T_FULL_ITERS` = timed runs, default 2).

// This program's measurements and findings are its output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use gr00t_runtime::config::ModelConfig;
use gr00t_runtime::model::synthetic::full_size_inputs;
use gr00t_runtime::model::{Gr00tModel, Taps};
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
    let inp = full_size_inputs(&model.cfg);
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
