//! Test fixtures: golden paths, the case1 request, and `GoldenReplayPolicy` (test-only: it
//! returns the reference's normalized chunk for case1 so HTTP tests can check exact physical
//! actions without running a model).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use gr00t_runtime::policy::{ActionChunk, ForwardTiming, ModelInputs, Policy, PolicyError};
use gr00t_server::boot::{self, Demo};
use gr00t_server::runtime::Runtime;
use gr00t_server::settings::Settings;
use gr00t_server::state::AppState;
use safetensors::SafeTensors;

pub fn golden() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden/gr00t-n16-tiny"
    ))
}
pub fn case1() -> PathBuf {
    golden().join("case1")
}
pub fn tok_dir() -> PathBuf {
    golden().join("tokenizer")
}

pub fn f32_tensor(file: &str, name: &str) -> Vec<f32> {
    let bytes = std::fs::read(case1().join(file)).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor(name).unwrap();
    t.data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

pub const GROUPS: [&str; 5] = ["left_arm", "right_arm", "left_hand", "right_hand", "waist"];

/// Replays `flow.action_pred` of case1 (a [24, 36] chunk). Test-only.
pub struct GoldenReplayPolicy {
    chunk: Vec<f32>,
}

impl GoldenReplayPolicy {
    pub fn new() -> Self {
        Self {
            chunk: f32_tensor("taps.safetensors", "flow.action_pred"),
        }
    }
}

impl Policy for GoldenReplayPolicy {
    fn backend_name(&self) -> &str {
        "golden-replay"
    }
    fn dims(&self) -> (usize, usize, usize) {
        (24, 36, 64)
    }
    fn predict(&self, inputs: &ModelInputs) -> Result<(ActionChunk, ForwardTiming), PolicyError> {
        if inputs.noise.len() != 24 * 36 || inputs.state.len() != 64 {
            return Err(PolicyError::Shape(
                "replay policy: unexpected input shapes".into(),
            ));
        }
        Ok((
            ActionChunk {
                horizon: 24,
                dim: 36,
                data: self.chunk.clone(),
            },
            ForwardTiming::default(),
        ))
    }
}

pub fn settings() -> Settings {
    let vars: HashMap<String, String> = [
        ("GR00T_EMBODIMENT", "gr1"),
        ("GR00T_LAYOUT", "gr1"),
        ("GR00T_WARMUP_RUNS", "2"),
        ("GR00T_WARMUP_PCC_MIN", "0.999"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Settings::from_vars(&vars).unwrap()
}

pub fn replay_runtime() -> Runtime {
    boot::build_runtime(
        &settings(),
        &case1(),
        &tok_dir(),
        Box::new(GoldenReplayPolicy::new()),
    )
    .unwrap()
}

/// The case1 observation as a `/predict` body (noise given, as the reference run).
pub fn case1_request() -> serde_json::Value {
    let obs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(case1().join("observation.json")).unwrap())
            .unwrap();
    let png = std::fs::read(case1().join("observation.png")).unwrap();
    let noise = f32_tensor("observation.safetensors", "noise");
    let rows: Vec<Vec<f32>> = noise.chunks(36).map(|r| r.to_vec()).collect();
    serde_json::json!({
        "images": { "ego_view_bg_crop_pad_res256_freq20": base64::engine::general_purpose::STANDARD.encode(png) },
        "state": obs["state"],
        "instruction": obs["instruction"],
        "noise": [rows],
    })
}

/// The case1 request as a body: seeded (no `noise`, so the server draws it) or with the
/// golden noise.
pub fn case1_body(seeded: bool) -> Vec<u8> {
    let mut req = case1_request();
    if seeded {
        req.as_object_mut().unwrap().remove("noise");
    }
    serde_json::to_vec(&req).unwrap()
}

/// A bench's round count: its first numeric argument, else `default`.
pub fn rounds_arg(default: usize) -> usize {
    std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(default)
}

/// The golden physical actions `{group: [[...]]}`.
pub fn case1_expected() -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for g in GROUPS {
        let v = f32_tensor("taps.safetensors", &format!("output.action.{g}"));
        let d = v.len() / 16;
        m.insert(
            g.into(),
            serde_json::json!(v.chunks(d).map(|r| r.to_vec()).collect::<Vec<_>>()),
        );
    }
    serde_json::json!({ "actions": m })
}

pub fn case1_demo() -> Demo {
    Demo {
        request: case1_request(),
        expected: case1_expected(),
    }
}

/// A ready server state around the replay policy.
pub fn ready_state() -> AppState {
    let state = AppState::new();
    state.set_ready(Arc::new(replay_runtime()), Some(Arc::new(case1_demo())));
    state
}

/// Max |a - b| between a response's `actions` and the golden.
pub fn max_action_err(actions: &serde_json::Value) -> f64 {
    let want = case1_expected();
    let mut worst = 0f64;
    for g in GROUPS {
        let a = actions[g].as_array().unwrap_or_else(|| panic!("no {g}"));
        let b = want["actions"][g].as_array().unwrap();
        assert_eq!(a.len(), 16, "{g} steps");
        for (ra, rb) in a.iter().zip(b) {
            let (ra, rb) = (ra.as_array().unwrap(), rb.as_array().unwrap());
            assert_eq!(ra.len(), rb.len());
            for (x, y) in ra.iter().zip(rb) {
                worst = worst.max((x.as_f64().unwrap() - y.as_f64().unwrap()).abs());
            }
        }
    }
    worst
}

/// A command with none of the caller's GR00T_*/TT_*/HF_HOME configuration: each test sets
/// exactly what it means to.
pub fn clean_env(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("GR00T_") || k.starts_with("TT_") || k == "HF_HOME" {
            cmd.env_remove(k);
        }
    }
    cmd.env("RUST_LOG", "warn")
}

/// `gr00t-server predict` on the tiny golden checkpoint with the request file `req`.
pub fn predict_cmd(req: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gr00t-server"));
    clean_env(&mut cmd)
        .args(["predict", "--model-dir"])
        .arg(case1())
        .arg("--tokenizer-dir")
        .arg(tok_dir())
        .arg("--request")
        .arg(req);
    cmd
}

/// One HTTP/1.1 request to 127.0.0.1:`port` (connection closed after): (status, JSON body).
pub fn http(port: u16, method: &str, path: &str, body: &[u8]) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut resp = vec![];
    s.read_to_end(&mut resp).unwrap();
    let code = String::from_utf8_lossy(&resp[9..12]).parse().unwrap();
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (code, serde_json::from_slice(&resp[at..]).unwrap())
}

/// Reads the spawned server's stderr (piped) until its ready line, which it returns; kills
/// the server and panics if it exits first.
pub fn wait_for_ready(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("gr00t-server ready on") => return l,
            Some(Ok(_)) => continue,
            other => {
                let _ = child.kill();
                panic!("server exited before ready: {other:?}");
            }
        }
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
