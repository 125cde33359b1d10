//! `gr00t-server make-checkpoint`: a deterministic random N1.6 checkpoint in the real file
//! layout, so the runtime (and a packaged GR00T image) can be tried where no Hub and no real
//! weights exist. `--config n17-tiny` writes an N1.7 one instead ([`crate::checkpoint_n17`]).
//!
//! ```text
//! DIR/config.json, eagle_config.json          the tiny N1.6 config (every structural switch of 3B)
//! DIR/model-0000{1,2}-of-00002.safetensors    seeded random f32 tensors, sharded
//! DIR/model.safetensors.index.json            weight_map + total_size
//! DIR/processor_config.json, statistics.json, embodiment_id.json   GR1 modality configs + synthetic stats
//! DIR/tokenizer/                              a byte-level stand-in tokenizer (or --tokenizer-dir's files)
//! DIR/demo/request.json, expected.json        a demo whose actions this runtime's f32 CPU reference made
//! ```
//!
//! The tensor names and shapes are exactly those the model asks for while it is built (a
//! recording weight source around seeded random weights), so the checkpoint always matches
//! the runtime that wrote it. The directory is written beside `DIR` and renamed into place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, bail};
use gr00t_runtime::config::ModelConfig;
use gr00t_runtime::model::Gr00tModel;
use gr00t_runtime::weights::{DType, RandomWeights, Tensor, WeightError, WeightSource};
use serde_json::{Value, json};

/// The configs `make-checkpoint --config` knows: N1.6's `tiny` and N1.7's `n17-tiny`.
pub const CONFIGS: [&str; 2] = ["tiny", crate::checkpoint_n17::CONFIG];

/// The GR1 state/action groups and their widths.
const GR1_GROUPS: [(&str, usize); 5] = [
    ("left_arm", 7),
    ("right_arm", 7),
    ("left_hand", 6),
    ("right_hand", 6),
    ("waist", 3),
];
/// The GR1 camera.
pub const GR1_CAMERA: &str = "ego_view_bg_crop_pad_res256_freq20";
/// The Qwen special tokens the prompt uses, at their real ids.
const SPECIAL_TOKENS: [(&str, u32); 6] = [
    ("<|endoftext|>", 151_643),
    ("<|im_start|>", 151_644),
    ("<|im_end|>", 151_645),
    ("<IMG_CONTEXT>", 151_669),
    ("<img>", 151_670),
    ("</img>", 151_671),
];

/// `config.json` and `eagle_config.json` of the tiny N1.6 config: SigLIP2 48×2, Qwen3 16×3
/// (vocabulary 151,680), DiT 40×8 with interleaved self-attention, horizon 24, widths 64/36.
pub fn tiny_config() -> (Value, Value) {
    let config = json!({
        "architectures": ["Gr00tN1d6"],
        "model_type": "Gr00tN1d6",
        "action_horizon": 24,
        "apply_sincos_state_encoding": true,
        "backbone_embedding_dim": 16,
        "diffusion_model_cfg": {
            "attention_head_dim": 10,
            "interleave_self_attention": true,
            "norm_type": "ada_norm",
            "num_attention_heads": 4,
            "num_layers": 8,
            "output_dim": 24,
            "positional_embeddings": null
        },
        "hidden_size": 24,
        "input_embedding_dim": 40,
        "max_action_dim": 36,
        "max_num_embodiments": 32,
        "max_seq_len": 64,
        "max_state_dim": 64,
        "select_layer": 2,
        "torch_dtype": "float32",
        "use_relative_action": true
    });
    let eagle = json!({
        "model_type": "eagle_3_vl",
        "downsample_ratio": 0.5,
        "image_token_index": 151_669,
        "mlp_connector_layers": 2,
        "select_layer": -1,
        "use_pixel_shuffle": true,
        "text_config": {
            "model_type": "qwen3",
            "attention_bias": false,
            "head_dim": 16,
            "hidden_act": "silu",
            "hidden_size": 16,
            "intermediate_size": 48,
            "num_attention_heads": 4,
            "num_hidden_layers": 3,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1_000_000,
            "vocab_size": 151_680
        },
        "vision_config": {
            "model_type": "siglip2_vision_model",
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 48,
            "intermediate_size": 80,
            "layer_norm_eps": 1e-6,
            "num_attention_heads": 3,
            "num_channels": 3,
            "num_hidden_layers": 2,
            "num_patches": 256,
            "patch_size": 14,
            "use_rope": false,
            "use_windows_attn": false
        }
    });
    (config, eagle)
}

