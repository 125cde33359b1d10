//! The binary end to end with the real CPU model on the tiny golden checkpoint: `predict`
//! prints the /predict JSON; `serve` boots (warm-up + PCC self-check against a demo built from
//! the golden case), prints the ready line and answers over TCP; bad configuration refuses to
//! boot with one line.

use crate::common;

use std::process::{Command, Stdio};

use common::*;

const BIN: &str = env!("CARGO_BIN_EXE_gr00t-server");

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gr00t-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn predict_subcommand_prints_the_predict_json() {
    let dir = tmpdir("predict");
    let req = dir.join("req.json");
    std::fs::write(&req, serde_json::to_vec(&case1_request()).unwrap()).unwrap();
    let out = predict_cmd(&req).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["seq_len"], 115);
    assert_eq!(v["embodiment"], "gr1");
    let err = max_action_err(&v["actions"]);
    // f32 CPU model vs the f32 reference: rounding-order differences only.
    assert!(err <= 1e-3, "max |action - golden| = {err}");
    // --stats-json: the CPU reference has no device, and says so.
    let stats = dir.join("stats.json");
    let out = predict_cmd(&req)
        .arg("--stats-json")
        .arg(&stats)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(s, serde_json::json!({ "device": null }));
    // A bad request prints the 400 body and exits 2.
    let mut bad = case1_request();
    bad["state"]["waist"] = serde_json::json!([1.0]);
    std::fs::write(&req, serde_json::to_vec(&bad).unwrap()).unwrap();
    let out = predict_cmd(&req).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["field"], "state.waist");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_configuration_refuses_to_boot_with_one_line() {
    let out = clean_env(&mut Command::new(BIN))
        .env("GR00T_VERSION", "n15")
        .args(["--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("GR00T_VERSION"), "{err}");
    // No weights in the HF cache: boot fails with a reason.
    let hf = tmpdir("hf");
    let out = clean_env(&mut Command::new(BIN))
        .env("HF_HOME", &hf)
        .env("TT_WEIGHTS_REVISION", "abc")
        .args(["--host", "127.0.0.1", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("models--nvidia--GR00T-N1.6-3B/snapshots/abc"),
        "{err}"
    );
    std::fs::remove_dir_all(&hf).unwrap();
}

#[test]
fn serve_boots_warms_up_and_answers() {
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
    // The model is reached through the HF cache layout, as in the image.
    let hf = tmpdir("hfok");
    let snap = hf.join("hub/models--nvidia--GR00T-N1.6-3B/snapshots/d0814e7e");
    std::fs::create_dir_all(snap.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(case1(), &snap).unwrap();
    let port = free_port();
    let mut child = clean_env(&mut Command::new(BIN))
        .env("HF_HOME", &hf)
        .env("TT_WEIGHTS_REVISION", "d0814e7e")
        .env("GR00T_TOKENIZER_DIR", tok_dir())
        .env("GR00T_DEMO_DIR", &demo)
        .env("GR00T_WARMUP_RUNS", "2")
        .env("GR00T_WARMUP_PCC_MIN", "0.999")
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = wait_for_ready(&mut child);
    assert!(
        ready.starts_with(&format!(
            "gr00t-server ready on http://127.0.0.1:{port} (backend=cpu, embodiment=gr1"
        )),
        "{ready}"
    );
    let (code, v) = http(port, "GET", "/health", b"");
    assert_eq!((code, v["status"].as_str()), (200, Some("ready")));
    let (code, v) = http(port, "GET", "/info", b"");
    assert_eq!(code, 200);
    assert_eq!(v["weights_revision"], "d0814e7e");
    assert!(v["warmup_pcc"].as_f64().unwrap() >= 0.999);
    let (code, v) = http(
        port,
        "POST",
        "/predict",
        &serde_json::to_vec(&case1_request()).unwrap(),
    );
    assert_eq!(code, 200, "{v}");
    assert!(max_action_err(&v["actions"]) <= 1e-3);
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&hf).unwrap();
    std::fs::remove_dir_all(&demo).unwrap();
}

#[test]
fn demo_subcommand_writes_a_demo_the_boot_checks_against() {
    let dir = tmpdir("mkdemo");
    let req = dir.join("req.json");
    std::fs::write(&req, serde_json::to_vec(&case1_request()).unwrap()).unwrap();
    let out_dir = dir.join("demo");
    let run = || {
        clean_env(&mut Command::new(BIN))
            .args(["demo", "--model-dir"])
            .arg(case1())
            .arg("--tokenizer-dir")
            .arg(tok_dir())
            .arg("--request")
            .arg(&req)
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap()
    };
    let out = run();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let demo = gr00t_server::demo::Demo::load(&out_dir).unwrap();
    // The request is kept as given (floats compared through the actions below: JSON float
    // parsing is not bit-exact round trip without serde_json's `float_roundtrip`).
    let want = case1_request();
    for k in ["images", "instruction"] {
        assert!(demo.request[k] == want[k], "request.{k} changed");
    }
    // The f32 CPU reference of this build reproduces the reference's physical actions.
    let err = max_action_err(&demo.expected["actions"]);
    assert!(err <= 1e-3, "max |expected - golden| = {err}");
    let by = &demo.expected["produced_by"];
    assert_eq!(by["backend"], "cpu");
    let fp = by["weights_fingerprint"].as_str().unwrap();
    assert_eq!(fp.len(), 64);
    // Running it again replaces the directory whole (no temp or old copies left beside it).
    assert!(run().status.success());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");

    // The boot self-check accepts it for the same checkpoint (PCC vs the replayed golden)…
    let rt = replay_runtime();
    assert_eq!(rt.info.weights_fingerprint.as_deref(), Some(fp));
    let p = gr00t_server::boot::warm_up(&rt, &settings(), Some(&demo))
        .unwrap()
        .unwrap();
    assert!(p >= 0.999, "pcc {p}");
    // …and refuses it, with the reason, for other weights.
    let mut other = demo.clone();
    other.expected["produced_by"]["weights_fingerprint"] = serde_json::json!("0".repeat(64));
    let e = gr00t_server::boot::warm_up(&rt, &settings(), Some(&other))
        .unwrap_err()
        .to_string();
    assert!(e.contains("produced for other weights"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
