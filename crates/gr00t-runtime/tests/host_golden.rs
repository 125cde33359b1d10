//! Host-side golden comparisons: image chain (every uint8 stage and pixel_values, bit-exact),
//! tokenizer (every case of tokenizer_cases.json and the case1 prompt), state encoding, action
//! decoding and torch.randn.

use std::collections::BTreeMap;
use std::path::PathBuf;

use gr00t_runtime::policy::ActionChunk;
use gr00t_runtime::preprocess::{self, RgbImage};
use gr00t_runtime::processor::Processor;
use gr00t_runtime::randn;
use gr00t_runtime::request::{HostPipeline, NoiseSource, Observation};
use gr00t_runtime::tokenizer::{self, QwenTokenizer};
use safetensors::{Dtype, SafeTensors};

fn golden() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden"
    ))
}
fn case1() -> PathBuf {
    golden().join("gr00t-n16-tiny/case1")
}
fn tok_dir() -> PathBuf {
    golden().join("gr00t-n16-tiny/tokenizer")
}

struct Taps(Vec<u8>);
impl Taps {
    fn load(name: &str) -> Self {
        Taps(std::fs::read(case1().join(name)).unwrap())
    }
    fn st(&self) -> SafeTensors<'_> {
        SafeTensors::deserialize(&self.0).unwrap()
    }
    fn u8(&self, name: &str) -> (Vec<usize>, Vec<u8>) {
        let st = self.st();
        let t = st.tensor(name).unwrap();
        assert_eq!(t.dtype(), Dtype::U8, "{name}");
        (t.shape().to_vec(), t.data().to_vec())
    }
    fn f32(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
        let st = self.st();
        let t = st.tensor(name).unwrap();
        assert_eq!(t.dtype(), Dtype::F32, "{name}");
        (
            t.shape().to_vec(),
            t.data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
        )
    }
    fn i64(&self, name: &str) -> Vec<i64> {
        let st = self.st();
        let t = st.tensor(name).unwrap();
        assert_eq!(t.dtype(), Dtype::I64, "{name}");
        t.data()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }
}

fn assert_image(name: &str, got: &RgbImage, want: &(Vec<usize>, Vec<u8>)) {
    assert_eq!(vec![got.height, got.width, 3], want.0, "{name} shape");
    let diff = got.data.iter().zip(&want.1).filter(|(a, b)| a != b).count();
    assert_eq!(diff, 0, "{name}: {diff} of {} bytes differ", want.1.len());
}

#[test]
fn image_chain_matches_every_golden_tap_bit_exactly() {
    let taps = Taps::load("taps.safetensors");
    let png = std::fs::read(case1().join("observation.png")).unwrap();
    let img = preprocess::decode_image(&png).unwrap();
    let obs = Taps::load("observation.safetensors");
    let (_, raw) = obs.u8("video.ego_view_bg_crop_pad_res256_freq20");
    assert_eq!(img.data, raw, "PNG decode differs from the reference frame");
    let pre = preprocess::preprocess(&img, &Default::default());
    assert_image(
        "letterboxed",
        &pre.letterboxed,
        &taps.u8("input.image_letterboxed.0"),
    );
    assert_image(
        "resized1",
        &pre.resized1,
        &taps.u8("input.image_resized1.0"),
    );
    assert_image("cropped", &pre.cropped, &taps.u8("input.image_cropped.0"));
    assert_image(
        "augmented",
        &pre.augmented,
        &taps.u8("input.image_augmented.0"),
    );
    assert_image(
        "smart_resized",
        &pre.smart_resized,
        &taps.u8("input.image_smart_resized.0"),
    );
    let (shape, pv) = taps.f32("input.pixel_values");
    assert_eq!(shape, vec![1, 3, 252, 252]);
    assert_eq!(pre.pixel_values.len(), pv.len());
    let bad = pre
        .pixel_values
        .iter()
        .zip(&pv)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    assert_eq!(bad, 0, "pixel_values: {bad} values differ bitwise");
}

