//! What each device weight format costs the Eagle backbone's stages (SigLIP2 vision tower, the
//! `mlp1` projector, the Qwen3 layers up to `select_layer`), measured on the CPU reference model
//! by rounding one stage's weights at a time through a wrapping [`WeightSource`].
//!
//! Only 2-D matmul weights are rounded (every Linear weight and the patch embedding); biases,
//! norms, the token-embedding table and the position-embedding table stay f32, as they would on
//! the device. Block-float weights are rounded the way the device stores them: a matmul
//! multiplies activations `[m, in]` by the weight tiled as `[in, out]` (the DiT arena packs torch's
//! `[out, in]` transposed), so one shared exponent covers 16 consecutive output features of one
//! input row. The weight is transposed, packed and unpacked with tt-blackhole's codec (zero
//! padding to whole tiles, as `from_torch` pads), and transposed back.
//!
//! Two measurements: the tiny golden checkpoint against NVIDIA's f32 taps (its f32 weights all
//! hold bf16 values, so bf16 storage is exact there), and one full-width SigLIP2 encoder layer
//! and one full-width Qwen3 decoder layer on seeded random weights, bf16 as the real checkpoint
//! holds them and f32 to show what bf16 rounding itself costs. Activations stay f32 throughout:
//! this measures weight storage only, not the device's bf16 activations or math fidelity.

use gr00t_runtime::config::{EagleConfig, VisionConfig};
use gr00t_runtime::model::qwen3_layer::{Qwen3Dims, Qwen3Layer, Qwen3Scratch};
use gr00t_runtime::model::vision::VisionTower;
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::policy::ModelInputs;
use gr00t_runtime::weights::{DType, RandomWeights, Tensor, WeightError, WeightSource};
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;
use tt_blackhole::bfp::{BfpFormat, pack_row_major, unpack_row_major};

/// A candidate storage format for the matmul weights.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    F32,
    Bf16,
    Bfp8,
    Bfp4,
}

/// The rounded formats, most precise first (error must not decrease along this list).
const ROUNDED: [Format; 3] = [Format::Bf16, Format::Bfp8, Format::Bfp4];

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::F32 => "f32",
            Format::Bf16 => "bf16",
            Format::Bfp8 => "bfp8_b",
            Format::Bfp4 => "bfp4_b",
        }
    }

    /// A torch-layout `[out, inp]` weight as the device would hold it, widened back to f32.
    fn round(self, w: &[f32], out: usize, inp: usize) -> Vec<f32> {
        let bfp = match self {
            Format::F32 => return w.to_vec(),
            Format::Bf16 => {
                return w
                    .iter()
                    .map(|&v| half::bf16::from_f32(v).to_f32())
                    .collect();
            }
            Format::Bfp8 => BfpFormat::Bfp8B,
            Format::Bfp4 => BfpFormat::Bfp4B,
        };
        let t = transpose(w, out, inp); // [inp, out], the device orientation
        let back = unpack_row_major(bfp, &pack_row_major(bfp, &t, inp, out), inp, out);
        transpose(&back, inp, out)
    }
}

fn transpose(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; a.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = a[r * cols + c];
        }
    }
    t
}

/// A backbone stage: its name and the checkpoint-name prefix of its tensors.
type Stage = (&'static str, &'static str);

/// The stages in forward order; stage `i` first changes [`TAPS`]`[i]`.
const STAGES: [Stage; 3] = [
    ("vision", "backbone.model.vision_model."),
    ("projector", "backbone.model.mlp1."),
    ("llm", "backbone.model.language_model."),
];

/// Serves `inner`'s tensors with the matmul weights of `stages` rounded to `format`.
struct Rounded<'a> {
    inner: &'a dyn WeightSource,
    stages: &'a [Stage],
    format: Format,
}

impl WeightSource for Rounded<'_> {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, WeightError> {
        let t = self.inner.tensor(name, shape)?;
        let matmul = shape.len() == 2
            && name.ends_with(".weight")
            && !name.contains("embed_tokens")
            && !name.contains("position_embedding");
        if !matmul || !self.stages.iter().any(|s| name.starts_with(s.1)) {
            return Ok(t);
        }
        // f32 too goes through an f32 tensor, so every format runs the same GEMM path.
        let w = self.format.round(&t.to_f32_vec(), shape[0], shape[1]);
        Ok(Tensor::from_f32(shape.to_vec(), w))
    }
}

