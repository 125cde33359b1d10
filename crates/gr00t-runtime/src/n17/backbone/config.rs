//! The Qwen3-VL backbone configuration, read from the backbone's own `config.json` (the
//! `nvidia/Cosmos-Reason2-2B` folder: `vision_config`, `text_config`, special token ids).
//!
//! Fields are read one by one from the JSON tree rather than through a derived schema so that
//! every error names the file and the dotted field (`text_config.rope_scaling.mrope_section`):
//! the config comes from a gated hub repo we cannot inspect, and a wrong or missing key there
//! must be findable from the message alone.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Why the backbone configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BackboneConfigError {
    /// The file cannot be read, or is not valid JSON for what was expected.
    #[error(transparent)]
    File(#[from] crate::json_file::JsonFileError),
    /// A field is missing or has the wrong JSON type.
    #[error("{path}: field `{field}`: {message}")]
    Field {
        /// The file.
        path: PathBuf,
        /// Dotted path of the field, e.g. `vision_config.depth`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The fields parse but break a constraint the forward relies on.
    #[error("{path}: field `{field}`: invalid: {message}")]
    Invalid {
        /// The file (or `<built-in>` for a constructed config).
        path: PathBuf,
        /// Dotted path of the offending field.
        field: String,
        /// The violated constraint.
        message: String,
    },
}

/// `vision_config`: the Qwen3-VL vision tower.
#[derive(Debug, Clone, PartialEq)]
pub struct VisionCfg {
    /// Vision blocks.
    pub depth: usize,
    /// Token width `C` of the tower.
    pub hidden_size: usize,
    /// MLP width of a block.
    pub intermediate_size: usize,
    /// Attention heads per block (head_dim = hidden_size / num_heads).
    pub num_heads: usize,
    /// Rows of the learned position table, a perfect square `N²` (an `N × N` grid).
    pub num_position_embeddings: usize,
    /// Output width of the mergers (= the LLM hidden size).
    pub out_hidden_size: usize,
    /// Spatial patch side in pixels.
    pub patch_size: usize,
    /// Side of the square block of patches merged into one LLM token.
    pub spatial_merge_size: usize,
    /// Frames per temporal patch (a still image is duplicated to it).
    pub temporal_patch_size: usize,
    /// Image channels.
    pub in_channels: usize,
    /// Blocks whose outputs feed the deepstack mergers, in merger order.
    pub deepstack_visual_indexes: Vec<usize>,
}

impl VisionCfg {
    /// Width of one pixel row of `pixel_values`: channels × temporal × patch × patch.
    pub fn patch_dim(&self) -> usize {
        self.in_channels * self.temporal_patch_size * self.patch_size * self.patch_size
    }
    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }
    /// Patches merged into one LLM token (`spatial_merge_size²`).
    pub fn merge_unit(&self) -> usize {
        self.spatial_merge_size * self.spatial_merge_size
    }
}

/// `text_config`: the Qwen3 text model.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCfg {
    /// Residual-stream width.
    pub hidden_size: usize,
    /// SwiGLU MLP width.
    pub intermediate_size: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (grouped-query attention).
    pub num_key_value_heads: usize,
    /// Width of one head (may differ from hidden_size / heads).
    pub head_dim: usize,
    /// Decoder layers of the full model (GR00T keeps the first `select_layer`).
    pub num_hidden_layers: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// Frequencies given to the (T, H, W) position rows; sums to head_dim / 2.
    pub mrope_section: [usize; 3],
    /// Token-embedding rows.
    pub vocab_size: usize,
    /// Whether q/k/v projections carry a bias.
    pub attention_bias: bool,
}

/// The backbone's `config.json` (`Qwen3VLConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct BackboneConfig {
    /// The vision tower.
    pub vision: VisionCfg,
    /// The text model.
    pub text: TextCfg,
    /// `<|image_pad|>` (151655): rows replaced by image embeddings.
    pub image_token_id: u32,
    /// `<|vision_start|>` (151652): precedes each image's run of image tokens.
    pub vision_start_token_id: u32,
}

/// Reads dotted fields of one JSON document, naming the file and field in every error.
struct Fields<'a> {
    path: &'a Path,
    root: &'a Value,
}

