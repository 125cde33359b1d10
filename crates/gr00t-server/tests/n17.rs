//! GR00T N1.7 served end to end on the tiny golden checkpoint (`shared/golden/gr00t-n17-tiny`):
//! `gr00t-server predict` and `POST /predict` return case1's decoded actions within the
//! golden tolerance (and `chunk`, the normalised model-space chunk); real-time chunking
//! round-trips `chunk`; bad RTC, history and noise shapes are 400s naming the field; a
//! `GR00T_VERSION` that contradicts the checkpoint refuses to boot.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine;
use gr00t_server::routes::router;
use gr00t_server::settings::Settings;
use gr00t_server::state::AppState;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::clean_env;
#[path = "../../gr00t-runtime/tests/n17_golden.rs"]
mod n17_golden;
use n17_golden::{assert_all_close, case_dir, processor_dir};

fn obs_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(case_dir().join("observation.json")).unwrap())
        .unwrap()
}

fn tag() -> String {
    obs_json()["embodiment_tag"].as_str().unwrap().to_owned()
}

/// case1 as a client sends it: each camera's PNG frames as a list (oldest first), each state
/// group's rows as a list, the raw instruction, the golden noise `[1, 40, 132]`.
fn case1_request() -> Value {
    let j = obs_json();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut images = serde_json::Map::new();
    for (cam, frames) in j["video_frames"].as_object().unwrap() {
        let list: Vec<String> = frames
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let p = case_dir().join(format!("observation.{}.png", f.as_str().unwrap()));
                b64.encode(std::fs::read(p).unwrap())
            })
            .collect();
        images.insert(cam.clone(), json!(list));
    }
    let mut state = serde_json::Map::new();
    for (g, v) in j["state_raw"].as_object().unwrap() {
        // [1, T, D] in the reference's batch form: the rows are [0].
        state.insert(g.clone(), v[0].clone());
    }
    let noise = &n17_golden::observation().f32s["noise"].1;
    let rows: Vec<Vec<f32>> = noise.chunks(132).map(<[f32]>::to_vec).collect();
    json!({
        "images": images,
        "state": state,
        "instruction": j["instruction_raw"],
        "noise": [rows],
    })
}

/// `[[f]]` -> row-major values.
fn flat(x: &Value) -> Vec<f32> {
    x.as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter())
        .map(|n| n.as_f64().unwrap() as f32)
        .collect()
}

/// (tap, got, golden) for every action group of `actions` against case1's `output.action.*`.
fn golden_action_pairs(actions: &Value) -> Vec<(String, Vec<f32>, Vec<f32>)> {
    let taps = n17_golden::taps();
    let actions = actions.as_object().expect("actions");
    let names: Vec<&String> = actions.keys().collect();
    assert_eq!(names, ["eef_9d", "gripper_position", "joint_position"]);
    actions
        .iter()
        .map(|(g, rows)| {
            let name = format!("output.action.{g}");
            let (shape, want) = &taps.f32s[&name];
            assert_eq!(rows.as_array().unwrap().len(), shape[1], "{name} steps");
            (name, flat(rows), want.clone())
        })
        .collect()
}

/// The response's actions against case1's `output.action.*`, its `chunk` against
/// `flow.action_pred`, within the golden tolerance.
fn assert_golden(v: &Value) {
    let taps = n17_golden::taps();
    let mut pairs = golden_action_pairs(&v["actions"]);
    let chunk = v["chunk"].as_array().expect("chunk");
    assert_eq!(chunk.len(), 40);
    assert!(chunk.iter().all(|r| r.as_array().unwrap().len() == 132));
    pairs.push((
        "flow.action_pred".into(),
        flat(&v["chunk"]),
        taps.f32s["flow.action_pred"].1.clone(),
    ));
    assert_all_close(pairs.iter().map(|(n, g, w)| (n.as_str(), &g[..], &w[..])));
    assert_eq!(v["action_horizon"], 40);
    assert_eq!(v["seq_len"], 279);
    assert_eq!(v["embodiment"], tag());
    assert_eq!(v["seed"], Value::Null);
}

fn settings(extra: &[(&str, &str)]) -> Settings {
    let t = tag();
    let mut vars: HashMap<String, String> = [("GR00T_EMBODIMENT", t.as_str())]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.entry("GR00T_WARMUP_RUNS".into())
        .or_insert_with(|| "0".into());
    Settings::from_vars(&vars).unwrap()
}

/// One N1.7 runtime shared by the tests of this file.
fn runtime() -> &'static Arc<gr00t_server::runtime::Runtime> {
    static RT: OnceLock<Arc<gr00t_server::runtime::Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        let rt = gr00t_server::boot::load_runtime(&settings(&[]), &case_dir(), &processor_dir())
            .expect("load the N1.7 runtime");
        Arc::new(rt)
    })
}

