//! `/predict` overhead, each variant interleaved with the others and with a fixed reference
//! workload, one call of each per round.
//!
//! The shared 2-core VM's speed drifts by ±40 % over minutes, so variants measured one after
//! the other (as divan does) are not comparable. Here every round runs each variant once, so
//! they see the same machine; the reference (inflating the same PNG alone, the serial floor of
//! the decode) tells how fast the machine was during the run.
//!
//! `cargo bench -p gr00t-server --bench overhead_interleaved [-- ROUNDS]`

// This program's measurements and findings are its output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

fn main() {
    let rounds = common::rounds_arg(2000);
    let rt = common::replay_runtime();
    let seeded = common::case1_body(true);
    let noise = common::case1_body(false);
    let png = std::fs::read(common::case1().join("observation.png")).unwrap();
    let predict = |body: &[u8], overlap: bool| {
        gr00t_runtime::preprocess::set_overlap_decode(overlap);
        let t = Instant::now();
        let r = rt.predict_body(body).unwrap();
        std::hint::black_box(serde_json::to_vec(&r).unwrap());
        t.elapsed()
    };
    let reference = || {
        let t = Instant::now();
        let p = gr00t_runtime::preprocess::png_rgb8::parse_png_rgb8(&png, 4096).unwrap();
        p.inflate_rows(usize::MAX, |rows| {
            std::hint::black_box(rows);
        })
        .unwrap();
        t.elapsed()
    };
    let names = [
        "overlapped, seeded",
        "overlapped, noise",
        "sequential, seeded",
        "sequential, noise",
        "reference: inflate alone",
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); names.len()];
    for _ in 0..rounds {
        let t = [
            predict(&seeded, true),
            predict(&noise, true),
            predict(&seeded, false),
            predict(&noise, false),
            reference(),
        ];
        for (v, d) in times.iter_mut().zip(t) {
            v.push(d.as_secs_f64() * 1e6);
        }
    }
    gr00t_runtime::preprocess::set_overlap_decode(false);
    for v in &mut times {
        v.sort_by(f64::total_cmp);
    }
    let q = |v: &[f64], f: f64| v[((v.len() - 1) as f64 * f) as usize];
    let ref_med = q(&times[names.len() - 1], 0.5);
    println!("{rounds} rounds, µs            fastest   median      p90   median/reference");
    for (name, v) in names.iter().zip(&times) {
        println!(
            "{name:26} {:8.1} {:8.1} {:8.1}   {:5.2}",
            v[0],
            q(v, 0.5),
            q(v, 0.9),
            q(v, 0.5) / ref_med
        );
    }
}
