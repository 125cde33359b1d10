//! Server-side overhead of one `/predict` excluding the model: JSON parse + base64 + PNG decode
//! (256×256) + preprocessing + tokenization + noise + action decoding + JSON encode. The
//! forward is the test-only golden replay policy (returns a fixed chunk, ~0 cost).

#[path = "../tests/common/mod.rs"]
mod common;

use divan::Bencher;

fn main() {
    divan::main();
}

fn body(seeded: bool) -> Vec<u8> {
    let mut req = common::case1_request();
    if seeded {
        req.as_object_mut().unwrap().remove("noise");
    }
    serde_json::to_vec(&req).unwrap()
}

#[divan::bench(args = [true, false])]
fn predict_overhead(b: Bencher, seeded: bool) {
    let rt = common::replay_runtime();
    let body = body(seeded);
    b.bench(|| {
        let r = rt.predict_body(divan::black_box(&body)).unwrap();
        serde_json::to_vec(&r).unwrap()
    });
}
