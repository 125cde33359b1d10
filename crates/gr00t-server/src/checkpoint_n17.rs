//! `gr00t-server make-checkpoint --config n17-tiny`: a deterministic random GR00T N1.7
//! checkpoint in the real file layout, beside the backbone's processor files.
//!
//! ```text
//! DIR/config.json                          the tiny N1.7 config (every structural switch of 3B)
//! DIR/model-0000{1,2}-of-00002.safetensors seeded random f32 tensors, sharded, + the index
//! DIR/processor_config.json, statistics.json, embodiment_id.json
//!                                          one DROID-like embodiment + synthetic statistics
//! DIR/tokenizer/                           the backbone's processor files: config.json (tiny
//!                                          Qwen3-VL), tokenizer, chat template, image processor
//!                                          (a stand-in, or --tokenizer-dir's files)
//! DIR/demo/request.json, expected.json     a demo whose actions this runtime's f32 CPU forward made
//! ```
//!
//! The processor files live in `tokenizer/` because that is where `gr00t-server` looks by
//! default (`--tokenizer-dir`), so the directory serves alone. The real N1.7 reads them from
//! the (gated) backbone repository instead: a package ships them as separately pinned
//! auxiliary weights and points `GR00T_TOKENIZER_REPO`/`GR00T_TOKENIZER_REVISION` at that
//! snapshot (examples/gr00t-n1.7-tiny); the checkpoint's `tokenizer/` is then left out.
//!
//! The backbone's widths come from the processor files' `config.json` (as the runtime reads
//! them), so copied processor files decide the backbone tensors' shapes. The tensor names and
//! shapes are exactly those the model asks for while it is built.

use std::path::Path;

use anyhow::{Context, bail};
use base64::Engine;
use gr00t_runtime::n17::backbone::{BackboneConfig, Qwen3VlBackbone};
use gr00t_runtime::n17::config::N17Config;
use gr00t_runtime::n17::head::N17ActionHead;
use serde_json::{Value, json};

use crate::checkpoint::{
    Written, copy_files, pattern_png, record_tensors, stats, unit, walk_bytes,
    write_byte_tokenizer, write_json, write_shards,
};

/// The `make-checkpoint --config` name of the tiny N1.7 checkpoint.
pub const CONFIG: &str = "n17-tiny";

/// The embodiment of the checkpoint (DROID, relative EEF and joints) and its projector slot.
pub const TAG: &str = "oxe_droid_relative_eef_relative_joint";
const PROJECTOR: usize = 24;
/// Cameras, each given as two frames (t-15, t0).
pub const CAMERAS: [&str; 2] = ["exterior_image_1_left", "wrist_image_left"];
/// State and action groups and their widths (the EEF pose is xyz + rot6d).
pub const GROUPS: [(&str, usize); 3] = [
    ("eef_9d", 9),
    ("gripper_position", 1),
    ("joint_position", 7),
];
/// Decoded action steps (the model's horizon is 40 too).
const HORIZON: usize = 40;
/// Demo frame size: non-square, so the letterbox runs.
const FRAME: (u32, u32) = (320, 180);

/// The Qwen3-VL special tokens the prompt uses, at their real ids.
const SPECIAL_TOKENS: [(&str, u32); 7] = [
    ("<|endoftext|>", 151_643),
    ("<|im_start|>", 151_644),
    ("<|im_end|>", 151_645),
    ("<|vision_start|>", 151_652),
    ("<|vision_end|>", 151_653),
    ("<|image_pad|>", 151_655),
    ("<|video_pad|>", 151_656),
];

/// `config.json` of the tiny N1.7: every switch of the released model (deepstack via the
/// backbone, select_layer below the depth, vlln, a vl_self_attention stack, the alternating
/// text/image DiT, percentiles, relative actions) at toy widths.
pub fn tiny_config() -> Value {
    json!({
        "architectures": ["Gr00tN1d7"],
        "model_type": "Gr00tN1d7",
        "model_name": "nvidia/Cosmos-Reason2-2B",
        "backbone_model_type": "qwen",
        "action_horizon": HORIZON,
        "add_pos_embed": true,
        "apply_sincos_state_encoding": false,
        "attend_text_every_n_blocks": 2,
        "backbone_embedding_dim": 32,
        "diffusion_model_cfg": {
            "attention_head_dim": 10,
            "dropout": 0.2,
            "final_dropout": true,
            "interleave_self_attention": true,
            "norm_type": "ada_norm",
            "num_attention_heads": 4,
            "num_layers": 8,
            "output_dim": 24,
            "positional_embeddings": null
        },
        "dtype": "float32",
        "hidden_size": 24,
        "image_crop_size": [230, 230],
        "image_target_size": [256, 256],
        "input_embedding_dim": 40,
        "max_action_dim": 132,
        "max_num_embodiments": 32,
        "max_seq_len": 1024,
        "max_state_dim": 132,
        "num_inference_timesteps": 4,
        "select_layer": 4,
        "state_history_length": 1,
        "use_albumentations_transforms": true,
        "use_alternate_vl_dit": true,
        "use_percentiles": true,
        "use_relative_action": true,
        "use_vlln": true,
        "vl_self_attention_cfg": {
            "attention_head_dim": 16,
            "dropout": 0.2,
            "final_dropout": true,
            "num_attention_heads": 2,
            "num_layers": 2,
            "positional_embeddings": null
        }
    })
}