/// Each stage on its own golden input (so a failure points at one kernel).
#[test]
fn each_resize_kernel_matches_on_its_golden_input() {
    let taps = Taps::load("taps.safetensors");
    let (s, c) = taps.u8("input.image_cropped.0");
    let cropped = RgbImage::new(s[1], s[0], c);
    let up = preprocess::cv_area::resize_area(&cropped, 256, 256);
    assert_image(
        "cv INTER_AREA 243->256",
        &up,
        &taps.u8("input.image_augmented.0"),
    );
    let (s, a) = taps.u8("input.image_augmented.0");
    let aug = RgbImage::new(s[1], s[0], a);
    let down = preprocess::pil_bicubic::resize_bicubic(&aug, 252, 252);
    assert_image(
        "PIL BICUBIC 256->252",
        &down,
        &taps.u8("input.image_smart_resized.0"),
    );
}

#[test]
fn image_chain_is_general_over_input_sizes() {
    // Non-square, smaller and larger frames all end at 256 -> 252 (81 tokens), as the letterbox
    // and the two SmallestMaxSize steps guarantee.
    for (w, h) in [
        (320, 240),
        (100, 60),
        (640, 480),
        (512, 512),
        (257, 300),
        (31, 1),
        (1000, 750),
    ] {
        let data: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7919) % 251) as u8).collect();
        let img = RgbImage::new(w, h, data);
        let pre = preprocess::preprocess(&img, &Default::default());
        let m = w.max(h);
        assert_eq!((pre.letterboxed.width, pre.letterboxed.height), (m, m));
        assert_eq!(
            (pre.resized1.width, pre.resized1.height),
            (256, 256),
            "{w}x{h}"
        );
        assert_eq!((pre.cropped.width, pre.cropped.height), (243, 243));
        assert_eq!(
            (pre.smart_resized.width, pre.smart_resized.height),
            (252, 252)
        );
        assert_eq!(pre.pixel_values.len(), 3 * 252 * 252);
    }
    // Letterbox geometry: content centred, zeros around it.
    let img = RgbImage::new(4, 2, vec![9; 24]);
    let lb = preprocess::letterbox(&img);
    assert_eq!((lb.width, lb.height), (4, 4));
    assert_eq!(&lb.data[..12], &[0; 12], "top row is padding");
    assert_eq!(
        &lb.data[12..24],
        &[9; 12],
        "content starts at row (4-2)/2 = 1"
    );
    // Area shrink by 2 is the rounded 2x2 average; a constant image stays constant at any scale.
    let img = RgbImage::new(2, 2, vec![0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0]);
    assert_eq!(
        preprocess::cv_area::resize_area(&img, 1, 1).data,
        vec![1, 1, 1],
        "(0+1+1+0+2)>>2"
    );
    let flat = RgbImage::new(300, 200, vec![77; 300 * 200 * 3]);
    for (w, h) in [(256, 171), (100, 50), (450, 400), (300, 100)] {
        assert!(
            preprocess::cv_area::resize_area(&flat, w, h)
                .data
                .iter()
                .all(|&v| v == 77),
            "{w}x{h}"
        );
        assert!(
            preprocess::pil_bicubic::resize_bicubic(&flat, w, h)
                .data
                .iter()
                .all(|&v| v == 77),
            "{w}x{h}"
        );
    }
    assert_eq!(preprocess::smart_resize(256, 256), (252, 252));
    assert_eq!(preprocess::smart_resize(480, 640), (476, 644));
    assert_eq!(preprocess::smart_resize(10, 10), (56, 56));
}

#[derive(serde::Deserialize)]
struct TokCases {
    cases: Vec<TokCase>,
}
#[derive(serde::Deserialize)]
struct TokCase {
    name: String,
    text: String,
    ids: Vec<u32>,
    decode: String,
}