impl Fields<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> BackboneConfigError {
        BackboneConfigError::Field {
            path: self.path.to_owned(),
            field: field.to_owned(),
            message: message.into(),
        }
    }
    fn opt(&self, field: &str) -> Option<&Value> {
        field
            .split('.')
            .try_fold(self.root, |v, key| v.get(key))
            .filter(|v| !v.is_null())
    }
    fn get(&self, field: &str) -> Result<&Value, BackboneConfigError> {
        self.opt(field).ok_or_else(|| self.err(field, "missing"))
    }
    fn usize(&self, field: &str) -> Result<usize, BackboneConfigError> {
        let v = self.get(field)?;
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| self.err(field, format!("expected a non-negative integer, found {v}")))
    }
    fn u32(&self, field: &str) -> Result<u32, BackboneConfigError> {
        let n = self.usize(field)?;
        u32::try_from(n).map_err(|_| self.err(field, format!("{n} is not a 32-bit token id")))
    }
    fn f64(&self, field: &str) -> Result<f64, BackboneConfigError> {
        let v = self.get(field)?;
        v.as_f64()
            .ok_or_else(|| self.err(field, format!("expected a number, found {v}")))
    }
    fn bool_or(&self, field: &str, default: bool) -> Result<bool, BackboneConfigError> {
        match self.opt(field) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.err(field, format!("expected a boolean, found {v}"))),
        }
    }
    fn usizes(&self, field: &str) -> Result<Vec<usize>, BackboneConfigError> {
        let v = self.get(field)?;
        let arr = v
            .as_array()
            .ok_or_else(|| self.err(field, format!("expected an array, found {v}")))?;
        arr.iter()
            .map(|e| {
                e.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| self.err(field, format!("expected integers, found {e}")))
            })
            .collect()
    }
    /// A string field that, when present, must equal `want` (the only variant implemented).
    fn expect_str(&self, field: &str, want: &str) -> Result<(), BackboneConfigError> {
        match self.opt(field) {
            None => Ok(()),
            Some(v) if v.as_str() == Some(want) => Ok(()),
            Some(v) => Err(self.err(field, format!("only \"{want}\" is supported, found {v}"))),
        }
    }
}

impl BackboneConfig {
    /// Reads `dir/config.json`.
    pub fn from_dir(dir: &Path) -> Result<Self, BackboneConfigError> {
        Self::from_file(&dir.join("config.json"))
    }

    /// Reads a `Qwen3VLConfig` JSON file and validates it.
    pub fn from_file(path: &Path) -> Result<Self, BackboneConfigError> {
        let root: Value = crate::json_file::read_json(path)?;
        let f = Fields { path, root: &root };
        let section = f.usizes("text_config.rope_scaling.mrope_section")?;
        let mrope_section: [usize; 3] = section.as_slice().try_into().map_err(|_| {
            f.err(
                "text_config.rope_scaling.mrope_section",
                format!("expected 3 entries (t, h, w), found {}", section.len()),
            )
        })?;
        // Qwen3-VL's text rotary embedding always interleaves the sections; a config that says
        // otherwise describes a model this forward does not implement.
        if !f.bool_or("text_config.rope_scaling.mrope_interleaved", true)? {
            return Err(f.err(
                "text_config.rope_scaling.mrope_interleaved",
                "only the interleaved M-RoPE layout is supported",
            ));
        }
        f.expect_str("vision_config.hidden_act", "gelu_pytorch_tanh")?;
        f.expect_str("text_config.hidden_act", "silu")?;
        f.expect_str("text_config.rope_scaling.rope_type", "default")?;
        let cfg = Self {
            vision: VisionCfg {
                depth: f.usize("vision_config.depth")?,
                hidden_size: f.usize("vision_config.hidden_size")?,
                intermediate_size: f.usize("vision_config.intermediate_size")?,
                num_heads: f.usize("vision_config.num_heads")?,
                num_position_embeddings: f.usize("vision_config.num_position_embeddings")?,
                out_hidden_size: f.usize("vision_config.out_hidden_size")?,
                patch_size: f.usize("vision_config.patch_size")?,
                spatial_merge_size: f.usize("vision_config.spatial_merge_size")?,
                temporal_patch_size: f.usize("vision_config.temporal_patch_size")?,
                in_channels: f.usize("vision_config.in_channels")?,
                deepstack_visual_indexes: f.usizes("vision_config.deepstack_visual_indexes")?,
            },
            text: TextCfg {
                hidden_size: f.usize("text_config.hidden_size")?,
                intermediate_size: f.usize("text_config.intermediate_size")?,
                num_attention_heads: f.usize("text_config.num_attention_heads")?,
                num_key_value_heads: f.usize("text_config.num_key_value_heads")?,
                head_dim: f.usize("text_config.head_dim")?,
                num_hidden_layers: f.usize("text_config.num_hidden_layers")?,
                rms_norm_eps: f.f64("text_config.rms_norm_eps")?,
                rope_theta: f.f64("text_config.rope_theta")?,
                mrope_section,
                vocab_size: f.usize("text_config.vocab_size")?,
                attention_bias: f.bool_or("text_config.attention_bias", false)?,
            },
            image_token_id: f.u32("image_token_id")?,
            vision_start_token_id: f.u32("vision_start_token_id")?,
        };
        cfg.validate_at(path)?;
        Ok(cfg)
    }

    /// The released Cosmos-Reason2-2B backbone of GR00T-N1.7-3B (values of
    /// `shared/golden/gr00t-n17-tiny/full_config.json`, `cosmos_reason2_2b_config`).
    pub fn cosmos_reason2_2b() -> Self {
        Self {
            vision: VisionCfg {
                depth: 24,
                hidden_size: 1024,
                intermediate_size: 4096,
                num_heads: 16,
                num_position_embeddings: 2304,
                out_hidden_size: 2048,
                patch_size: 16,
                spatial_merge_size: 2,
                temporal_patch_size: 2,
                in_channels: 3,
                deepstack_visual_indexes: vec![5, 11, 17],
            },
            text: TextCfg {
                hidden_size: 2048,
                intermediate_size: 6144,
                num_attention_heads: 16,
                num_key_value_heads: 8,
                head_dim: 128,
                num_hidden_layers: 28,
                rms_norm_eps: 1e-6,
                rope_theta: 5_000_000.0,
                mrope_section: [24, 20, 20],
                vocab_size: 151_936,
                attention_bias: false,
            },
            image_token_id: 151_655,
            vision_start_token_id: 151_652,
        }
    }