/// PCC and max |a - b| of one output against its reference.
#[derive(Debug, Clone, Copy)]
struct Accuracy {
    pcc: f64,
    max_abs: f32,
}

fn max_abs(a: &[f32]) -> f32 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn compare(a: &[f32], b: &[f32]) -> Accuracy {
    assert_eq!(a.len(), b.len());
    let n = a.len() as f64;
    let ma = a.iter().map(|&v| v as f64).sum::<f64>() / n;
    let mb = b.iter().map(|&v| v as f64).sum::<f64>() / n;
    let (mut sab, mut saa, mut sbb, mut max_abs) = (0.0, 0.0, 0.0, 0.0f32);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x as f64 - ma, y as f64 - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
        max_abs = max_abs.max((x - y).abs());
    }
    let pcc = if saa == 0.0 && sbb == 0.0 {
        1.0
    } else {
        sab / (saa.sqrt() * sbb.sqrt())
    };
    Accuracy { pcc, max_abs }
}

/// `errs` (bf16, bfp8_b, bfp4_b) never get more accurate as the format gets coarser, and
/// bfp4_b loses at least ten times the correlation bfp8_b does.
fn assert_ordered(what: &str, errs: &[Accuracy]) {
    for w in errs.windows(2) {
        assert!(
            w[0].pcc >= w[1].pcc && w[0].max_abs <= w[1].max_abs,
            "{what}: a coarser format is more accurate: {errs:?}"
        );
    }
    assert!(
        1.0 - errs[2].pcc >= 10.0 * (1.0 - errs[1].pcc),
        "{what}: bfp4_b is within 10x of bfp8_b: {errs:?}"
    );
}

// ---- tiny golden -----------------------------------------------------------------------------

fn case_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden/gr00t-n16-tiny/case1"
    ))
}

/// The f32 and i64 tensors of a safetensors file.
type Tensors = (HashMap<String, Vec<f32>>, HashMap<String, Vec<i64>>);

fn read_tensors(name: &str) -> Tensors {
    let path = case_dir().join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (mut f, mut i) = (HashMap::new(), HashMap::new());
    for (name, v) in st.tensors() {
        match v.dtype() {
            Dtype::F32 => {
                let d = v.data().chunks_exact(4);
                f.insert(name, d.map(|c| f32::from_le_bytes(c.try_into().unwrap())));
            }
            Dtype::I64 => {
                let d = v.data().chunks_exact(8);
                i.insert(name, d.map(|c| i64::from_le_bytes(c.try_into().unwrap())));
            }
            _ => {}
        }
    }
    let f = f.into_iter().map(|(k, v)| (k, v.collect())).collect();
    let i = i.into_iter().map(|(k, v)| (k, v.collect())).collect();
    (f, i)
}

/// The golden taps compared, in forward order: each stage's output, then the action chunk.
const TAPS: [&str; 4] = [
    "vision.last_hidden_state",
    "projector.output",
    "backbone.features",
    "flow.action_pred",
];

fn golden_inputs(taps: &Tensors) -> ModelInputs {
    let (obs, _) = read_tensors("observation.safetensors");
    let hw = 252; // input.pixel_values is [1, 3, 252, 252] (taps.md)
    assert_eq!(taps.0["input.pixel_values"].len(), 3 * hw * hw);
    ModelInputs {
        input_ids: taps.1["input.input_ids"]
            .iter()
            .map(|&v| v as u32)
            .collect(),
        pixel_values: vec![taps.0["input.pixel_values"].clone()],
        image_hw: (hw, hw),
        state: taps.0["input.state"].clone(),
        embodiment_id: taps.1["input.embodiment_id"][0] as usize,
        noise: obs["noise"].clone(),
    }
}

/// The [`TAPS`] of one forward of the tiny model with `stages` rounded to `format`.
fn tiny_run(
    store: &dyn WeightSource,
    inputs: &ModelInputs,
    stages: &[Stage],
    format: Format,
) -> Vec<Vec<f32>> {
    let cfg = gr00t_runtime::config::ModelConfig::from_dir(&case_dir()).unwrap();
    let ws = Rounded {
        inner: store,
        stages,
        format,
    };
    let model = Gr00tModel::from_source(cfg, &ws).expect("build tiny model");
    let mut got: HashMap<String, Vec<f32>> = HashMap::new();
    let mut sink = |name: &str, _: &[usize], data: &[f32]| {
        if TAPS.contains(&name) {
            got.insert(name.to_owned(), data.to_vec());
        }
    };
    model
        .forward(inputs, &mut Taps::new(&mut sink))
        .expect("forward");
    TAPS.iter().map(|n| got.remove(*n).expect(n)).collect()
}