#[test]
fn tokenizer_matches_every_golden_case() {
    let tok = QwenTokenizer::from_dir(&tok_dir()).unwrap();
    let text =
        std::fs::read_to_string(golden().join("gr00t-n16-tiny/tokenizer_cases.json")).unwrap();
    let cases: TokCases = serde_json::from_str(&text).unwrap();
    assert_eq!(cases.cases.len(), 33);
    let mut failures = vec![];
    for c in &cases.cases {
        let ids = tok.encode(&c.text).unwrap();
        if ids != c.ids {
            failures.push(format!("{}: ids {:?} != {:?}", c.name, ids, c.ids));
        }
        let dec = tok.decode(&c.ids).unwrap();
        if dec != c.decode {
            failures.push(format!("{}: decode {:?} != {:?}", c.name, dec, c.decode));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[derive(serde::Deserialize)]
struct ObsJson {
    instruction: String,
    instruction_formalized: String,
    chat_text: String,
    expanded_text: String,
    state: BTreeMap<String, Vec<f64>>,
}

fn obs_json() -> ObsJson {
    serde_json::from_str(&std::fs::read_to_string(case1().join("observation.json")).unwrap())
        .unwrap()
}

#[test]
fn case1_prompt_gives_the_golden_input_ids() {
    let tok = QwenTokenizer::from_dir(&tok_dir()).unwrap();
    let obs = obs_json();
    assert_eq!(
        tokenizer::formalize_instruction(&obs.instruction),
        obs.instruction_formalized
    );
    let text = tokenizer::prompt_text(&obs.instruction_formalized, &[81]);
    assert_eq!(text, obs.expanded_text);
    let expanded = format!("<image 1><img>{}</img>", "<IMG_CONTEXT>".repeat(81));
    assert_eq!(
        obs.chat_text.replace("<image-1>", &expanded),
        text,
        "chat template + placeholder expansion"
    );
    let want: Vec<u32> = Taps::load("taps.safetensors")
        .i64("input.input_ids")
        .iter()
        .map(|&v| v as u32)
        .collect();
    assert_eq!(want.len(), 115);
    assert_eq!(tok.encode(&text).unwrap(), want, "full prompt text");
    assert_eq!(
        tok.prompt_ids(&obs.instruction_formalized, &[81]).unwrap(),
        want,
        "spliced fast path"
    );
    // The fast path equals full-text encoding for awkward instructions and several cameras too.
    for instr in [
        "",
        " lead space",
        "trail space ",
        "two\n\nlines",
        "数字 123 ümlaut",
        "a  b\t",
        "\n",
    ] {
        for cams in [vec![81], vec![81, 81], vec![4, 9, 81]] {
            assert_eq!(
                tok.prompt_ids(instr, &cams).unwrap(),
                tok.encode(&tokenizer::prompt_text(instr, &cams)).unwrap(),
                "{instr:?} {cams:?}"
            );
        }
    }
}

#[test]
fn formalize_follows_python_re_semantics() {
    assert_eq!(
        tokenizer::formalize_instruction("Pick up the RED apple, then place it!"),
        "pick up the red apple then place it"
    );
    assert_eq!(
        tokenizer::formalize_instruction("  Über-große Äpfel_2  "),
        "  übergroße äpfel_2  "
    );
    assert_eq!(
        tokenizer::formalize_instruction("tab\there\u{1c}"),
        "tab\there\u{1c}"
    );
    assert_eq!(tokenizer::formalize_instruction("Ⓐ½e\u{301}"), "½e");
}

fn processor() -> Processor {
    Processor::load(&case1(), "gr1").unwrap()
}

fn golden_raw_state() -> BTreeMap<String, Vec<f32>> {
    let obs = Taps::load("observation.safetensors");
    ["left_arm", "right_arm", "left_hand", "right_hand", "waist"]
        .iter()
        .map(|g| (g.to_string(), obs.f32(&format!("state.{g}")).1))
        .collect()
}

#[test]
fn state_encoding_matches_golden_input_state() {
    let p = processor();
    assert_eq!(p.embodiment_id, 20);
    assert_eq!(p.encoded_state_dim(), 58);
    let got = p.encode_state(&golden_raw_state());
    let (shape, want) = Taps::load("taps.safetensors").f32("input.state");
    assert_eq!(shape, vec![1, 1, 64]);
    assert_eq!(got.len(), 64);
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!((a - b).abs() <= 1e-6, "state[{i}]: {a} vs {b}");
    }
    assert!(got[58..].iter().all(|&v| v == 0.0));
    assert_eq!(
        Taps::load("taps.safetensors").i64("input.embodiment_id"),
        vec![20]
    );
}

#[test]
fn action_decoding_matches_golden_physical_actions() {
    let p = processor();
    let taps = Taps::load("taps.safetensors");
    let (shape, pred) = taps.f32("flow.action_pred");
    assert_eq!(shape, vec![1, 24, 36]);
    let raw = golden_raw_state();
    let normalized = p.split_normalized(&pred, 36);
    for (g, rows) in &normalized {
        let (_, want) = taps.f32(&format!("decode.normalized.{g}"));
        assert_eq!(rows.concat(), want, "normalized slice {g}");
    }
    let actions = p.decode_actions(&pred, 36, &raw);
    assert_eq!(
        actions.iter().map(|(g, _)| g.as_str()).collect::<Vec<_>>(),
        ["left_arm", "right_arm", "left_hand", "right_hand", "waist"]
    );
    for (g, rows) in &actions {
        let (shape, want) = taps.f32(&format!("output.action.{g}"));
        assert_eq!(shape[1], rows.len());
        for (i, (a, b)) in rows.concat().iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-5, "{g}[{i}]: {a} vs {b}");
        }
    }
}

