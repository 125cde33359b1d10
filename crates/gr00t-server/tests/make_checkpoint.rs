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