/// Seeded random weights that remember every tensor the model asked for.
pub(crate) struct Recording {
    random: RandomWeights,
    seen: Mutex<BTreeMap<String, Tensor>>,
}

impl WeightSource for Recording {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, WeightError> {
        let t = self.random.tensor(name, shape)?;
        self.seen
            .lock()
            .expect("no panics while holding it")
            .insert(name.to_owned(), t.clone());
        Ok(t)
    }
}

/// The tensors a model asks for while `build` builds it from seeded random weights of
/// `seed`, by name.
pub(crate) fn record_tensors(
    seed: u64,
    build: impl FnOnce(&Recording) -> anyhow::Result<()>,
) -> anyhow::Result<BTreeMap<String, Tensor>> {
    let rec = Recording {
        random: RandomWeights {
            seed,
            dtype: DType::F32,
        },
        seen: Mutex::new(BTreeMap::new()),
    };
    build(&rec)?;
    Ok(rec.seen.into_inner().expect("not poisoned"))
}

/// The tensors of an N1.6 model built from `cfg` with random weights of `seed`, by name.
fn random_tensors(cfg: &ModelConfig, seed: u64) -> anyhow::Result<BTreeMap<String, Tensor>> {
    record_tensors(seed, |rec| {
        Gr00tModel::from_source(cfg.clone(), rec).context("building the model")?;
        Ok(())
    })
}

/// Writes the tensors as `shards` safetensors files plus the index.
pub(crate) fn write_shards(
    dir: &Path,
    tensors: &BTreeMap<String, Tensor>,
    shards: usize,
) -> anyhow::Result<()> {
    let bytes_of = |t: &Tensor| -> Vec<u8> {
        t.to_f32_vec()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    };
    let total: usize = tensors.values().map(|t| t.numel() * 4).sum();
    let per_shard = total.div_ceil(shards.max(1));
    let mut groups: Vec<Vec<(&String, &Tensor)>> = vec![Vec::new()];
    let mut filled = 0;
    for (name, t) in tensors {
        if filled >= per_shard && groups.len() < shards {
            groups.push(Vec::new());
            filled = 0;
        }
        filled += t.numel() * 4;
        groups.last_mut().expect("one group").push((name, t));
    }
    let n = groups.len();
    let mut weight_map = serde_json::Map::new();
    for (i, group) in groups.iter().enumerate() {
        let file = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
        let data: Vec<(String, Vec<u8>, Vec<usize>)> = group
            .iter()
            .map(|(name, t)| ((*name).clone(), bytes_of(t), t.shape().to_vec()))
            .collect();
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = data
            .iter()
            .map(|(name, bytes, shape)| {
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                    .map(|v| (name.clone(), v))
            })
            .collect::<Result<_, _>>()?;
        // serialize() then a plain write: the file gets the usual mode (readable by the
        // container user serve runs as), not a private one.
        let bytes =
            safetensors::serialize(views, None).with_context(|| format!("encoding {file}"))?;
        std::fs::write(dir.join(&file), bytes).with_context(|| format!("writing {file}"))?;
        for (name, _) in group {
            weight_map.insert((*name).clone(), Value::String(file.clone()));
        }
    }
    write_json(
        &dir.join("model.safetensors.index.json"),
        &json!({"metadata": {"total_size": total}, "weight_map": weight_map}),
    )
}