/// The whole host pipeline on case1: PNG bytes + JSON state + raw instruction -> ModelInputs
/// equal to the reference inputs; the golden chunk decodes to the golden actions.
#[test]
fn host_pipeline_builds_the_reference_model_inputs() {
    let pipe = HostPipeline::new(
        processor(),
        QwenTokenizer::from_dir(&tok_dir()).unwrap(),
        (24, 36, 64),
        Some(24),
    )
    .unwrap();
    let obs = obs_json();
    let taps = Taps::load("taps.safetensors");
    let (_, noise) = Taps::load("observation.safetensors").f32("noise");
    let request = Observation {
        images: [(
            "ego_view_bg_crop_pad_res256_freq20".to_string(),
            std::fs::read(case1().join("observation.png")).unwrap(),
        )]
        .into(),
        state: obs.state.clone(),
        instruction: obs.instruction.clone(),
        noise: NoiseSource::Given {
            shape: vec![1, 24, 36],
            values: noise.iter().map(|&v| v as f64).collect(),
        },
    };
    let prepared = pipe.prepare(&request).unwrap();
    assert_eq!(prepared.seq_len, 115);
    let ids: Vec<u32> = taps
        .i64("input.input_ids")
        .iter()
        .map(|&v| v as u32)
        .collect();
    assert_eq!(prepared.inputs.input_ids, ids);
    assert_eq!(
        prepared.inputs.pixel_values[0],
        taps.f32("input.pixel_values").1
    );
    assert_eq!(prepared.inputs.image_hw, (252, 252));
    assert_eq!(prepared.inputs.embodiment_id, 20);
    assert_eq!(prepared.inputs.noise, noise);
    assert_eq!(pipe.instruction_tokens(prepared.seq_len), 11);
    let (_, pred) = taps.f32("flow.action_pred");
    let chunk = ActionChunk {
        horizon: 24,
        dim: 36,
        data: pred,
    };
    let decoded = pipe.decode(&prepared, &chunk, true).unwrap();
    for (g, rows) in &decoded.actions {
        let (_, want) = taps.f32(&format!("output.action.{g}"));
        assert!(
            rows.concat()
                .iter()
                .zip(&want)
                .all(|(a, b)| (a - b).abs() <= 1e-5),
            "{g}"
        );
    }
    assert_eq!(decoded.normalized.unwrap().len(), 5);
}

#[derive(serde::Deserialize)]
struct RandnFile {
    cases: Vec<RandnCase>,
}
#[derive(serde::Deserialize)]
struct RandnCase {
    seed: u64,
    shape: Vec<usize>,
    f32_bits_hex: Vec<String>,
}