/// The N1.7 runtime, ready behind the router.
fn ready_state() -> AppState {
    let state = AppState::new();
    state.set_ready(runtime().clone(), None);
    state
}

#[test]
fn the_demo_and_the_boot_self_check_work_for_n17() {
    let rt = runtime();
    let demo = gr00t_server::demo::Demo::produce(rt, case1_request()).expect("demo");
    let pairs = golden_action_pairs(&demo.expected["actions"]);
    assert_all_close(pairs.iter().map(|(n, g, w)| (n.as_str(), &g[..], &w[..])));
    assert_eq!(demo.expected["produced_by"]["version"], "n17");
    let warm = settings(&[("GR00T_WARMUP_RUNS", "1")]);
    assert_eq!(warm.warmup_runs, 1);
    let pcc = gr00t_server::boot::warm_up(rt, &warm, Some(&demo)).expect("warm-up");
    assert!(pcc.is_some_and(|p| p > 0.999_999), "{pcc:?}");
}

async fn post(state: &AppState, path: &str, body: &Value) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(if path == "/info" { "GET" } else { "POST" })
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn predict_subcommand_returns_the_golden_actions() {
    let dir = std::env::temp_dir().join(format!("gr00t-n17-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let req = dir.join("req.json");
    std::fs::write(&req, serde_json::to_vec(&case1_request()).unwrap()).unwrap();
    let run = |version: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gr00t-server"));
        clean_env(&mut cmd).env("GR00T_EMBODIMENT", tag());
        if let Some(v) = version {
            cmd.env("GR00T_VERSION", v);
        }
        cmd.args(["predict", "--model-dir"])
            .arg(case_dir())
            .arg("--tokenizer-dir")
            .arg(processor_dir())
            .arg("--request")
            .arg(&req)
            .output()
            .unwrap()
    };
    for version in [None, Some("n17")] {
        let out = run(version);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_golden(&v);
    }
    // GR00T_VERSION=n16 against this N1.7 checkpoint: refused, both versions named.
    let out = run(Some("n16"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("GR00T_VERSION=n16") && err.contains("is n17"),
        "{err}"
    );
    // A bad request prints the 400 body and exits 2.
    let mut bad = case1_request();
    bad["state"]["gripper_position"] = json!([[0.1], [0.2]]);
    std::fs::write(&req, serde_json::to_vec(&bad).unwrap()).unwrap();
    let out = run(None);
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["field"], "state.gripper_position");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn http_predict_returns_the_golden_actions_and_serves_rtc() {
    let state = ready_state();
    let (s, v) = post(&state, "/predict", &case1_request()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_golden(&v);
    let (s, info) = post(&state, "/info", &json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (info["version"].as_str(), info["backend"].as_str()),
        (Some("n17"), Some("cpu"))
    );
    assert_eq!(info["embodiment_id"], 24);
    assert_eq!(
        info["n17"],
        json!({"frames_per_camera": 2, "state_history": 1, "chunk_shape": [40, 132]})
    );

    // RTC: the returned chunk continues; its frozen rows are the previous chunk's rows
    // h - overlap .. h - overlap + frozen, bit for bit.
    let previous = v["chunk"].clone();
    let mut req = case1_request();
    req["rtc"] = json!({"previous_chunk": previous, "overlap_steps": 10, "frozen_steps": 4});
    let (s, r) = post(&state, "/predict", &req).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    for row in 0..4 {
        assert_eq!(r["chunk"][row], previous[40 - 10 + row], "frozen row {row}");
    }
    assert_ne!(r["chunk"][20], previous[20]);

    // One image / one row where the embodiment takes one: a state row without the list.
    let mut req = case1_request();
    req["state"]["gripper_position"] = json!([0.27000001072883606]);
    let (s, r) = post(&state, "/predict", &req).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["actions"], v["actions"]);

    // Seeded: the server draws the noise (torch.randn of the seed) and says which seed.
    let mut req = case1_request();
    req.as_object_mut().unwrap().remove("noise");
    req["seed"] = json!(1703);
    let (s, r) = post(&state, "/predict", &req).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["seed"], 1703);
    let mut r = r;
    r["seed"] = Value::Null;
    assert_golden(&r);
}

#[tokio::test]
async fn bad_rtc_history_and_noise_are_400_naming_the_field() {
    let state = ready_state();
    let chunk = |rows: usize| json!(vec![vec![0.0f32; 132]; rows]);
    let rtc = |r: Value| {
        let mut req = case1_request();
        req["rtc"] = r;
        req
    };
    let with = |f: &dyn Fn(&mut Value)| {
        let mut req = case1_request();
        f(&mut req);
        req
    };
    let cases: Vec<(Value, &str)> = vec![
        // RTC: wrong shape, frozen > overlap, overlap > h, h out of range, a bad ramp.
        (
            rtc(json!({"previous_chunk": chunk(39), "overlap_steps": 4})),
            "rtc.previous_chunk",
        ),
        (
            rtc(json!({"previous_chunk": [vec![vec![0.0f32; 131]; 40]], "overlap_steps": 4})),
            "rtc.previous_chunk[0]",
        ),
        (rtc(json!({"overlap_steps": 4})), "rtc.previous_chunk"),
        (
            rtc(json!({"previous_chunk": chunk(40), "overlap_steps": 4, "frozen_steps": 5})),
            "rtc.frozen_steps",
        ),
        (
            rtc(json!({"previous_chunk": chunk(40), "overlap_steps": 41})),
            "rtc.overlap_steps",
        ),
        (
            with(&|r| {
                r["rtc"] = json!({"previous_chunk": chunk(40), "overlap_steps": 12});
                r["action_horizon"] = json!(10);
            }),
            "rtc.overlap_steps",
        ),
        (
            with(&|r| {
                r["rtc"] = json!({"previous_chunk": chunk(40), "overlap_steps": 2});
                r["action_horizon"] = json!(41);
            }),
            "action_horizon",
        ),
        (
            rtc(json!({"previous_chunk": chunk(40), "overlap_steps": 4, "ramp_rate": 0.0})),
            "rtc.ramp_rate",
        ),
        (rtc(json!([1, 2])), "rtc"),
        // History: frames per camera and rows per state group (oldest first), row widths.
        (
            with(&|r| {
                r["images"]["wrist_image_left"]
                    .as_array_mut()
                    .unwrap()
                    .pop();
            }),
            "images.wrist_image_left",
        ),
        (
            with(&|r| {
                let f = r["images"]["exterior_image_1_left"][0].clone();
                r["images"]["exterior_image_1_left"] = f;
            }),
            "images.exterior_image_1_left",
        ),
        (
            with(&|r| r["images"]["wrist_image_left"][1] = json!("@@@")),
            "images.wrist_image_left[1]",
        ),
        (
            with(&|r| {
                r["images"]
                    .as_object_mut()
                    .unwrap()
                    .remove("wrist_image_left");
            }),
            "images.wrist_image_left",
        ),
        (
            with(&|r| {
                let row = r["state"]["eef_9d"][0].clone();
                r["state"]["eef_9d"] = json!([row.clone(), row]);
            }),
            "state.eef_9d",
        ),
        (
            with(&|r| r["state"]["joint_position"] = json!([[1.0, 2.0]])),
            "state.joint_position[0]",
        ),
        (
            with(&|r| r["state"]["joint_position"][0][3] = json!("x")),
            "state.joint_position[0][3]",
        ),
        // Noise: [1, 40, 132] or [40, 132] only; not beside a seed.
        (
            with(&|r| r["noise"] = json!([vec![vec![0.0f32; 132]; 16]])),
            "noise",
        ),
        (with(&|r| r["seed"] = json!(3)), "noise"),
        (with(&|r| r["instruction"] = json!(5)), "instruction"),
    ];
    for (body, field) in cases {
        let (s, v) = post(&state, "/predict", &body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{field}: {v}");
        assert_eq!(v["field"], field, "{v}");
    }
}

#[test]
fn a_contradicting_version_or_a_device_backend_refuses_to_boot() {
    let load = |extra: &[(&str, &str)]| {
        gr00t_server::boot::load_runtime(&settings(extra), &case_dir(), &processor_dir())
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default()
    };
    let e = load(&[("GR00T_VERSION", "n16")]);
    assert!(
        e.contains("GR00T_VERSION=n16") && e.contains("is n17"),
        "{e}"
    );
    let e = load(&[("GR00T_DIT_BACKEND", "megakernel")]);
    assert!(e.contains("GR00T_DIT_BACKEND=megakernel"), "{e}");
    // An embodiment the checkpoint does not have is named.
    let e = gr00t_server::boot::load_runtime(
        &Settings::from_vars(
            &[("GR00T_EMBODIMENT", "no_such_robot")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap(),
        &case_dir(),
        &processor_dir(),
    )
    .err()
    .map(|e| format!("{e:#}"))
    .unwrap_or_default();
    assert!(e.contains("no_such_robot"), "{e}");
    // The N1.6 checkpoint under GR00T_VERSION=n17 is refused the same way.
    let n16 = crate::common::case1();
    let e = gr00t_server::boot::load_runtime(
        &settings(&[("GR00T_VERSION", "n17")]),
        &n16,
        &crate::common::tok_dir(),
    )
    .err()
    .map(|e| format!("{e:#}"))
    .unwrap_or_default();
    assert!(
        e.contains("GR00T_VERSION=n17") && e.contains("is n16"),
        "{e}"
    );
}
