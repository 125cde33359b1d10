//! The GR00T N1.7 checkpoint configuration (`config.json` written by `Gr00tN1d7.save_pretrained`)
//! and the N1.6 / N1.7 version check a server runs before picking a runtime.
//!
//! The fields are read one by one from the JSON object (not through a serde derive) so that a
//! missing or mistyped field is reported by its dotted name (`diffusion_model_cfg.num_layers`);
//! serde_json's own type errors carry only a line and column.
//!
//! Which fields are REQUIRED: the `Gr00tN1d7Config` class defaults differ from the released
//! GR00T-N1.7-3B (select_layer 12 vs 16, DiT depth 16 vs 32, no vl_self_attention vs 4 layers),
//! so the widths and depths that size the network must come from the file; a checkpoint whose
//! `config.json` lacks them is refused rather than silently given the class value. Fields that
//! only switch behaviour the class default of which is also the released value (horizon 40,
//! widths 132, 4 Euler steps, …) fall back to the class default when absent.

mod fields;

use crate::config::DiffusionConfig;
use crate::json_file::{JsonFileError, parse_json, read_json};
use fields::Fields;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// `model_type` of an N1.7 checkpoint.
pub const MODEL_TYPE_N17: &str = "Gr00tN1d7";
/// `model_type` of an N1.6 checkpoint (see [`crate::config`]).
pub const MODEL_TYPE_N16: &str = "Gr00tN1d6";

/// Why an N1.7 configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum N17ConfigError {
    /// The file cannot be read, is not JSON, or its top level is not an object.
    #[error(transparent)]
    File(#[from] JsonFileError),
    /// A required field is absent.
    #[error("{path}: missing field `{field}`")]
    Missing {
        /// The file at fault.
        path: PathBuf,
        /// Dotted name of the field, e.g. `diffusion_model_cfg.num_layers`.
        field: String,
    },
    /// A field has the wrong JSON type.
    #[error("{path}: field `{field}`: expected {expected}, found {found}")]
    Type {
        /// The file at fault.
        path: PathBuf,
        /// Dotted name of the field.
        field: String,
        /// The type the field must have.
        expected: &'static str,
        /// The value found, as JSON (shortened).
        found: String,
    },
    /// The fields parsed but break a constraint of the forward ([`N17Config::validate`]).
    #[error("{path}: invalid configuration: {problems}")]
    Invalid {
        /// The file at fault.
        path: PathBuf,
        /// Every violated constraint.
        problems: InvalidN17Config,
    },
    /// `model_type` / `architectures` name neither N1.6 nor N1.7.
    #[error(
        "{path}: field `model_type`: {found:?} is neither {MODEL_TYPE_N16} nor {MODEL_TYPE_N17}"
    )]
    UnknownModel {
        /// The file at fault.
        path: PathBuf,
        /// The `model_type` (or first `architectures` entry) found, if any.
        found: Option<String>,
    },
}

/// One violated constraint: the field it is charged to and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// Dotted field name.
    pub field: String,
    /// The constraint, in words.
    pub message: String,
}

/// Every constraint a configuration breaks ([`N17Config::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(|p| format!("`{}`: {}", p.field, p.message)).collect::<Vec<_>>().join("; "))]
pub struct InvalidN17Config(pub Vec<FieldProblem>);

/// Which GR00T generation a checkpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrootVersion {
    /// GR00T N1.6 (Eagle backbone; [`crate::config::ModelConfig`]).
    N16,
    /// GR00T N1.7 (Qwen3-VL backbone; [`N17Config`]).
    N17,
}

/// `vl_self_attention_cfg`: the `SelfAttentionTransformer` over the VL tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct VlSelfAttentionConfig {
    /// Pre-LN transformer blocks (released 4).
    pub num_layers: usize,
    /// Heads per block; `heads * head_dim` must equal `backbone_embedding_dim`.
    pub num_attention_heads: usize,
    /// Width of one head.
    pub attention_head_dim: usize,
    /// Only `None` (JSON null) is supported; absent means `"sinusoidal"` (refused).
    pub positional_embeddings: Option<String>,
}