#[test]
fn randn_matches_torch_bit_for_bit() {
    let text = std::fs::read_to_string(golden().join("torch-randn/randn.json")).unwrap();
    let file: RandnFile = serde_json::from_str(&text).unwrap();
    assert_eq!(file.cases.len(), 20);
    for c in &file.cases {
        let n: usize = c.shape.iter().product();
        let got = randn::randn(c.seed, n);
        let want: Vec<u32> = c
            .f32_bits_hex
            .iter()
            .map(|h| u32::from_str_radix(h, 16).unwrap())
            .collect();
        let bad: Vec<usize> = (0..n).filter(|&i| got[i].to_bits() != want[i]).collect();
        assert!(
            bad.is_empty(),
            "seed {} shape {:?}: {} of {n} differ, first at {} ({:e} vs {:e})",
            c.seed,
            c.shape,
            bad.len(),
            bad[0],
            got[bad[0]],
            f32::from_bits(want[bad[0]])
        );
    }
}

/// The request path's memo of seeded noise gives torch's values for every golden case, first
/// time and again, with more distinct seeds than it keeps (so entries are evicted and remade).
#[test]
fn cached_randn_matches_torch_every_time() {
    let text = std::fs::read_to_string(golden().join("torch-randn/randn.json")).unwrap();
    let file: RandnFile = serde_json::from_str(&text).unwrap();
    for round in 0..3 {
        for c in &file.cases {
            let n: usize = c.shape.iter().product();
            let got: Vec<String> = randn::randn_cached(c.seed, n)
                .iter()
                .map(|v| format!("{:08x}", v.to_bits()))
                .collect();
            assert_eq!(
                got, c.f32_bits_hex,
                "round {round} seed {} {:?}",
                c.seed, c.shape
            );
        }
    }
}

/// The pipeline remembers recent prompts and overlaps the decode with them: over many requests
/// with more distinct instructions than it keeps, interleaved and repeated, sequential and
/// overlapped, every request gets the tokenizer's own ids and the golden pixels.
#[test]
fn repeated_requests_get_fresh_prompt_ids_and_the_same_pixels() {
    let tok = QwenTokenizer::from_dir(&tok_dir()).unwrap();
    let pipe = HostPipeline::new(
        processor(),
        QwenTokenizer::from_dir(&tok_dir()).unwrap(),
        (24, 36, 64),
        None,
    )
    .unwrap();
    let taps = Taps::load("taps.safetensors");
    let pixels = taps.f32("input.pixel_values").1;
    let png = std::fs::read(case1().join("observation.png")).unwrap();
    let obs = obs_json();
    let instructions: Vec<String> = (0..12).map(|i| format!("pick {i} apples")).collect();
    for overlap in [false, true] {
        preprocess::set_overlap_decode(overlap);
        for round in 0..3 {
            for (k, ins) in instructions
                .iter()
                .enumerate()
                .filter(|(k, _)| (k + round) % 2 == 0)
            {
                let request = Observation {
                    images: [(
                        "ego_view_bg_crop_pad_res256_freq20".to_string(),
                        png.clone(),
                    )]
                    .into(),
                    state: obs.state.clone(),
                    instruction: ins.clone(),
                    noise: NoiseSource::Seed(k as u64),
                };
                let p = pipe.prepare(&request).unwrap();
                let text = if pipe.processor.formalize_language {
                    tokenizer::formalize_instruction(ins)
                } else {
                    ins.clone()
                };
                let want = tok.prompt_ids(&text, &[81]).unwrap();
                assert_eq!(p.inputs.input_ids, want, "{ins} round {round}");
                assert_eq!(p.inputs.noise, randn::randn(k as u64, 24 * 36));
                assert!(
                    p.inputs.pixel_values[0]
                        .iter()
                        .zip(&pixels)
                        .all(|(a, b)| a.to_bits() == b.to_bits())
                );
            }
        }
    }
    preprocess::set_overlap_decode(false);
}
