//! Server-side overhead of one `/predict` excluding the model: JSON parse + base64 + PNG decode
//! (256×256) + preprocessing + tokenization + noise + action decoding + JSON encode. The
//! forward is the test-only golden replay policy (returns a fixed chunk, ~0 cost).

#[path = "../tests/common/mod.rs"]
mod common;

use divan::Bencher;

fn main() {
    divan::main();
}

/// Decode and image chain one after the other on the request's thread.
#[divan::bench(args = [true, false])]
fn predict_overhead(b: Bencher, seeded: bool) {
    let rt = common::replay_runtime();
    // After the boot's choice (it turns the overlap on when a second core exists).
    gr00t_runtime::preprocess::set_overlap_decode(false);
    let body = common::case1_body(seeded);
    b.bench(|| {
        let r = rt.predict_body(divan::black_box(&body)).unwrap();
        serde_json::to_vec(&r).unwrap()
    });
}

/// The same with the PNG inflate overlapped with the image chain on a second thread
/// (`gr00t_runtime::preprocess::set_overlap_decode`): the latency a host with a spare core gets.
#[divan::bench(args = [true, false])]
fn predict_overhead_overlapped(b: Bencher, seeded: bool) {
    let rt = common::replay_runtime();
    gr00t_runtime::preprocess::set_overlap_decode(true);
    let body = common::case1_body(seeded);
    b.bench(|| {
        let r = rt.predict_body(divan::black_box(&body)).unwrap();
        serde_json::to_vec(&r).unwrap()
    });
    gr00t_runtime::preprocess::set_overlap_decode(false);
}

/// The request's JSON parse alone (the seeded case1 body; the image string is borrowed).
#[divan::bench]
fn parse_request(b: Bencher) {
    let body = common::case1_body(true);
    b.bench(|| {
        gr00t_server::api::PredictRequest::parse(divan::black_box(&body))
            .unwrap()
            .images
            .len()
    });
}

/// The parse of a body carrying full-size noise (50×128 values as a Python client prints
/// float32 samples: ~17 significant digits each), the parity-check form of a request.
#[divan::bench]
fn parse_request_noise_50x128(b: Bencher) {
    let mut req = common::case1_request();
    let mut s = 12345u64;
    let noise: Vec<Vec<f64>> = (0..50)
        .map(|_| {
            (0..128)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (((s >> 40) as f64 / (1u64 << 24) as f64 - 0.5) * 4.0) as f32 as f64
                })
                .collect()
        })
        .collect();
    req["noise"] = serde_json::json!(noise);
    let body = serde_json::to_vec(&req).unwrap();
    b.bench(|| {
        gr00t_server::api::PredictRequest::parse(divan::black_box(&body))
            .unwrap()
            .noise
            .is_some()
    });
}

/// Parse plus base64 decode of the frame (`into_observation`).
#[divan::bench]
fn parse_and_base64(b: Bencher) {
    let body = common::case1_body(true);
    b.bench(|| {
        let req = gr00t_server::api::PredictRequest::parse(divan::black_box(&body)).unwrap();
        req.into_observation().unwrap().0.images.len()
    });
}

/// The response's JSON encode alone.
#[divan::bench]
fn encode_response(b: Bencher) {
    let rt = common::replay_runtime();
    let r = rt.predict_body(&common::case1_body(true)).unwrap();
    b.bench(|| serde_json::to_vec(divan::black_box(&r)).unwrap());
}
