//! `/predict` overhead (as in `overhead`, seeded, overlapped decode) for a request that comes
//! after the process has been idle: a robot calling at 10–500 Hz, one request at a time, so
//! both cores have gone idle and the `beside` helper has parked before every frame.
//!
//! Back-to-back calls (the `overhead` bench) keep the helper spinning and the caches warm;
//! this is the other end. It is how the helper being queued on the caller's CPU after a
//! park was found (see `gr00t_runtime::beside`): 1.4–1.7 ms medians before, 0.35–0.57 ms after.
//!
//! `cargo bench -p gr00t-server --bench overhead_after_idle [-- ROUNDS]`

// This program's measurements and findings are its output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

fn main() {
    let rounds = common::rounds_arg(1000);
    let rt = common::replay_runtime();
    let seeded = common::case1_body(true);
    // The server's choice on a host with two or more cores.
    gr00t_runtime::preprocess::set_overlap_decode(true);
    println!("{rounds} calls each, µs       fastest   median      p90");
    for idle_ms in [0u64, 2, 10, 30] {
        let mut v = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            if idle_ms > 0 {
                std::thread::sleep(Duration::from_millis(idle_ms));
            }
            let t = Instant::now();
            let r = rt.predict_body(&seeded).unwrap();
            std::hint::black_box(serde_json::to_vec(&r).unwrap());
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        v.sort_by(f64::total_cmp);
        let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize];
        let label = if idle_ms == 0 {
            "back to back".to_string()
        } else {
            format!("after {idle_ms} ms idle")
        };
        println!("{label:24} {:8.1} {:8.1} {:8.1}", v[0], q(0.5), q(0.9));
    }
}