/// The backbone's `config.json` in tiny form: the Qwen3-VL layout (deepstack at vision blocks
/// 1–3 of 5, interleaved M-RoPE, q width ≠ hidden, 6 text layers of which the GR00T config
/// keeps 4) with the real token ids and vocabulary size.
pub fn tiny_backbone_config() -> Value {
    json!({
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "image_token_id": 151_655,
        "video_token_id": 151_656,
        "vision_start_token_id": 151_652,
        "vision_end_token_id": 151_653,
        "tie_word_embeddings": true,
        "text_config": {
            "model_type": "qwen3_vl_text",
            "attention_bias": false,
            "head_dim": 32,
            "hidden_act": "silu",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_attention_heads": 4,
            "num_hidden_layers": 6,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-6,
            "rope_scaling": {"mrope_interleaved": true, "mrope_section": [8, 4, 4], "rope_type": "default"},
            "rope_theta": 5_000_000,
            "tie_word_embeddings": true,
            "vocab_size": 151_936
        },
        "vision_config": {
            "model_type": "qwen3_vl",
            "deepstack_visual_indexes": [1, 2, 3],
            "depth": 5,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 32,
            "in_channels": 3,
            "intermediate_size": 64,
            "num_heads": 2,
            "num_position_embeddings": 100,
            "out_hidden_size": 32,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2
        }
    })
}

