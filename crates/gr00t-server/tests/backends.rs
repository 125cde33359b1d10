//! Backend selection end to end: `GR00T_DIT_BACKEND=megakernel` serves the DiT from the
//! emulated Blackhole megakernel (bfp8_b arena) and agrees with the golden actions to the
//! block-float error budget; `ttnn`, which this build does not include, refuses clearly;
//! `plan` prints the 110-core plan of the full-size DiT.

use crate::common;

use std::process::Command;

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_gr00t-server");

fn request_file(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gr00t-backends-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let req = dir.join("req.json");
    std::fs::write(&req, serde_json::to_vec(&case1_request()).unwrap()).unwrap();
    req
}

fn predict(backend: &str, req: &std::path::Path) -> std::process::Output {
    predict_cmd(req)
        .env("GR00T_DIT_BACKEND", backend)
        .output()
        .unwrap()
}

#[test]
fn megakernel_backend_runs_the_emulated_dit() {
    let req = request_file("mk");
    let out = predict("megakernel", &req);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seq_len"], 115);
    let err = max_action_err(&v["actions"]);
    // bfp8_b weights and bf16 intermediates: far from f32 rounding noise, but close to golden.
    assert!(err > 0.0 && err < 0.1, "max |action - golden| = {err}");
    std::fs::remove_dir_all(req.parent().unwrap()).unwrap();
}

#[test]
fn ttnn_backend_is_refused_not_replaced() {
    let req = request_file("ttnn");
    let out = predict("ttnn", &req);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GR00T_DIT_BACKEND=ttnn"), "{err}");
    assert!(out.stdout.is_empty());
    std::fs::remove_dir_all(req.parent().unwrap()).unwrap();
}

#[test]
fn plan_prints_the_full_size_core_plan() {
    let out = clean_env(&mut Command::new(BIN))
        .args(["plan", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The whole 11x10 grid, each core with a role; 96 of them compute.
    let cores = v["cores"].as_array().expect("cores");
    assert_eq!(cores.len(), 110);
    let compute = cores
        .iter()
        .filter(|c| c["role"]["role"] == "compute")
        .count();
    assert_eq!(compute, 96, "{}", v["cores"][0]);
    // The other 14 are the cores the programs' LayerNorm, attention and end phases run on.
    let phase = cores
        .iter()
        .filter(|c| c["role"]["role"] == "phase")
        .count();
    assert_eq!(phase, 14, "{}", v["cores"][0]);
    let out = clean_env(&mut Command::new(BIN))
        .args(["plan"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("GB/s") || report.contains("DRAM"),
        "{report}"
    );
    // The full-size step's 128 matmul steps in the programs the device path packs them into:
    // one, its other phases in 8 groups on the 14 cores beside the 96 matmul cores (the AdaLN
    // matmuls are the timestep's, outside the steps).
    assert!(
        report.contains(
            "device programs per step: 1 for its 128 matmul steps on the 11x10 grid (their \
             LayerNorms, attentions and ends in 8 groups on 14 cores)"
        ),
        "{report}"
    );
    // The stream as the device path runs it: the cross K/V and the AdaLN hoisted.
    assert!(
        report.contains("882.4 MB/step, DRAM-bound 1723.4 us/step"),
        "{report}"
    );
    // The whole forward per stage, each beside the seed's measured trace (above its bound),
    // at the default 128-token prompt: the LLM's bf16 weights are DRAM-bound.
    for (stage, seed) in [
        ("vision", "10.8"),
        ("adapter", "2.2"),
        ("llm", "9.6"),
        ("denoise", "15.3"),
    ] {
        let line = report
            .lines()
            .find(|l| l.trim_start().starts_with(stage))
            .unwrap_or_else(|| panic!("no {stage} row: {report}"));
        assert!(line.contains(&format!("seed {seed:>5} ms")), "{line}");
    }
    assert!(report.contains("bound dram      3.15 ms"), "{report}");
    assert!(report.contains("seed 40.7 ms end to end"), "{report}");
}