    /// Checks the structural constraints the forward relies on (the first one broken).
    pub fn validate(&self) -> Result<(), BackboneConfigError> {
        self.validate_at(Path::new("<built-in>"))
    }

    fn validate_at(&self, path: &Path) -> Result<(), BackboneConfigError> {
        let bad = |field: &str, message: String| BackboneConfigError::Invalid {
            path: path.to_owned(),
            field: field.to_owned(),
            message,
        };
        let (v, t) = (&self.vision, &self.text);
        let positive = [
            ("vision_config.depth", v.depth),
            ("vision_config.hidden_size", v.hidden_size),
            ("vision_config.intermediate_size", v.intermediate_size),
            ("vision_config.num_heads", v.num_heads),
            (
                "vision_config.num_position_embeddings",
                v.num_position_embeddings,
            ),
            ("vision_config.out_hidden_size", v.out_hidden_size),
            ("vision_config.patch_size", v.patch_size),
            ("vision_config.spatial_merge_size", v.spatial_merge_size),
            ("vision_config.temporal_patch_size", v.temporal_patch_size),
            ("vision_config.in_channels", v.in_channels),
            ("text_config.hidden_size", t.hidden_size),
            ("text_config.intermediate_size", t.intermediate_size),
            ("text_config.num_attention_heads", t.num_attention_heads),
            ("text_config.num_key_value_heads", t.num_key_value_heads),
            ("text_config.head_dim", t.head_dim),
            ("text_config.num_hidden_layers", t.num_hidden_layers),
            ("text_config.vocab_size", t.vocab_size),
        ];
        for (field, n) in positive {
            if n == 0 {
                return Err(bad(field, "must be positive".into()));
            }
        }
        if !v.hidden_size.is_multiple_of(v.num_heads) || !v.head_dim().is_multiple_of(4) {
            return Err(bad(
                "vision_config.num_heads",
                format!(
                    "hidden_size {} / num_heads {} must be a head width divisible by 4 (2-D RoPE)",
                    v.hidden_size, v.num_heads
                ),
            ));
        }
        let side = (v.num_position_embeddings as f64).sqrt().round() as usize;
        if side * side != v.num_position_embeddings {
            return Err(bad(
                "vision_config.num_position_embeddings",
                format!("{} is not a square grid", v.num_position_embeddings),
            ));
        }
        if let Some(&i) = v.deepstack_visual_indexes.iter().find(|&&i| i >= v.depth) {
            return Err(bad(
                "vision_config.deepstack_visual_indexes",
                format!("block {i} is past depth {}", v.depth),
            ));
        }
        if v.out_hidden_size != t.hidden_size {
            return Err(bad(
                "vision_config.out_hidden_size",
                format!(
                    "{} must equal text_config.hidden_size {}",
                    v.out_hidden_size, t.hidden_size
                ),
            ));
        }
        if !t.num_attention_heads.is_multiple_of(t.num_key_value_heads) {
            return Err(bad(
                "text_config.num_key_value_heads",
                format!(
                    "{} must divide num_attention_heads {}",
                    t.num_key_value_heads, t.num_attention_heads
                ),
            ));
        }
        if !t.head_dim.is_multiple_of(2) || t.mrope_section.iter().sum::<usize>() != t.head_dim / 2
        {
            return Err(bad(
                "text_config.rope_scaling.mrope_section",
                format!(
                    "{:?} must sum to head_dim / 2 = {} (head_dim {} even)",
                    t.mrope_section,
                    t.head_dim / 2,
                    t.head_dim
                ),
            ));
        }
        // The interleave gives H the frequencies 1, 4, … < 3·sec[1] and W 2, 5, … < 3·sec[2];
        // they only fit in head_dim / 2 when T keeps at least as many as H and W.
        if t.mrope_section[1] > t.mrope_section[0] || t.mrope_section[2] > t.mrope_section[0] {
            return Err(bad(
                "text_config.rope_scaling.mrope_section",
                format!("{:?}: the t section must be the largest", t.mrope_section),
            ));
        }
        if !t.rope_theta.is_finite() || t.rope_theta <= 0.0 {
            return Err(bad("text_config.rope_theta", "must be positive".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_config_is_valid() {
        BackboneConfig::cosmos_reason2_2b().validate().unwrap();
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let dir = std::env::temp_dir().join(format!("n17-bb-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        std::fs::write(&path, r#"{"vision_config": {"depth": "five"}}"#).unwrap();
        let e = BackboneConfig::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("config.json"), "{e}");
        assert!(e.contains("text_config.rope_scaling.mrope_section"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
