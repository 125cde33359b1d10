//! Host-side stages in isolation: PNG decode, the image chain, tokenization, randn, decoding.

use std::collections::BTreeMap;
use std::path::PathBuf;

use divan::Bencher;
use gr00t_runtime::preprocess;
use gr00t_runtime::processor::Processor;
use gr00t_runtime::tokenizer::QwenTokenizer;

fn main() {
    divan::main();
}

fn golden() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/golden/gr00t-n16-tiny"))
}

#[divan::bench]
fn png_decode_256(b: Bencher) {
    let png = std::fs::read(golden().join("case1/observation.png")).unwrap();
    b.bench(|| preprocess::decode_image(divan::black_box(&png)).unwrap());
}

#[divan::bench]
fn image_chain_256(b: Bencher) {
    let png = std::fs::read(golden().join("case1/observation.png")).unwrap();
    let img = preprocess::decode_image(&png).unwrap();
    b.bench(|| preprocess::preprocess(divan::black_box(&img), &Default::default()));
}

#[divan::bench]
fn prompt_ids(b: Bencher) {
    let tok = QwenTokenizer::from_dir(&golden().join("tokenizer")).unwrap();
    b.bench(|| tok.prompt_ids(divan::black_box("pick up the red apple then place it in the basket"), &[81]).unwrap());
}

#[divan::bench]
fn randn_50x128(b: Bencher) {
    b.bench(|| gr00t_runtime::randn::randn(divan::black_box(42), 50 * 128));
}

#[divan::bench]
fn decode_actions(b: Bencher) {
    let p = Processor::load(&golden().join("case1"), "gr1").unwrap();
    let chunk = vec![0.1f32; 24 * 36];
    let state: BTreeMap<String, Vec<f32>> = p.state_groups.iter().map(|g| (g.name.clone(), vec![0.2; g.dim])).collect();
    b.bench(|| p.decode_actions(divan::black_box(&chunk), 36, &state));
}
