//! The CPU forward against NVIDIA's PyTorch reference on the tiny golden case: every float tap
//! of `taps.safetensors` (vision, projector, LLM, vlln, state encoder, every flow step and DiT
//! block, the final normalized chunk) is compared.

use gr00t_runtime::model::{CpuPolicy, Gr00tModel, ModelError, Taps};
use gr00t_runtime::policy::{ModelInputs, Policy, PolicyError};
use gr00t_runtime::weights::{WeightError, WeightSource, WeightStore};
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::PathBuf;

fn case_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden/gr00t-n16-tiny/case1"
    ))
}

struct Golden {
    f32s: HashMap<String, (Vec<usize>, Vec<f32>)>,
    i64s: HashMap<String, Vec<i64>>,
}

fn read_st(path: &std::path::Path) -> Golden {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut g = Golden {
        f32s: HashMap::new(),
        i64s: HashMap::new(),
    };
    for (name, v) in st.tensors() {
        match v.dtype() {
            Dtype::F32 => {
                let d = v
                    .data()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                g.f32s.insert(name, (v.shape().to_vec(), d));
            }
            Dtype::I64 => {
                let d = v
                    .data()
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                g.i64s.insert(name, d);
            }
            _ => {}
        }
    }
    g
}

fn golden_inputs(taps: &Golden) -> ModelInputs {
    let obs = read_st(&case_dir().join("observation.safetensors"));
    let (shape, px) = &taps.f32s["input.pixel_values"];
    ModelInputs {
        input_ids: taps.i64s["input.input_ids"]
            .iter()
            .map(|&v| v as u32)
            .collect(),
        pixel_values: vec![px.clone()],
        image_hw: (shape[2], shape[3]),
        state: taps.f32s["input.state"].1.clone(),
        embodiment_id: taps.i64s["input.embodiment_id"][0] as usize,
        noise: obs.f32s["noise"].1.clone(),
    }
}

fn pcc(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (
        a.iter().map(|&v| v as f64).sum::<f64>() / n,
        b.iter().map(|&v| v as f64).sum::<f64>() / n,
    );
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x as f64 - ma, y as f64 - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    if saa == 0.0 && sbb == 0.0 {
        return 1.0;
    }
    sab / (saa.sqrt() * sbb.sqrt())
}

/// Taps that are inputs we feed, or outputs of the host-side post-processing (un-normalization).
fn not_produced_by_model(name: &str) -> bool {
    name.starts_with("input.") || name.starts_with("output.") || name.starts_with("decode.")
}

