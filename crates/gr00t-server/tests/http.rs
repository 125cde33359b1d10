//! HTTP API tests: requests go through the real axum router (`tower::ServiceExt::oneshot`).

use crate::common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine;
use common::*;
use gr00t_server::routes::router;
use gr00t_server::state::{AppState, MAX_BODY_BYTES};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn call(state: &AppState, method: &str, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("non-JSON body: {}", String::from_utf8_lossy(&bytes)));
    (status, v)
}

async fn predict(state: &AppState, body: &Value) -> (StatusCode, Value) {
    call(state, "POST", "/predict", serde_json::to_vec(body).unwrap()).await
}

#[tokio::test]
async fn not_ready_answers_503() {
    let state = AppState::new();
    let (s, v) = call(&state, "GET", "/health", vec![]).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(v["status"], "starting");
    let (s, v) = predict(&state, &case1_request()).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert!(v["error"].as_str().unwrap().contains("loading"));
    let (s, _) = call(&state, "GET", "/info", vec![]).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    state.set_failed("weights missing".into());
    let (s, v) = call(&state, "GET", "/health", vec![]).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(v["status"], "failed");
    assert_eq!(v["error"], "weights missing");
}

#[tokio::test]
async fn predict_returns_the_golden_actions() {
    let state = ready_state();
    let (s, v) = call(&state, "GET", "/health", vec![]).await;
    assert_eq!((s, v["status"].as_str()), (StatusCode::OK, Some("ready")));
    assert_eq!(v["queued"], 0, "nobody waits for the device: {v}");
    let (s, v) = predict(&state, &case1_request()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(max_action_err(&v["actions"]) <= 1e-5);
    assert_eq!(v["action_horizon"], 16);
    assert_eq!(v["embodiment"], "gr1");
    assert_eq!(v["seq_len"], 115);
    assert_eq!(v["seed"], Value::Null);
    for k in ["decode", "encode", "device", "decode_actions", "total"] {
        assert!(v["timing_ms"][k].as_f64().unwrap() >= 0.0, "{k}");
    }
    assert!(v.get("actions_normalized").is_none());
    // Group order is the modality order.
    let keys: Vec<&String> = v["actions"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 5);
    // Seeded (default 42), [1,24,36] accepted as [24,36] too, normalized output on request.
    let mut req = case1_request();
    req.as_object_mut().unwrap().remove("noise");
    req["return_normalized"] = json!(true);
    let (s, v) = predict(&state, &req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["seed"], 42);
    assert_eq!(
        v["actions_normalized"]["waist"].as_array().unwrap().len(),
        16
    );
    let mut req = case1_request();
    req["noise"] = req["noise"][0].clone();
    req["extra_key_is_ignored"] = json!(1);
    let (s, _) = predict(&state, &req).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn info_demo_models_and_unknown_routes() {
    let state = ready_state();
    let (s, v) = call(&state, "GET", "/info", vec![]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["version"], "n16");
    assert_eq!(v["embodiment"], "gr1");
    assert_eq!(v["layout"], "gr1");
    assert_eq!(v["backend"], "golden-replay");
    assert_eq!(v["stage"], "cpu-reference");
    assert!(v.get("weights_revision").is_some());
    // A host-only backend has no device traffic to show.
    assert!(v["device"].is_null(), "{v}");
    let (s, v) = call(&state, "GET", "/demo", vec![]).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["request"]["images"]["ego_view_bg_crop_pad_res256_freq20"].is_string());
    assert_eq!(
        v["expected"]["actions"]["waist"].as_array().unwrap().len(),
        16
    );
    let (s, v) = call(&state, "GET", "/v1/models", vec![]).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["data"][0]["id"], "nvidia/GR00T-N1.6-3B");
    let (s, _) = call(&state, "GET", "/nope", vec![]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

fn png(w: u32, h: u32) -> String {
    let img = image::RgbImage::from_pixel(w, h, image::Rgb([10, 20, 30]));
    let mut out = std::io::Cursor::new(vec![]);
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    base64::engine::general_purpose::STANDARD.encode(out.into_inner())
}

/// Every bad input is a 400 whose JSON names the field.
#[tokio::test]
async fn bad_inputs_are_400_naming_the_field() {
    let state = ready_state();
    const CAM: &str = "ego_view_bg_crop_pad_res256_freq20";
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "images.front",
            Box::new(|r| r["images"]["front"] = r["images"][CAM].clone()),
        ),
        (
            "images.ego_view_bg_crop_pad_res256_freq20",
            Box::new(|r| {
                r["images"].as_object_mut().unwrap().clear();
            }),
        ),
        (
            "images.ego_view_bg_crop_pad_res256_freq20",
            Box::new(|r| r["images"][CAM] = json!("%%%not base64%%%")),
        ),
        (
            "images.ego_view_bg_crop_pad_res256_freq20",
            Box::new(|r| {
                r["images"][CAM] =
                    json!(base64::engine::general_purpose::STANDARD.encode(b"GIF89a...."))
            }),
        ),
        (
            "images.ego_view_bg_crop_pad_res256_freq20",
            Box::new(|r| {
                r["images"][CAM] = json!(
                    base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\ntruncated")
                )
            }),
        ),
        (
            "images.ego_view_bg_crop_pad_res256_freq20",
            Box::new(|r| r["images"][CAM] = json!(png(5000, 2))),
        ),
        (
            "images.ego_view_bg_crop_pad_res256_freq20",
            Box::new(|r| r["images"][CAM] = json!(7)),
        ),
        ("images", Box::new(|r| r["images"] = json!("x"))),
        (
            "state.waist",
            Box::new(|r| {
                r["state"].as_object_mut().unwrap().remove("waist");
            }),
        ),
        (
            "state.tail",
            Box::new(|r| r["state"]["tail"] = json!([1.0])),
        ),
        (
            "state.left_arm",
            Box::new(|r| r["state"]["left_arm"] = json!([1.0, 2.0])),
        ),
        (
            "state.left_arm[0]",
            Box::new(|r| r["state"]["left_arm"][0] = json!(1e39)),
        ),
        (
            "state.left_arm[2]",
            Box::new(|r| r["state"]["left_arm"][2] = json!("NaN")),
        ),
        (
            "state.left_arm",
            Box::new(|r| r["state"]["left_arm"] = json!(3)),
        ),
        (
            "instruction",
            Box::new(|r| r["instruction"] = json!("pick ".repeat(40))),
        ),
        (
            "instruction",
            Box::new(|r| {
                r.as_object_mut().unwrap().remove("instruction");
            }),
        ),
        ("instruction", Box::new(|r| r["instruction"] = json!(["a"]))),
        (
            "noise",
            Box::new(|r| r["noise"] = json!(vec![vec![0.0; 36]; 23])),
        ),
        (
            "noise",
            Box::new(|r| r["noise"] = json!(vec![vec![vec![0.0; 35]; 24]])),
        ),
        ("noise", Box::new(|r| r["noise"] = json!([[0.0, [1.0]]]))),
        ("noise", Box::new(|r| r["noise"][0][0][0] = json!(1e300))),
        ("noise", Box::new(|r| r["seed"] = json!(3))),
        (
            "seed",
            Box::new(|r| {
                r.as_object_mut().unwrap().remove("noise");
                r["seed"] = json!(-1);
            }),
        ),
        (
            "return_normalized",
            Box::new(|r| r["return_normalized"] = json!("yes")),
        ),
    ];
    for (field, edit) in &cases {
        let mut req = case1_request();
        edit(&mut req);
        let (s, v) = predict(&state, &req).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{field}: {v}");
        assert_eq!(v["field"], *field, "{v}");
        assert!(!v["error"].as_str().unwrap().is_empty());
    }
    for body in [
        b"not json".to_vec(),
        b"[1,2]".to_vec(),
        vec![],
        b"{\"images\":".to_vec(),
    ] {
        let (s, v) = call(&state, "POST", "/predict", body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert!(v["field"].is_string(), "{v}");
    }
    // The server keeps serving after all of that.
    let (s, _) = predict(&state, &case1_request()).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn oversized_body_is_413() {
    let state = ready_state();
    let body = vec![b' '; MAX_BODY_BYTES + 1];
    let (s, v) = call(&state, "POST", "/predict", body).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert!(v["error"].as_str().unwrap().contains("larger than"));
}

#[test]
fn warm_up_checks_pcc_against_the_demo() {
    let rt = replay_runtime();
    let s = settings();
    let p = gr00t_server::boot::warm_up(&rt, &s, Some(&case1_demo()))
        .unwrap()
        .unwrap();
    assert!(p > 0.999_999, "{p}");
    // A golden that disagrees fails the boot with the measured PCC.
    let mut bad = case1_demo();
    for g in GROUPS {
        for row in bad.expected["actions"][g].as_array_mut().unwrap() {
            for x in row.as_array_mut().unwrap() {
                *x = json!(-x.as_f64().unwrap());
            }
        }
    }
    let e = gr00t_server::boot::warm_up(&rt, &s, Some(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("warm-up PCC") && e.contains("below GR00T_WARMUP_PCC_MIN"),
        "{e}"
    );
    // PCC_MIN set but no demo: refuse.
    assert!(gr00t_server::boot::warm_up(&rt, &s, None).is_err());
}