/// A chat template of our own for the stand-in: one user turn, each image as
/// `<|vision_start|><|image_pad|><|vision_end|>`, then the text (the Qwen3-VL shape of one
/// turn; the real backbone's template comes with its processor files).
const STAND_IN_TEMPLATE: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message.role + '\\n' }}\
{% for part in message.content %}\
{% if part.type == 'image' %}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}\
{% else %}{{ part.text }}{% endif %}\
{% endfor %}\
{{ '<|im_end|>\\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The stand-in processor files: the tiny backbone config, a byte-level tokenizer with the
/// Qwen3-VL special tokens, the template above and the Qwen image processor's settings.
fn write_stand_in_processor(dir: &Path) -> anyhow::Result<()> {
    write_byte_tokenizer(dir, &SPECIAL_TOKENS)?;
    write_json(&dir.join("config.json"), &tiny_backbone_config())?;
    write_json(
        &dir.join("chat_template.json"),
        &json!({"chat_template": STAND_IN_TEMPLATE}),
    )?;
    write_json(
        &dir.join("preprocessor_config.json"),
        &json!({
            "size": {"longest_edge": 16_777_216, "shortest_edge": 65_536},
            "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
            "processor_class": "Qwen3VLProcessor",
            "image_processor_type": "Qwen2VLImageProcessorFast"
        }),
    )
}

/// `processor_config.json`, `statistics.json`, `embodiment_id.json` for [`TAG`]: two cameras
/// of two frames (t-15, t0), one state row, 40 action steps (EEF xyz+rot6d and joints
/// relative, gripper absolute), q01/q99 normalisation.
fn processor_files(seed: u64) -> (Value, Value, Value) {
    let keys: Vec<&str> = GROUPS.iter().map(|(g, _)| *g).collect();
    let modality = |delta: Vec<i64>, keys: Value, actions: Value| {
        json!({"delta_indices": delta, "modality_keys": keys, "sin_cos_embedding_keys": null,
               "mean_std_embedding_keys": null, "action_configs": actions})
    };
    let action = |rep: &str, kind: &str, format: &str, key: &str| json!({"rep": rep, "type": kind, "format": format, "state_key": key});
    let processor = json!({
        "processor_class": "Gr00tN1d7Processor",
        "processor_kwargs": {
            "modality_configs": {TAG: {
                "video": modality(vec![-15, 0], json!(CAMERAS), Value::Null),
                "state": modality(vec![0], json!(keys), Value::Null),
                "action": modality((0..HORIZON as i64).collect(), json!(keys), json!([
                    action("RELATIVE", "EEF", "XYZ_ROT6D", "eef_9d"),
                    action("ABSOLUTE", "NON_EEF", "DEFAULT", "gripper_position"),
                    action("RELATIVE", "NON_EEF", "DEFAULT", "joint_position")])),
                "language": modality(vec![0], json!(["annotation.language.language_instruction"]), Value::Null),
            }},
            "image_crop_size": [230, 230],
            "image_target_size": [256, 256],
            "use_albumentations": true,
            "shortest_image_edge": null,
            "crop_fraction": null,
            "model_name": "nvidia/Cosmos-Reason2-2B",
            "model_type": "qwen",
            "formalize_language": true,
            "max_state_dim": 132,
            "max_action_dim": 132,
            "max_action_horizon": HORIZON,
            "use_percentiles": true,
            "use_mean_std": false,
            "clip_outliers": true,
            "apply_sincos_state_encoding": false,
            "use_relative_action": true,
            "exclude_state": false
        }
    });
    let (mut state, mut actions, mut relative) = (
        serde_json::Map::new(),
        serde_json::Map::new(),
        serde_json::Map::new(),
    );
    for (g, dim) in GROUPS {
        state.insert(g.into(), stats(seed, &format!("n17.state.{g}"), dim, None));
        actions.insert(g.into(), stats(seed, &format!("n17.action.{g}"), dim, None));
        if g != "gripper_position" {
            let s = stats(seed, &format!("n17.relative.{g}"), dim, Some(HORIZON));
            relative.insert(g.into(), s);
        }
    }
    let statistics = json!({TAG: {"state": state, "action": actions, "relative_action": relative}});
    (processor, statistics, json!({TAG: PROJECTOR}))
}

/// The demo request: two pattern frames per camera (oldest first), one state row per group
/// (the EEF pose a rotation about z, so rot6d is orthonormal), an instruction, seed 42.
fn demo_request(seed: u64) -> anyhow::Result<Value> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut images = serde_json::Map::new();
    for cam in CAMERAS {
        let frames = ["t-15", "t0"]
            .iter()
            .map(|t| Ok(b64.encode(pattern_png(seed, &format!("{cam}.{t}"), FRAME.0, FRAME.1)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        images.insert(cam.into(), json!(frames));
    }
    let theta = 0.5 * unit(seed, "n17.yaw", 0);
    let (c, s) = (theta.cos(), theta.sin());
    let xyz = (0..3).map(|j| 0.3 * unit(seed, "n17.xyz", j));
    let eef: Vec<f64> = xyz.chain([c, -s, 0.0, s, c, 0.0]).collect();
    let joints: Vec<f64> = (0..7).map(|j| 0.3 * unit(seed, "n17.joints", j)).collect();
    Ok(json!({
        "images": images,
        "state": {
            "eef_9d": [eef],
            "gripper_position": [[0.5 + 0.2 * unit(seed, "n17.gripper", 0)]],
            "joint_position": [joints],
        },
        "instruction": "Put the marker in the pot",
        "seed": 42
    }))
}

/// Writes the tiny N1.7 checkpoint into `dir` (empty). `tokenizer`: copy these processor files
/// (they must include the backbone's `config.json`) instead of writing the stand-in.
pub(crate) fn write_all(
    dir: &Path,
    seed: u64,
    tokenizer: Option<&Path>,
    shards: usize,
) -> anyhow::Result<Written> {
    if let Some(src) = tokenizer
        && !src.join("config.json").is_file()
    {
        bail!(
            "--tokenizer-dir {}: no config.json there (for {CONFIG} the processor files include the backbone's config, which sets its widths)",
            src.display()
        );
    }
    write_json(&dir.join("config.json"), &tiny_config())?;
    let tok_dir = dir.join("tokenizer");
    match tokenizer {
        Some(src) => copy_files(src, &tok_dir)?,
        None => write_stand_in_processor(&tok_dir)?,
    }
    let cfg = N17Config::from_file(&dir.join("config.json"))?;
    let backbone = BackboneConfig::from_dir(&tok_dir).with_context(|| {
        format!(
            "the backbone's config.json of the processor files {}",
            tokenizer.unwrap_or(&tok_dir).display()
        )
    })?;
    let tensors = record_tensors(seed, |rec| {
        Qwen3VlBackbone::load(rec, &backbone, cfg.select_layer).context("building the backbone")?;
        N17ActionHead::load(rec, &cfg).context("building the action head")?;
        Ok(())
    })?;
    write_shards(dir, &tensors, shards)?;
    let (processor, statistics, ids) = processor_files(seed);
    write_json(&dir.join("processor_config.json"), &processor)?;
    write_json(&dir.join("statistics.json"), &statistics)?;
    write_json(&dir.join("embodiment_id.json"), &ids)?;
    // The demo: its expected actions come from this build's f32 CPU forward.
    let vars = [("GR00T_EMBODIMENT".to_owned(), TAG.to_owned())];
    let settings = crate::settings::Settings::from_vars(&vars.into_iter().collect())?;
    let rt = crate::boot::load_runtime(&settings, dir, &tok_dir)?;
    let demo = crate::demo::Demo::produce(&rt, demo_request(seed)?)?;
    demo.write(&dir.join("demo"))?;
    Ok(Written {
        dir: dir.to_path_buf(),
        tensors: tensors.len(),
        bytes: walk_bytes(dir)?,
    })
}