/// The `Gr00tN1d7Config` fields the inference path reads.
#[derive(Debug, Clone, PartialEq)]
pub struct N17Config {
    /// `"Gr00tN1d7"`.
    pub model_type: String,
    /// Backbone checkpoint (`nvidia/Cosmos-Reason2-2B`); selects the Qwen3-VL backbone.
    pub model_name: String,
    /// Backbone family (`"qwen"`).
    pub backbone_model_type: String,
    /// Qwen3-VL text layers kept; the features are the output of layer `select_layer - 1`.
    pub select_layer: usize,
    /// Width of the backbone features (the LLM hidden size).
    pub backbone_embedding_dim: usize,
    /// Hidden width of the state encoder / action decoder; the DiT's output width.
    pub hidden_size: usize,
    /// Width `D` of the DiT token stream.
    pub input_embedding_dim: usize,
    /// Padded width of one state row.
    pub max_state_dim: usize,
    /// Padded width of one action row.
    pub max_action_dim: usize,
    /// Rows of the predicted chunk.
    pub action_horizon: usize,
    /// State rows the state encoder takes (concatenated).
    pub state_history_length: usize,
    /// Euler steps.
    pub num_inference_timesteps: usize,
    /// Flow time `t` is discretised as `int(t * num_timestep_buckets)`.
    pub num_timestep_buckets: usize,
    /// LayerNorm (`action_head.vlln`) on the backbone features.
    pub use_vlln: bool,
    /// The alternating text/image DiT; must be true.
    pub use_alternate_vl_dit: bool,
    /// Cross block `b` attends the text tokens when `b % (2n) == 0`, the image tokens otherwise.
    pub attend_text_every_n_blocks: usize,
    /// The DiT: N1.6's, with N1.7's defaults for absent fields (released depth 32, class
    /// default 16; `positional_embeddings` absent means the diffusers default `"sinusoidal"`,
    /// which [`N17Config::validate`] refuses; only JSON null is supported).
    pub diffusion_model_cfg: DiffusionConfig,
    /// The VL self-attention stack; `None` when absent, null or `num_layers` 0 (identity).
    pub vl_self_attention_cfg: Option<VlSelfAttentionConfig>,
    /// Embodiment slots of the category-specific weights.
    pub max_num_embodiments: usize,
    /// Learned action position embedding.
    pub add_pos_embed: bool,
    /// Rows of the position-embedding table.
    pub max_seq_len: usize,
    /// Processor: sin/cos encoding of the state groups that ask for it.
    pub apply_sincos_state_encoding: bool,
    /// Processor: normalise with q01/q99 instead of min/max.
    pub use_percentiles: bool,
    /// Processor: relative actions for the groups that declare them.
    pub use_relative_action: bool,
    /// Processor: mean/std normalisation.
    pub use_mean_std: bool,
    /// Processor: lower-case and strip punctuation of the instruction.
    pub formalize_language: bool,
    /// Processor: centre-crop size `[h, w]`.
    pub image_crop_size: Option<[usize; 2]>,
    /// Processor: resize target `[h, w]`.
    pub image_target_size: Option<[usize; 2]>,
    /// Processor: `SmallestMaxSize` edge overriding `image_target_size[0]`.
    pub shortest_image_edge: Option<usize>,
    /// Processor: crop fraction overriding the crop size ratio.
    pub crop_fraction: Option<f64>,
}