/// A deterministic value in [-1, 1) for (seed, label, i).
pub(crate) fn unit(seed: u64, label: &str, i: usize) -> f64 {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for b in label.bytes().chain(i.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// min/max/mean/std/q01/q99 of `dim` joints (`rows` rows for relative actions), synthetic
/// but consistent (min < q01 < mean < q99 < max, std > 0).
pub(crate) fn stats(seed: u64, label: &str, dim: usize, rows: Option<usize>) -> Value {
    let row = |r: usize| -> BTreeMap<&str, Vec<f64>> {
        let mut m: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for j in 0..dim {
            let center = 0.5 * unit(seed, label, r * 64 + j);
            let half = 0.6 + 0.4 * unit(seed, label, 4096 + r * 64 + j).abs();
            for (k, v) in [
                ("min", center - half),
                ("max", center + half),
                ("mean", center),
                ("std", half / 2.0),
                ("q01", center - 0.95 * half),
                ("q99", center + 0.95 * half),
            ] {
                m.entry(k).or_default().push(v);
            }
        }
        m
    };
    match rows {
        None => json!(row(0)),
        Some(n) => {
            let rows: Vec<_> = (0..n).map(row).collect();
            let mut out = serde_json::Map::new();
            for k in ["min", "max", "mean", "std", "q01", "q99"] {
                out.insert(
                    k.into(),
                    json!(rows.iter().map(|r| &r[k]).collect::<Vec<_>>()),
                );
            }
            Value::Object(out)
        }
    }
}

/// `processor_config.json`, `statistics.json` and `embodiment_id.json` for GR1 (embodiment
/// slot 20; arms and hands relative actions, waist absolute), with `horizon` action steps.
fn processor_files(seed: u64, horizon: usize) -> (Value, Value, Value) {
    let keys: Vec<&str> = GR1_GROUPS.iter().map(|(g, _)| *g).collect();
    let modality = |delta: Vec<usize>, keys: Value, sincos: Value, actions: Value| {
        json!({"delta_indices": delta, "modality_keys": keys, "sin_cos_embedding_keys": sincos,
               "mean_std_embedding_keys": null, "action_configs": actions})
    };
    let action_cfg =
        |rep: &str| json!({"rep": rep, "type": "NON_EEF", "format": "DEFAULT", "state_key": null});
    let processor = json!({
        "processor_class": "Gr00tN1d6Processor",
        "processor_kwargs": {
            "modality_configs": {"gr1": {
                "video": modality(vec![0], json!([GR1_CAMERA]), Value::Null, Value::Null),
                "state": modality(vec![0], json!(keys), json!(keys), Value::Null),
                "action": modality((0..16).collect(), json!(keys), Value::Null, json!([
                    action_cfg("RELATIVE"), action_cfg("RELATIVE"), action_cfg("RELATIVE"),
                    action_cfg("RELATIVE"), action_cfg("ABSOLUTE")])),
                "language": modality(vec![0], json!(["annotation.human.action.task_description"]), Value::Null, Value::Null),
            }},
            "image_crop_size": null,
            "image_target_size": null,
            "use_albumentations": true,
            "shortest_image_edge": 256,
            "crop_fraction": 0.95,
            "model_name": "nvidia/Eagle-Block2A-2B-v2",
            "model_type": "eagle",
            "formalize_language": true,
            "max_state_dim": 64,
            "max_action_dim": 36,
            "max_action_horizon": horizon,
            "use_percentiles": false,
            "clip_outliers": true,
            "apply_sincos_state_encoding": true,
            "use_relative_action": true
        }
    });
    let mut state = serde_json::Map::new();
    let mut action = serde_json::Map::new();
    let mut relative = serde_json::Map::new();
    for (g, dim) in GR1_GROUPS {
        state.insert(g.into(), stats(seed, &format!("state.{g}"), dim, None));
        action.insert(g.into(), stats(seed, &format!("action.{g}"), dim, None));
        if g != "waist" {
            relative.insert(
                g.into(),
                stats(seed, &format!("relative.{g}"), dim, Some(16)),
            );
        }
    }
    let statistics =
        json!({"gr1": {"state": state, "action": action, "relative_action": relative}});
    let ids = json!({"gr1": 20, "new_embodiment": 10});
    (processor, statistics, ids)
}

/// GPT-2's byte → printable character map (the alphabet of byte-level BPE).
fn byte_chars() -> Vec<char> {
    let printable: Vec<u32> = (u32::from(b'!')..=u32::from(b'~'))
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut extra = 0;
    (0u32..256)
        .map(|b| {
            if printable.contains(&b) {
                char::from_u32(b).expect("latin-1")
            } else {
                extra += 1;
                char::from_u32(255 + extra).expect("below the surrogates")
            }
        })
        .collect()
}

/// A byte-level stand-in for the Qwen tokenizer: one token per byte (no merges) plus the
/// special tokens the prompt uses (`specials`) at their Qwen ids. Prompts tokenize to more ids
/// than with the real vocabulary; everything else (files, ids of the special tokens) is the
/// real shape.
pub(crate) fn write_byte_tokenizer(dir: &Path, specials: &[(&str, u32)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut vocab = serde_json::Map::new();
    for (i, c) in byte_chars().into_iter().enumerate() {
        vocab.insert(c.to_string(), json!(i));
    }
    let mut decoder = serde_json::Map::new();
    for &(t, id) in specials {
        vocab.insert(t.into(), json!(id));
        decoder.insert(
            id.to_string(),
            json!({"content": t, "special": true, "lstrip": false, "rstrip": false,
                   "single_word": false, "normalized": false}),
        );
    }
    write_json(&dir.join("vocab.json"), &Value::Object(vocab))?;
    std::fs::write(dir.join("merges.txt"), "#version: 0.2\n")?;
    write_json(
        &dir.join("tokenizer_config.json"),
        &json!({"added_tokens_decoder": decoder, "model_max_length": 32768,
                "tokenizer_class": "Qwen2Tokenizer",
                "comment": "byte-level stand-in written by gr00t-server make-checkpoint"}),
    )
}

pub(crate) fn write_json(path: &Path, v: &Value) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(v)?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// A 256×256 RGB PNG (a smooth pattern of the seed) for the demo request.
fn demo_png(seed: u64) -> anyhow::Result<Vec<u8>> {
    pattern_png(seed, "png", 256, 256)
}

/// A `w`×`h` RGB PNG, a smooth pattern of (seed, label).
pub(crate) fn pattern_png(seed: u64, label: &str, w: u32, h: u32) -> anyhow::Result<Vec<u8>> {
    let phase = (unit(seed, label, 0) * 64.0) as i64;
    let mut rgb = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h as i64 {
        for x in 0..w as i64 {
            rgb.extend([
                ((x + phase).rem_euclid(256)) as u8,
                ((y * 2 + phase).rem_euclid(256)) as u8,
                (((x ^ y) + 3 * phase).rem_euclid(256)) as u8,
            ]);
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header()?;
        writer.write_image_data(&rgb)?;
    }
    Ok(out)
}

/// The demo request: the pattern frame, a mid-range state and an instruction, seed 42.
fn demo_request(seed: u64) -> anyhow::Result<Value> {
    use base64::Engine;
    let mut state = serde_json::Map::new();
    for (g, dim) in GR1_GROUPS {
        state.insert(
            g.into(),
            json!((0..dim).map(|j| 0.3 * unit(seed, g, j)).collect::<Vec<_>>()),
        );
    }
    Ok(json!({
        "images": {GR1_CAMERA: base64::engine::general_purpose::STANDARD.encode(demo_png(seed)?)},
        "state": state,
        "instruction": "pick the apple",
        "seed": 42
    }))
}

/// What `make-checkpoint` wrote.
#[derive(Debug)]
pub struct Written {
    /// The checkpoint directory (the `out` asked for).
    pub dir: PathBuf,
    /// Tensors in the weights.
    pub tensors: usize,
    /// Size of every file written under `dir`, in bytes.
    pub bytes: u64,
}

/// Writes the `config` checkpoint of `seed` to `out` (replaced atomically). `tokenizer`: copy
/// these tokenizer files instead of writing the byte-level stand-in.
pub fn make_checkpoint(
    config: &str,
    seed: u64,
    out: &Path,
    tokenizer: Option<&Path>,
    shards: usize,
) -> anyhow::Result<Written> {
    if !CONFIGS.contains(&config) {
        bail!(
            "--config {config}: known configs are {}",
            CONFIGS.join(", ")
        );
    }
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "checkpoint".into());
    let tmp = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let result = if config == crate::checkpoint_n17::CONFIG {
        crate::checkpoint_n17::write_all(&tmp, seed, tokenizer, shards)
    } else {
        write_all(&tmp, seed, tokenizer, shards)
    };
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let written = result?;
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("replacing {}", out.display()))?;
    }
    std::fs::rename(&tmp, out).with_context(|| format!("moving into {}", out.display()))?;
    Ok(Written {
        dir: out.to_path_buf(),
        ..written
    })
}

fn write_all(
    dir: &Path,
    seed: u64,
    tokenizer: Option<&Path>,
    shards: usize,
) -> anyhow::Result<Written> {
    let (config, eagle) = tiny_config();
    write_json(&dir.join("config.json"), &config)?;
    write_json(&dir.join("eagle_config.json"), &eagle)?;
    let cfg = ModelConfig::from_dir(dir)?;
    let tensors = random_tensors(&cfg, seed)?;
    write_shards(dir, &tensors, shards)?;
    let (processor, statistics, ids) = processor_files(seed, cfg.gr00t.action_horizon);
    write_json(&dir.join("processor_config.json"), &processor)?;
    write_json(&dir.join("statistics.json"), &statistics)?;
    write_json(&dir.join("embodiment_id.json"), &ids)?;
    let tok_dir = dir.join("tokenizer");
    match tokenizer {
        Some(src) => copy_files(src, &tok_dir)?,
        None => write_byte_tokenizer(&tok_dir, &SPECIAL_TOKENS)?,
    }
    // The demo: its expected actions come from this build's f32 CPU reference.
    let settings = crate::settings::Settings::from_vars(&Default::default())?;
    let policy = crate::boot::load_policy(&settings, dir)?;
    let rt = crate::boot::build_runtime(&settings, dir, &tok_dir, policy)?;
    let demo = crate::demo::Demo::produce(&rt, demo_request(seed)?)?;
    demo.write(&dir.join("demo"))?;
    let bytes = walk_bytes(dir)?;
    Ok(Written {
        dir: dir.to_path_buf(),
        tensors: tensors.len(),
        bytes,
    })
}

/// Copies the plain files of `src` (not its subdirectories) into `dst`.
pub(crate) fn copy_files(src: &Path, dst: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dst)?;
    for entry in std::fs::read_dir(src)
        .with_context(|| format!("reading the tokenizer directory {}", src.display()))?
    {
        let p = entry?.path();
        if p.is_file() {
            std::fs::copy(&p, dst.join(p.file_name().expect("a file")))
                .with_context(|| format!("copying {}", p.display()))?;
        }
    }
    Ok(())
}

pub(crate) fn walk_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() {
            walk_bytes(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_is_gpt2s() {
        let c = byte_chars();
        assert_eq!(c.len(), 256);
        assert_eq!(c[b'a' as usize], 'a');
        assert_eq!(c[b' ' as usize], 'Ġ', "space is U+0120 in byte-level BPE");
        assert_eq!(c[b'\n' as usize], 'Ċ');
        let mut sorted = c.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 256, "a bijection");
    }

    #[test]
    fn stats_are_ordered() {
        let s = stats(7, "x", 5, None);
        for j in 0..5 {
            let f = |k: &str| s[k][j].as_f64().unwrap();
            assert!(f("min") < f("q01") && f("q01") < f("mean") && f("mean") < f("q99"));
            assert!(f("q99") < f("max") && f("std") > 0.0);
        }
        let r = stats(7, "x", 3, Some(16));
        assert_eq!(r["min"].as_array().unwrap().len(), 16);
    }
}
