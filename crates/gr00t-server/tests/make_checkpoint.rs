//! `gr00t-server make-checkpoint`: deterministic per seed, in the real layout, and the server
//! boots from it alone (tokenizer and demo beside the weights), passes its self-check and
//! answers the demo with the demo's expected actions.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{clean_env, free_port, http, tok_dir, wait_for_ready};

const BIN: &str = env!("CARGO_BIN_EXE_gr00t-server");

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gr00t-mc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn make(out: &Path, extra: &[&str]) {
    let o = clean_env(&mut Command::new(BIN))
        .args(["make-checkpoint", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Every file under `dir` (relative path → bytes).
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_same_seed_gives_the_same_bytes_in_the_real_layout() {
    let (a, b, c) = (tmp("a"), tmp("b"), tmp("c"));
    make(&a, &["--seed", "3"]);
    make(&b, &["--seed", "3"]);
    make(&c, &["--seed", "4"]);
    let fa = files(&a);
    let names: Vec<&str> = fa.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "config.json",
        "eagle_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "processor_config.json",
        "statistics.json",
        "embodiment_id.json",
        "tokenizer/vocab.json",
        "tokenizer/merges.txt",
        "tokenizer/tokenizer_config.json",
        "demo/request.json",
        "demo/expected.json",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    assert_eq!(fa, files(&b), "deterministic per seed");
    let fc = files(&c);
    let shard = |f: &[(String, Vec<u8>)]| {
        f.iter()
            .find(|(n, _)| n == "model-00001-of-00002.safetensors")
            .unwrap()
            .1
            .clone()
    };
    assert_ne!(shard(&fa), shard(&fc), "another seed, other weights");
    // The index names every tensor of both shards.
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("model.safetensors.index.json")).unwrap())
            .unwrap();
    let map = index["weight_map"].as_object().unwrap();
    assert!(map.len() > 100, "{}", map.len());
    assert!(
        map.values()
            .any(|f| f == "model-00002-of-00002.safetensors")
    );
    for d in [a, b, c] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn the_server_boots_from_it_alone_and_answers_the_demo() {
    let dir = tmp("serve");
    make(&dir, &["--seed", "11"]);
    let port = free_port();
    // No tokenizer or demo flags: both are read from beside the weights.
    let mut child = clean_env(&mut Command::new(BIN))
        .env("GR00T_WARMUP_RUNS", "1")
        .env("GR00T_WARMUP_PCC_MIN", "0.999")
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--model-dir",
        ])
        .arg(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = wait_for_ready(&mut child);
    assert!(ready.contains("warmup_pcc=1.000000"), "{ready}");
    let (code, demo) = http(port, "GET", "/demo", b"");
    assert_eq!(code, 200);
    let (code, resp) = http(
        port,
        "POST",
        "/predict",
        &serde_json::to_vec(&demo["request"]).unwrap(),
    );
    assert_eq!(code, 200, "{resp}");
    let expected = &demo["expected"]["actions"];
    for (g, rows) in resp["actions"].as_object().unwrap() {
        for (r, e) in rows
            .as_array()
            .unwrap()
            .iter()
            .zip(expected[g].as_array().unwrap())
        {
            for (x, y) in r.as_array().unwrap().iter().zip(e.as_array().unwrap()) {
                assert!(
                    (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-6,
                    "{g}"
                );
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn real_tokenizer_files_can_be_copied_in() {
    let dir = tmp("tok");
    make(&dir, &["--tokenizer-dir", tok_dir().to_str().unwrap()]);
    assert_eq!(
        std::fs::read(dir.join("tokenizer/vocab.json")).unwrap(),
        std::fs::read(tok_dir().join("vocab.json")).unwrap()
    );
    let demo: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("demo/expected.json")).unwrap()).unwrap();
    assert!(demo["actions"]["left_arm"].is_array());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unknown_config_is_refused() {
    let o = clean_env(&mut Command::new(BIN))
        .args([
            "make-checkpoint",
            "--config",
            "3b",
            "--out",
            "/nonexistent/x",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("tiny"));
}

/// The golden N1.7 processor files (the backbone's tiny Cosmos-Reason2 layout).
fn n17_processor_dir() -> PathBuf {
    common::golden().join("../gr00t-n17-tiny/cosmos_reason2_tiny")
}

/// Every value of two `{group: [[f]]}` maps within `tol` of each other (same groups, shapes).
fn assert_actions_close(got: &serde_json::Value, want: &serde_json::Value, tol: f64) {
    let (got, want) = (got.as_object().unwrap(), want.as_object().unwrap());
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (g, rows) in want {
        let (a, b) = (got[g].as_array().unwrap(), rows.as_array().unwrap());
        assert_eq!(a.len(), b.len(), "{g} steps");
        for (ra, rb) in a.iter().zip(b) {
            let (ra, rb) = (ra.as_array().unwrap(), rb.as_array().unwrap());
            assert_eq!(ra.len(), rb.len(), "{g} width");
            for (x, y) in ra.iter().zip(rb) {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!((x - y).abs() <= tol, "{g}: {x} vs {y}");
            }
        }
    }
}

#[test]
fn n17_tiny_is_deterministic_and_predicts_its_own_demo() {
    let (a, b) = (tmp("n17a"), tmp("n17b"));
    make(&a, &["--config", "n17-tiny", "--seed", "5"]);
    make(&b, &["--config", "n17-tiny", "--seed", "5"]);
    let fa = files(&a);
    assert_eq!(fa, files(&b), "deterministic per seed");
    let names: Vec<&str> = fa.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "processor_config.json",
        "statistics.json",
        "embodiment_id.json",
        "tokenizer/config.json",
        "tokenizer/vocab.json",
        "tokenizer/merges.txt",
        "tokenizer/tokenizer_config.json",
        "tokenizer/chat_template.json",
        "tokenizer/preprocessor_config.json",
        "demo/request.json",
        "demo/expected.json",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], "Gr00tN1d7");
    // Every structural switch of the released N1.7: a vl_self_attention stack, fewer kept
    // LLM layers than the backbone has, the alternating DiT, percentiles, relative actions.
    assert!(config["vl_self_attention_cfg"]["num_layers"].as_u64() > Some(0));
    let backbone: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("tokenizer/config.json")).unwrap()).unwrap();
    assert!(
        config["select_layer"].as_u64() < backbone["text_config"]["num_hidden_layers"].as_u64()
    );
    assert_eq!(
        backbone["vision_config"]["deepstack_visual_indexes"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    for k in [
        "use_alternate_vl_dit",
        "use_vlln",
        "use_percentiles",
        "use_relative_action",
    ] {
        assert_eq!(config[k], true, "{k}");
    }

    // `predict` on the demo request, GR00T_EMBODIMENT unset: the checkpoint's only
    // embodiment is served, and the demo's expected actions come back.
    let out = clean_env(&mut Command::new(BIN))
        .args(["predict", "--model-dir"])
        .arg(&a)
        .arg("--request")
        .arg(a.join("demo/request.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let resp: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("demo/expected.json")).unwrap()).unwrap();
    assert_eq!(resp["embodiment"], "oxe_droid_relative_eef_relative_joint");
    assert_eq!(expected["produced_by"]["version"], "n17");
    assert_eq!(resp["actions"]["eef_9d"].as_array().map(Vec::len), Some(40));
    assert_eq!(resp["chunk"].as_array().map(Vec::len), Some(40));
    assert_actions_close(&resp["actions"], &expected["actions"], 1e-5);
    for d in [a, b] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// `serve.env` of examples/gr00t-n1.7-tiny (its `KEY: value` lines, quotes and comments off).
fn n17_example_env() -> Vec<(String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gr00t-n1.7-tiny/tt-model.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let env_block = text.split("\n  env:\n").nth(1).expect("serve.env");
    env_block
        .lines()
        .take_while(|l| l.starts_with("    "))
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(": ")?;
            let v = v.split(" #").next()?.trim().trim_matches('"');
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

#[test]
fn n17_tiny_serves_from_the_example_pins_in_an_offline_hf_cache() {
    // The example's weights and processor files, laid out as `tt-model serve` leaves them in
    // the HF cache (the checkpoint without `tokenizer/`, the processor files on their own).
    let ck = tmp("n17-example");
    make(
        &ck,
        &[
            "--config",
            "n17-tiny",
            "--seed",
            "2",
            "--tokenizer-dir",
            n17_processor_dir().to_str().unwrap(),
        ],
    );
    let env = n17_example_env();
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let hub = tmp("n17-hub");
    let snapshot = |repo: &str, rev: &str| {
        hub.join(format!("models--{}", repo.replace('/', "--")))
            .join("snapshots")
            .join(rev)
    };
    let weights = snapshot(&get("TT_WEIGHTS_REPO"), &get("TT_WEIGHTS_REVISION"));
    let processor = snapshot(
        &get("GR00T_TOKENIZER_REPO"),
        &get("GR00T_TOKENIZER_REVISION"),
    );
    for d in [&weights, &processor] {
        std::fs::create_dir_all(d.parent().unwrap()).unwrap();
    }
    std::fs::rename(ck.join("tokenizer"), &processor).unwrap();
    std::fs::rename(&ck, &weights).unwrap();

    let port = free_port();
    let mut child = clean_env(&mut Command::new(BIN))
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("HF_HUB_CACHE", &hub)
        .env("HF_HUB_OFFLINE", "1")
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = wait_for_ready(&mut child);
    assert!(ready.contains("warmup_pcc=1.000000"), "{ready}");
    let (code, info) = http(port, "GET", "/info", b"");
    assert_eq!(code, 200);
    assert_eq!(info["version"], "n17");
    assert_eq!(
        info["weights_revision"].as_str(),
        Some(get("TT_WEIGHTS_REVISION").as_str())
    );
    let (code, demo) = http(port, "GET", "/demo", b"");
    assert_eq!(code, 200);
    let (code, resp) = http(
        port,
        "POST",
        "/predict",
        &serde_json::to_vec(&demo["request"]).unwrap(),
    );
    assert_eq!(code, 200, "{resp}");
    assert_actions_close(&resp["actions"], &demo["expected"]["actions"], 1e-5);
    let _ = child.kill();
    let _ = child.wait();

    // A pin the cache does not hold is refused at boot, naming the variable.
    let out = clean_env(&mut Command::new(BIN))
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("HF_HUB_CACHE", &hub)
        .env(
            "GR00T_TOKENIZER_REVISION",
            "0000000000000000000000000000000000000000",
        )
        .args(["predict", "--request"])
        .arg(weights.join("demo/request.json"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GR00T_TOKENIZER_REVISION=0000000000"), "{err}");
    std::fs::remove_dir_all(&hub).unwrap();
}