impl N17Config {
    /// The released GR00T-N1.7-3B (`shared/golden/gr00t-n17-tiny/full_config.json`): the class
    /// defaults with LeRobot's published overrides (select_layer 16, 32 DiT blocks, 4
    /// vl_self_attention blocks of 32×64).
    pub fn released_3b() -> Self {
        Self {
            model_type: MODEL_TYPE_N17.into(),
            model_name: "nvidia/Cosmos-Reason2-2B".into(),
            backbone_model_type: "qwen".into(),
            select_layer: 16,
            backbone_embedding_dim: 2048,
            hidden_size: 1024,
            input_embedding_dim: 1536,
            max_state_dim: 132,
            max_action_dim: 132,
            action_horizon: 40,
            state_history_length: 1,
            num_inference_timesteps: 4,
            num_timestep_buckets: 1000,
            use_vlln: true,
            use_alternate_vl_dit: true,
            attend_text_every_n_blocks: 2,
            diffusion_model_cfg: DiffusionConfig {
                num_layers: 32,
                num_attention_heads: 32,
                attention_head_dim: 48,
                output_dim: 1024,
                norm_type: "ada_norm".into(),
                interleave_self_attention: true,
                positional_embeddings: None,
            },
            vl_self_attention_cfg: Some(VlSelfAttentionConfig {
                num_layers: 4,
                num_attention_heads: 32,
                attention_head_dim: 64,
                positional_embeddings: None,
            }),
            max_num_embodiments: 32,
            add_pos_embed: true,
            max_seq_len: 1024,
            apply_sincos_state_encoding: false,
            use_percentiles: true,
            use_relative_action: false,
            use_mean_std: false,
            formalize_language: true,
            image_crop_size: Some([230, 230]),
            image_target_size: Some([256, 256]),
            shortest_image_edge: None,
            crop_fraction: None,
        }
    }