#[test]
fn tiny_golden_per_stage_and_format() {
    let start = Instant::now();
    let golden = read_tensors("taps.safetensors");
    let inputs = golden_inputs(&golden);
    let store = gr00t_runtime::weights::WeightStore::open_dir(&case_dir()).unwrap();
    let errs = |out: &[Vec<f32>]| -> Vec<Accuracy> {
        TAPS.iter()
            .zip(out)
            .map(|(n, o)| compare(o, &golden.0[*n]))
            .collect()
    };
    let mut table = format!("{:<10} {:<7}", "stage", "format");
    for t in TAPS {
        table += &format!(" | {t:>24}: 1-pcc max|err|");
    }
    table += &format!("\n{:<18}", "max|golden|");
    for t in TAPS {
        table += &format!(" | {:>40.2e}", max_abs(&golden.0[t]));
    }
    let mut row = |stage: &str, f: Format, e: &[Accuracy]| {
        table += &format!("\n{stage:<10} {:<7}", f.name());
        for x in e {
            table += &format!(" | {:>31.2e} {:>8.2e}", 1.0 - x.pcc, x.max_abs);
        }
    };

    let reference = tiny_run(&store, &inputs, &STAGES, Format::F32);
    let ref_errs = errs(&reference);
    row("none", Format::F32, &ref_errs);
    for e in &ref_errs {
        assert!(
            e.pcc > 0.99999,
            "f32 weights do not reproduce the golden: {ref_errs:?}"
        );
    }
    // (rounded stages, first tap they can change, errors per rounded format)
    let mut checks: Vec<(&str, usize, Vec<Vec<Accuracy>>)> = Vec::new();
    for (first, stage) in STAGES.into_iter().enumerate() {
        let mut by_format = Vec::new();
        for f in ROUNDED {
            let out = tiny_run(&store, &inputs, &[stage], f);
            // The stages before this one are untouched: same floats as the f32 run.
            for i in 0..first {
                assert_eq!(out[i], reference[i], "{} changed by {}", TAPS[i], stage.0);
            }
            let e = errs(&out);
            row(stage.0, f, &e);
            by_format.push(e);
        }
        checks.push((stage.0, first, by_format));
    }
    let mut all = Vec::new();
    for f in ROUNDED {
        let e = errs(&tiny_run(&store, &inputs, &STAGES, f));
        row("all", f, &e);
        all.push(e);
    }
    checks.push(("all", 0, all));
    eprintln!(
        "tiny golden case1, errors vs NVIDIA's f32 taps ({:.1} s):\n{table}",
        start.elapsed().as_secs_f64()
    );

    for (stages, first, by_format) in &checks {
        for (i, tap) in TAPS.iter().enumerate().skip(*first) {
            let col: Vec<Accuracy> = by_format.iter().map(|e| e[i]).collect();
            assert_ordered(&format!("{stages} -> {tap}"), &col);
            // bf16 weights lose nothing that matters at any point downstream.
            assert!(col[0].pcc >= 0.9999, "{stages} bf16 -> {tap}: {col:?}");
            // bfp8_b keeps every stage (and all three together) above 0.999.
            assert!(col[1].pcc >= 0.999, "{stages} bfp8_b -> {tap}: {col:?}");
        }
    }
}

// ---- full-width single layers ------------------------------------------------------------------

/// A deterministic smooth "image" in [-1, 1], `[3, hw, hw]`.
fn test_image(hw: usize) -> Vec<f32> {
    let mut px = Vec::with_capacity(3 * hw * hw);
    for c in 0..3 {
        for y in 0..hw {
            for x in 0..hw {
                let (fx, fy) = (x as f32 / hw as f32, y as f32 / hw as f32);
                let v = (fx * (7.0 + c as f32) + fy * 3.0).sin() * 0.6
                    + (fx * fy * 40.0 + c as f32).cos() * 0.3;
                px.push(v.clamp(-1.0, 1.0));
            }
        }
    }
    px
}

