//! The device backend end to end on the simulated p150a (feature `device`):
//! `GR00T_DIT_BACKEND=megakernel GR00T_MK_DEVICE=sim` on golden case1, through `gr00t-server
//! predict` and through a served boot whose warm-up PCC gate runs on this path.
//!
//! Needs the simulator (`source ~/.cache/blackhole-sim/env.sh` and its venv active, or
//! `GR00T_TTNN_PYTHON`); without it each test says it is skipped, unless `GR00T_REQUIRE_SIM=1`
//! (CI), which makes the skip a failure.
#![cfg(feature = "device")]

use crate::common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_gr00t-server");

fn simulator(test: &str) -> bool {
    if std::env::var_os("TT_METAL_SIMULATOR").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("GR00T_REQUIRE_SIM").is_none(),
        "{test}: GR00T_REQUIRE_SIM is set but TT_METAL_SIMULATOR is not (source the simulator's env.sh)"
    );
    eprintln!("{test}: skipped: TT_METAL_SIMULATOR is not set (no simulated p150a here)");
    false
}

/// `clean_env` drops every TT_* variable; the simulator's come back.
fn with_sim(cmd: &mut Command) -> &mut Command {
    for k in [
        "TT_METAL_SIMULATOR",
        "TT_METAL_SLOW_DISPATCH_MODE",
        "TT_METAL_HOME",
    ] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gr00t-device-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn flat(actions: &serde_json::Value) -> Vec<f64> {
    GROUPS
        .iter()
        .flat_map(|g| {
            actions[*g]
                .as_array()
                .unwrap_or_else(|| panic!("no {g}"))
                .iter()
                .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn pcc(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    sab / (saa.sqrt() * sbb.sqrt())
}

fn predict(req: &std::path::Path, device: &str) -> serde_json::Value {
    let out = with_sim(&mut predict_cmd(req))
        .env("GR00T_DIT_BACKEND", "megakernel")
        .env("GR00T_MK_DEVICE", device)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "predict on {device}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sim_predict_matches_golden_and_emulator() {
    if !simulator("sim_predict_matches_golden_and_emulator") {
        return;
    }
    let dir = tmpdir("predict");
    let req = dir.join("req.json");
    std::fs::write(&req, serde_json::to_vec(&case1_request()).unwrap()).unwrap();
    let t = Instant::now();
    let sim = predict(&req, "sim");
    let wall = t.elapsed().as_secs_f64();
    let emu = predict(&req, "emulator");
    let golden = flat(&case1_expected()["actions"]);
    let got = flat(&sim["actions"]);
    let (p_golden, p_emu) = (pcc(&got, &golden), pcc(&got, &flat(&emu["actions"])));
    eprintln!(
        "gr00t-server predict, tiny case1 on the simulator: {wall:.1} s (process: boot, device open, arena upload, one forward); \
         PCC vs f32 golden {p_golden:.6}, vs emulator {p_emu:.8}; max |err| vs golden {:.4}",
        max_action_err(&sim["actions"])
    );
    assert!(p_golden >= 0.999, "PCC vs the f32 golden {p_golden}");
    assert!(p_emu >= 0.9999, "PCC vs the CPU emulator {p_emu}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_serve_boot_runs_the_warmup_gate() {
    if !simulator("sim_serve_boot_runs_the_warmup_gate") {
        return;
    }
    let demo = tmpdir("demo");
    std::fs::write(
        demo.join("request.json"),
        serde_json::to_vec(&case1_request()).unwrap(),
    )
    .unwrap();
    std::fs::write(
        demo.join("expected.json"),
        serde_json::to_vec(&case1_expected()).unwrap(),
    )
    .unwrap();
    let port = free_port();
    let t = Instant::now();
    let mut child = with_sim(clean_env(&mut Command::new(BIN)))
        .env("GR00T_DIT_BACKEND", "megakernel")
        .env("GR00T_MK_DEVICE", "sim")
        .env("GR00T_WARMUP_RUNS", "1")
        .env("GR00T_WARMUP_PCC_MIN", "0.999")
        .env("RUST_LOG", "info")
        .arg("--model-dir")
        .arg(case1())
        .arg("--tokenizer-dir")
        .arg(tok_dir())
        .arg("--demo-dir")
        .arg(&demo)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = wait_for_ready(&mut child);
    eprintln!(
        "served boot with the warm-up gate on the simulator: {:.1} s; {ready}",
        t.elapsed().as_secs_f64()
    );
    let (code, v) = http(port, "GET", "/info", b"");
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&demo).unwrap();
    assert_eq!(code, 200);
    assert_eq!(v["backend"], "megakernel-sim", "{v}");
    assert_eq!(v["stage"], "stage2-megakernel-sim-hostsfpu", "{v}");
    let p = v["warmup_pcc"].as_f64().expect("the warm-up gate ran");
    assert!(p >= 0.999, "warm-up PCC {p}");
}