    /// Reads and validates a checkpoint's `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, N17ConfigError> {
        Self::from_root(&read_json(path)?, path)
    }

    /// Parses and validates `text`; `path` only labels the errors.
    pub fn from_json_str(text: &str, path: &Path) -> Result<Self, N17ConfigError> {
        Self::from_root(&parse_json(text, path)?, path)
    }

    fn from_root(root: &Map<String, Value>, path: &Path) -> Result<Self, N17ConfigError> {
        let cfg = Self::from_object(root, path)?;
        cfg.validate().map_err(|problems| N17ConfigError::Invalid {
            path: path.to_owned(),
            problems,
        })?;
        Ok(cfg)
    }

    fn from_object(root: &Map<String, Value>, path: &Path) -> Result<Self, N17ConfigError> {
        let f = Fields {
            obj: root,
            prefix: "",
            path,
        };
        let model_type = f.string("model_type")?;
        if model_type != MODEL_TYPE_N17 {
            return Err(N17ConfigError::UnknownModel {
                path: path.to_owned(),
                found: Some(model_type),
            });
        }
        let dit = f
            .object("diffusion_model_cfg")?
            .ok_or_else(|| f.missing("diffusion_model_cfg"))?;
        let dit = Fields {
            obj: dit,
            prefix: "diffusion_model_cfg.",
            path,
        };
        let diffusion_model_cfg = DiffusionConfig {
            num_layers: dit.usize("num_layers")?,
            num_attention_heads: dit.usize("num_attention_heads")?,
            attention_head_dim: dit.usize("attention_head_dim")?,
            output_dim: dit.usize("output_dim")?,
            // DiT (diffusers) class defaults when absent.
            norm_type: dit.string_or("norm_type", "ada_norm")?,
            interleave_self_attention: dit.bool_or("interleave_self_attention", false)?,
            positional_embeddings: dit
                .opt_string_or("positional_embeddings", Some("sinusoidal"))?,
        };
        let vl_self_attention_cfg = match f.object("vl_self_attention_cfg")? {
            None => None,
            Some(o) => {
                let s = Fields {
                    obj: o,
                    prefix: "vl_self_attention_cfg.",
                    path,
                };
                // The reference builds the stack only when num_layers > 0 (identity otherwise).
                match s.usize_or("num_layers", 0)? {
                    0 => None,
                    n => Some(VlSelfAttentionConfig {
                        num_layers: n,
                        // SelfAttentionTransformer class defaults when absent.
                        num_attention_heads: s.usize_or("num_attention_heads", 8)?,
                        attention_head_dim: s.usize_or("attention_head_dim", 64)?,
                        positional_embeddings: s
                            .opt_string_or("positional_embeddings", Some("sinusoidal"))?,
                    }),
                }
            }
        };
        let d = Self::released_3b();
        Ok(Self {
            model_type,
            model_name: f.string_or("model_name", &d.model_name)?,
            backbone_model_type: f.string_or("backbone_model_type", &d.backbone_model_type)?,
            select_layer: f.usize("select_layer")?,
            backbone_embedding_dim: f.usize("backbone_embedding_dim")?,
            hidden_size: f.usize("hidden_size")?,
            input_embedding_dim: f.usize("input_embedding_dim")?,
            max_state_dim: f.usize_or("max_state_dim", d.max_state_dim)?,
            max_action_dim: f.usize_or("max_action_dim", d.max_action_dim)?,
            action_horizon: f.usize_or("action_horizon", d.action_horizon)?,
            state_history_length: f.usize_or("state_history_length", d.state_history_length)?,
            num_inference_timesteps: f
                .usize_or("num_inference_timesteps", d.num_inference_timesteps)?,
            num_timestep_buckets: f.usize_or("num_timestep_buckets", d.num_timestep_buckets)?,
            use_vlln: f.bool_or("use_vlln", d.use_vlln)?,
            use_alternate_vl_dit: f.bool_or("use_alternate_vl_dit", d.use_alternate_vl_dit)?,
            attend_text_every_n_blocks: f
                .usize_or("attend_text_every_n_blocks", d.attend_text_every_n_blocks)?,
            diffusion_model_cfg,
            vl_self_attention_cfg,
            max_num_embodiments: f.usize_or("max_num_embodiments", d.max_num_embodiments)?,
            add_pos_embed: f.bool_or("add_pos_embed", d.add_pos_embed)?,
            max_seq_len: f.usize_or("max_seq_len", d.max_seq_len)?,
            apply_sincos_state_encoding: f
                .bool_or("apply_sincos_state_encoding", d.apply_sincos_state_encoding)?,
            use_percentiles: f.bool_or("use_percentiles", d.use_percentiles)?,
            use_relative_action: f.bool_or("use_relative_action", d.use_relative_action)?,
            use_mean_std: f.bool_or("use_mean_std", d.use_mean_std)?,
            formalize_language: f.bool_or("formalize_language", d.formalize_language)?,
            image_crop_size: f.opt_pair_or("image_crop_size", d.image_crop_size)?,
            image_target_size: f.opt_pair_or("image_target_size", d.image_target_size)?,
            shortest_image_edge: f.opt_usize("shortest_image_edge")?,
            crop_fraction: f.opt_f64("crop_fraction")?,
        })
    }

    /// The structural constraints the head relies on; every violation, by field.
    pub fn validate(&self) -> Result<(), InvalidN17Config> {
        let mut p = Vec::new();
        let mut bad = |field: &str, message: String| {
            p.push(FieldProblem {
                field: field.into(),
                message,
            })
        };
        let dc = &self.diffusion_model_cfg;
        if dc.num_attention_heads * dc.attention_head_dim != self.input_embedding_dim {
            bad(
                "diffusion_model_cfg.attention_head_dim",
                format!(
                    "heads {} x head_dim {} != input_embedding_dim {}",
                    dc.num_attention_heads, dc.attention_head_dim, self.input_embedding_dim
                ),
            );
        }
        if dc.output_dim != self.hidden_size {
            bad(
                "diffusion_model_cfg.output_dim",
                format!("{} != hidden_size {}", dc.output_dim, self.hidden_size),
            );
        }
        if dc.norm_type != "ada_norm" {
            bad(
                "diffusion_model_cfg.norm_type",
                format!("{:?} is not supported (only \"ada_norm\")", dc.norm_type),
            );
        }
        if !dc.interleave_self_attention {
            bad(
                "diffusion_model_cfg.interleave_self_attention",
                "must be true (the alternate VL-DiT asserts it)".into(),
            );
        }
        if let Some(pe) = &dc.positional_embeddings {
            bad(
                "diffusion_model_cfg.positional_embeddings",
                format!("{pe:?} is not supported (only null)"),
            );
        }
        if let Some(s) = &self.vl_self_attention_cfg {
            if s.num_attention_heads * s.attention_head_dim != self.backbone_embedding_dim {
                bad(
                    "vl_self_attention_cfg.attention_head_dim",
                    format!(
                        "heads {} x head_dim {} != backbone_embedding_dim {}",
                        s.num_attention_heads, s.attention_head_dim, self.backbone_embedding_dim
                    ),
                );
            }
            if let Some(pe) = &s.positional_embeddings {
                bad(
                    "vl_self_attention_cfg.positional_embeddings",
                    format!("{pe:?} is not supported (only null)"),
                );
            }
        }
        if !self.use_alternate_vl_dit {
            bad(
                "use_alternate_vl_dit",
                "only the alternate VL-DiT is supported".into(),
            );
        }
        if self.attend_text_every_n_blocks == 0 {
            bad("attend_text_every_n_blocks", "must be > 0".into());
        }
        if self.input_embedding_dim == 0 || !self.input_embedding_dim.is_multiple_of(2) {
            bad(
                "input_embedding_dim",
                "must be even and > 0 (sinusoid)".into(),
            );
        }
        if self.add_pos_embed && self.action_horizon > self.max_seq_len {
            bad(
                "action_horizon",
                format!("{} > max_seq_len {}", self.action_horizon, self.max_seq_len),
            );
        }
        for (field, v) in [
            ("select_layer", self.select_layer),
            ("action_horizon", self.action_horizon),
            ("state_history_length", self.state_history_length),
            ("num_inference_timesteps", self.num_inference_timesteps),
            ("max_num_embodiments", self.max_num_embodiments),
            ("max_state_dim", self.max_state_dim),
            ("max_action_dim", self.max_action_dim),
        ] {
            if v == 0 {
                bad(field, "must be > 0".into());
            }
        }
        // `get_backbone_cls`: only the Qwen3-VL family is wired to the N1.7 head.
        if !(self.model_name.contains("nvidia/Cosmos-Reason2")
            || self.model_name.contains("Qwen/Qwen3-VL"))
        {
            bad(
                "model_name",
                format!("{:?}: unsupported backbone", self.model_name),
            );
        }
        if p.is_empty() {
            Ok(())
        } else {
            Err(InvalidN17Config(p))
        }
    }
}

/// N1.6 or N1.7 by `model_type`, else by the first `architectures` entry; `None` when neither
/// names a known generation.
pub fn detect_version(config: &Value) -> Option<GrootVersion> {
    let by_name = |s: &str| match s {
        MODEL_TYPE_N17 => Some(GrootVersion::N17),
        MODEL_TYPE_N16 => Some(GrootVersion::N16),
        _ => None,
    };
    let model_type = config.get("model_type").and_then(Value::as_str);
    let arch = config
        .get("architectures")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str);
    model_type
        .and_then(by_name)
        .or_else(|| arch.and_then(by_name))
}

/// [`detect_version`] of a `config.json` file.
pub fn detect_version_file(path: &Path) -> Result<GrootVersion, N17ConfigError> {
    // Read as an object so that a file whose top level is not one is located like a parse
    // error.
    let root = Value::Object(read_json(path)?);
    detect_version(&root).ok_or_else(|| N17ConfigError::UnknownModel {
        path: path.to_owned(),
        found: root
            .get("model_type")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}