#[test]
fn every_float_tap_matches_the_reference() {
    let golden = read_st(&case_dir().join("taps.safetensors"));
    let model = Gr00tModel::load(&case_dir()).expect("load tiny checkpoint");
    let inputs = golden_inputs(&golden);
    let mut got: HashMap<String, (Vec<usize>, Vec<f32>)> = HashMap::new();
    let mut sink = |name: &str, shape: &[usize], data: &[f32]| {
        got.insert(name.to_owned(), (shape.to_vec(), data.to_vec()));
    };
    let chunk = model
        .forward(&inputs, &mut Taps::new(&mut sink))
        .expect("forward");

    let mut names: Vec<&String> = golden
        .f32s
        .keys()
        .filter(|n| !not_produced_by_model(n))
        .collect();
    names.sort();
    assert!(names.len() >= 80, "only {} float taps found", names.len());
    let mut failures = Vec::new();
    let mut worst = (1.0f64, String::new());
    let mut worst_abs = (0.0f32, String::new());
    for name in &names {
        let (gshape, gdata) = &golden.f32s[*name];
        let Some((shape, data)) = got.get(*name) else {
            failures.push(format!("{name}: not produced"));
            continue;
        };
        if shape != gshape {
            failures.push(format!("{name}: shape {shape:?} vs golden {gshape:?}"));
            continue;
        }
        let p = pcc(data, gdata);
        let max_excess = data
            .iter()
            .zip(gdata)
            .map(|(&a, &b)| (a - b).abs() - (1e-4 + 1e-4 * b.abs()))
            .fold(f32::MIN, f32::max);
        let max_abs = data
            .iter()
            .zip(gdata)
            .map(|(&a, &b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        if p < worst.0 {
            worst = (p, (*name).clone());
        }
        if max_abs > worst_abs.0 {
            worst_abs = (max_abs, (*name).clone());
        }
        // A NaN PCC fails too.
        if p.is_nan() || p < 0.99999 || max_excess > 0.0 {
            failures.push(format!(
                "{name}: pcc {p:.7}, worst |diff| over tolerance by {max_excess:e}"
            ));
        }
    }
    eprintln!(
        "compared {} taps; lowest PCC {:.9} at {}; largest |diff| {:e} at {}",
        names.len(),
        worst.0,
        worst.1,
        worst_abs.0,
        worst_abs.1
    );
    assert!(
        failures.is_empty(),
        "{} taps differ:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // The final normalized chunk, tightly, and its GR1 slices as the decoder sees them.
    let (_, want) = &golden.f32s["flow.action_pred"];
    assert_eq!((chunk.horizon, chunk.dim), (24, 36));
    for (i, (&a, &b)) in chunk.data.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
            "action_pred[{i}]: {a} vs {b}"
        );
    }
    let mut col = 0;
    for (group, dim) in [
        ("left_arm", 7),
        ("right_arm", 7),
        ("left_hand", 6),
        ("right_hand", 6),
        ("waist", 3),
    ] {
        let (_, g) = &golden.f32s[&format!("decode.normalized.{group}")];
        for t in 0..16 {
            for j in 0..dim {
                let (a, b) = (chunk.data[t * 36 + col + j], g[t * dim + j]);
                assert!(
                    (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
                    "{group}[{t}][{j}]: {a} vs {b}"
                );
            }
        }
        col += dim;
    }
}

#[test]
fn cpu_policy_serves_the_golden_chunk() {
    let golden = read_st(&case_dir().join("taps.safetensors"));
    let policy = CpuPolicy::load(&case_dir()).unwrap();
    assert_eq!(policy.backend_name(), "cpu");
    assert_eq!(policy.dims(), (24, 36, 64));
    let inputs = golden_inputs(&golden);
    let (chunk, timing) = policy.predict(&inputs).unwrap();
    let (_, want) = &golden.f32s["flow.action_pred"];
    for (&a, &b) in chunk.data.iter().zip(want) {
        assert!((a - b).abs() <= 1e-4 + 1e-4 * b.abs());
    }
    assert!(timing.encode_ms > 0.0 && timing.device_ms > 0.0);
    assert_eq!(
        timing.host_stages.names(),
        [
            "vision",
            "projector",
            "llm",
            "vlln",
            "state_encoder",
            "action_encoder",
            "timestep_encoder",
            "dit",
            "dit_output",
            "action_decoder",
            "euler"
        ]
    );

    // Bad shapes are typed errors, not panics.
    let mut bad = inputs.clone();
    bad.noise.pop();
    assert!(matches!(policy.predict(&bad), Err(PolicyError::Shape(m)) if m.contains("noise")));
    let mut bad = inputs.clone();
    bad.input_ids.retain(|&id| id != 151_669);
    assert!(
        matches!(policy.predict(&bad), Err(PolicyError::Shape(m)) if m.contains("image tokens"))
    );
    let mut bad = inputs;
    bad.embodiment_id = 32;
    assert!(matches!(policy.predict(&bad), Err(PolicyError::Shape(m)) if m.contains("embodiment")));
}

/// A store that hides or reshapes one tensor of the golden checkpoint.
struct Tampered {
    inner: WeightStore,
    drop: &'static str,
    reshape: &'static str,
}

impl WeightSource for Tampered {
    fn tensor(
        &self,
        name: &str,
        shape: &[usize],
    ) -> Result<gr00t_runtime::weights::Tensor, WeightError> {
        if name == self.drop {
            return Err(WeightError::Missing {
                name: name.into(),
                expected: shape.to_vec(),
            });
        }
        let mut s = shape.to_vec();
        if name == self.reshape {
            s[0] += 1;
        }
        self.inner.tensor(name, &s)
    }
}

#[test]
fn missing_or_misshaped_tensor_is_named() {
    let cfg = gr00t_runtime::config::ModelConfig::from_dir(&case_dir()).unwrap();
    let store = WeightStore::open_dir(&case_dir()).unwrap();
    assert_eq!(store.len(), 216);
    let name = "action_head.model.transformer_blocks.3.attn1.to_k.weight";
    let err = store.tensor(name, &[1, 2]).unwrap_err().to_string();
    assert!(err.contains(name) && err.contains("[40, 40]"), "{err}");
    let t = Tampered {
        inner: store.clone(),
        drop: "backbone.model.mlp1.3.bias",
        reshape: "",
    };
    let err = Gr00tModel::from_source(cfg.clone(), &t).err().unwrap();
    assert!(
        matches!(&err, ModelError::Weights(WeightError::Missing { name, .. }) if name == "backbone.model.mlp1.3.bias"),
        "{err}"
    );
    let t = Tampered {
        inner: store,
        drop: "",
        reshape: "action_head.state_encoder.layer1.W",
    };
    let err = Gr00tModel::from_source(cfg, &t).err().unwrap().to_string();
    assert!(err.contains("action_head.state_encoder.layer1.W"), "{err}");
}

/// The golden weights are bf16-representable, so the same checkpoint re-written as two bf16
/// shards with an HF index (the real checkpoint's form) must give the same chunk.
#[test]
fn sharded_bf16_checkpoint_gives_the_same_chunk() {
    use safetensors::tensor::TensorView;
    let src = case_dir();
    let dir = std::env::temp_dir().join(format!("gr00t-model-bf16-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["config.json", "eagle_config.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    // (name, shape, little-endian bytes) per shard.
    type Shard = Vec<(String, Vec<usize>, Vec<u8>)>;
    let mut shards: [Shard; 2] = [Vec::new(), Vec::new()];
    let mut weight_map = serde_json::Map::new();
    let mut names: Vec<String> = st.names().into_iter().map(str::to_owned).collect();
    names.sort();
    for (i, name) in names.iter().enumerate() {
        let v = st.tensor(name).unwrap();
        assert_eq!(v.dtype(), Dtype::F32);
        let mut out = Vec::with_capacity(v.data().len() / 2);
        for c in v.data().chunks_exact(4) {
            let f = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let b = half::bf16::from_f32(f);
            assert_eq!(b.to_f32(), f, "{name} is not bf16-representable");
            out.extend_from_slice(&b.to_bits().to_le_bytes());
        }
        let file = format!("model-0000{}-of-00002.safetensors", i % 2 + 1);
        weight_map.insert(name.clone(), serde_json::Value::String(file));
        shards[i % 2].push((name.clone(), v.shape().to_vec(), out));
    }
    for (s, shard) in shards.iter().enumerate() {
        let views: Vec<(String, TensorView<'_>)> = shard
            .iter()
            .map(|(n, shape, d)| {
                (
                    n.clone(),
                    TensorView::new(Dtype::BF16, shape.clone(), d).unwrap(),
                )
            })
            .collect();
        let path = dir.join(format!("model-0000{}-of-00002.safetensors", s + 1));
        safetensors::serialize_to_file(views, None, &path).unwrap();
    }
    let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();

    let golden = read_st(&src.join("taps.safetensors"));
    let inputs = golden_inputs(&golden);
    let bf16_policy = CpuPolicy::load(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let (chunk, _) = bf16_policy.unwrap().predict(&inputs).unwrap();
    let (_, want) = &golden.f32s["flow.action_pred"];
    for (i, (&a, &b)) in chunk.data.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
            "action_pred[{i}]: {a} vs {b}"
        );
    }
}
