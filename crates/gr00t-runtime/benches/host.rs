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
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden/gr00t-n16-tiny"
    ))
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

/// What the server runs per frame: PNG bytes to `pixel_values` (decode, then the chain).
#[divan::bench]
fn decode_preprocess_256(b: Bencher) {
    let png = std::fs::read(golden().join("case1/observation.png")).unwrap();
    b.bench(|| preprocess::decode_preprocess(divan::black_box(&png), &Default::default()).unwrap());
}

/// The same with the decode and the chain overlapped on two threads.
#[divan::bench]
fn decode_preprocess_overlapped_256(b: Bencher) {
    let png = std::fs::read(golden().join("case1/observation.png")).unwrap();
    b.bench(|| {
        preprocess::decode_preprocess_overlapped(divan::black_box(&png), &Default::default())
            .unwrap()
    });
}

/// The chain alone, output only.
#[divan::bench]
fn preprocess_pixels_256(b: Bencher) {
    let png = std::fs::read(golden().join("case1/observation.png")).unwrap();
    let img = preprocess::decode_image(&png).unwrap();
    b.bench(|| preprocess::preprocess_pixels(divan::black_box(&img), &Default::default()));
}

#[divan::bench]
fn prompt_ids(b: Bencher) {
    let tok = QwenTokenizer::from_dir(&golden().join("tokenizer")).unwrap();
    b.bench(|| {
        tok.prompt_ids(
            divan::black_box("pick up the red apple then place it in the basket"),
            &[81],
        )
        .unwrap()
    });
}

#[divan::bench]
fn randn_50x128(b: Bencher) {
    b.bench(|| gr00t_runtime::randn::randn(divan::black_box(42), 50 * 128));
}

#[divan::bench]
fn decode_actions(b: Bencher) {
    let p = Processor::load(&golden().join("case1"), "gr1").unwrap();
    let chunk = vec![0.1f32; 24 * 36];
    let state: BTreeMap<String, Vec<f32>> = p
        .state_groups
        .iter()
        .map(|g| (g.name.clone(), vec![0.2; g.dim]))
        .collect();
    b.bench(|| p.decode_actions(divan::black_box(&chunk), 36, &state));
}

fn golden_stage(name: &str, w: usize, h: usize) -> preprocess::RgbImage {
    let bytes = std::fs::read(golden().join("case1/taps.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    preprocess::RgbImage::new(w, h, st.tensor(name).unwrap().data().to_vec())
}

#[divan::bench]
fn cv_area_243_to_256(b: Bencher) {
    let img = golden_stage("input.image_cropped.0", 243, 243);
    b.bench(|| preprocess::cv_area::resize_area(divan::black_box(&img), 256, 256));
}

#[divan::bench]
fn pil_bicubic_256_to_252(b: Bencher) {
    let img = golden_stage("input.image_augmented.0", 256, 256);
    b.bench(|| preprocess::pil_bicubic::resize_bicubic(divan::black_box(&img), 252, 252));
}

#[divan::bench]
fn pil_bicubic_normalized_256_to_252(b: Bencher) {
    let img = golden_stage("input.image_augmented.0", 256, 256);
    b.bench(|| {
        preprocess::pil_bicubic::resize_bicubic_normalized(divan::black_box(&img), 252, 252)
    });
}

#[divan::bench]
fn normalize_252(b: Bencher) {
    let img = golden_stage("input.image_smart_resized.0", 252, 252);
    b.bench(|| preprocess::normalize_chw(divan::black_box(&img)));
}