/// First SigLIP2 encoder layer's output (the `vision.encoder_layer0` tap) of a 1-layer tower.
fn vision_layer(ws: &dyn WeightSource, cfg: &VisionConfig, px: &[f32], hw: usize) -> Vec<f32> {
    let tower = VisionTower::load(ws, cfg).expect("vision tower");
    let mut out = Vec::new();
    let mut sink = |name: &str, _: &[usize], data: &[f32]| {
        if name == "vision.encoder_layer0" {
            out = data.to_vec();
        }
    };
    tower.forward(px, hw, hw, &mut Taps::new(&mut sink), true);
    out
}

/// One Qwen3 decoder layer on `x` `[s, hidden]` at positions 0..s.
fn qwen3_layer(ws: &dyn WeightSource, dims: &Qwen3Dims, theta: f64, x: &[f32]) -> Vec<f32> {
    let prefix = "backbone.model.language_model.model.layers.0";
    let layer = Qwen3Layer::load(ws, prefix, dims).expect("qwen3 layer");
    let (s, hd) = (x.len() / dims.hidden, dims.head_dim);
    // The default RoPE rounded like the f32 reference (angle = pos * inv_freq in f32).
    let (mut cos, mut sin) = (vec![0.0f32; s * hd], vec![0.0f32; s * hd]);
    for p in 0..s {
        for i in 0..hd / 2 {
            let inv = (1.0 / theta.powf((2 * i) as f64 / hd as f64)) as f32;
            let (sn, cs) = ((p as f32 * inv) as f64).sin_cos();
            for j in [i, i + hd / 2] {
                (cos[p * hd + j], sin[p * hd + j]) = (cs as f32, sn as f32);
            }
        }
    }
    let mut y = x.to_vec();
    layer.forward(&mut y, s, dims, &cos, &sin, &mut Qwen3Scratch::new(s, dims));
    y
}

#[test]
fn full_width_layers_per_format() {
    let start = Instant::now();
    let eagle = EagleConfig::full_size();
    let vcfg = VisionConfig {
        num_hidden_layers: 1,
        ..eagle.vision_config.clone()
    };
    let t = &eagle.text_config;
    let dims = Qwen3Dims::of(t);
    let hw = 16 * vcfg.patch_size; // 256 patches, the position table's own grid
    let px = test_image(hw);
    let s = 128;
    let x: Vec<f32> = (0..s * dims.hidden)
        .map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * 0.2)
        .collect();

    let mut table = format!(
        "{:<16} {:<8} {:<7} {:>9} {:>9} {:>9}",
        "layer", "weights", "format", "1-pcc", "max|err|", "max|ref|"
    );
    // bf16 weights are what the checkpoint holds; f32 ones show what bf16 itself rounds away.
    for dtype in [DType::Bf16, DType::F32] {
        let random = RandomWeights { seed: 40, dtype };
        for (layer, stage) in [("siglip2 layer 0", STAGES[0]), ("qwen3 layer 0", STAGES[2])] {
            let run = |f: Format| {
                let ws = Rounded {
                    inner: &random,
                    stages: &[stage],
                    format: f,
                };
                if stage == STAGES[0] {
                    vision_layer(&ws, &vcfg, &px, hw)
                } else {
                    qwen3_layer(&ws, &dims, t.rope_theta, &x)
                }
            };
            let reference = run(Format::F32);
            assert!(reference.iter().all(|v| v.is_finite()));
            let errs: Vec<Accuracy> = ROUNDED
                .iter()
                .map(|&f| compare(&run(f), &reference))
                .collect();
            for (f, e) in ROUNDED.iter().zip(&errs) {
                table += &format!(
                    "\n{layer:<16} {:<8} {:<7} {:>9.2e} {:>9.2e} {:>9.2e}",
                    format!("{dtype:?}").to_lowercase(),
                    f.name(),
                    1.0 - e.pcc,
                    e.max_abs,
                    max_abs(&reference)
                );
            }
            let what = format!("{layer}, {dtype:?} weights");
            if dtype == DType::Bf16 {
                // Storing bf16 weights as bf16 is exact.
                assert_eq!(errs[0].max_abs, 0.0, "{what}: bf16 is not exact");
            }
            assert_ordered(&what, &errs);
            assert!(errs[0].pcc >= 0.9999, "{what} bf16: {errs:?}");
            assert!(errs[1].pcc >= 0.999, "{what} bfp8_b: {errs:?}");
        }
    }
    eprintln!(
        "full-width layers, seeded random weights, errors vs the same weights in f32 ({:.1} s):\n{table}",
        start.elapsed().as_secs_f64()
    );
}
