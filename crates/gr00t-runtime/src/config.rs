//! Model configuration: the checkpoint's `config.json` (`Gr00tN1d6Config`, HF "diff" form) and
//! the Eagle VLM sub-configuration (SigLIP2 vision tower + Qwen3 text model).
//!
//! The checkpoint's `config.json` omits every key equal to the `Gr00tN1d6Config` class default, so
//! every field here carries that default. The Eagle configuration is never read from the real
//! checkpoint (the reference always loads its bundled copy), so [`EagleConfig::full_size`] is the
//! default; a checkpoint directory may carry an `eagle_config.json` to override it (tiny goldens).

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Why a configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read, or is not valid JSON for what was expected.
    #[error(transparent)]
    File(#[from] crate::json_file::JsonFileError),
    /// The configuration parsed but breaks a constraint of [`ModelConfig::validate`].
    #[error("{path}: invalid configuration: {message}")]
    Invalid {
        /// The checkpoint's `config.json`.
        path: PathBuf,
        /// Every violated constraint, joined with `; `.
        message: String,
    },
}

/// The structural constraints a configuration breaks ([`ModelConfig::validate`]), each in
/// words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct InvalidConfig(pub Vec<String>);

/// `diffusion_model_cfg`: the DiT (`AlternateVLDiT`) of N1.6 and N1.7. The defaults are N1.6's;
/// N1.7 reads the fields one by one with its own ([`crate::n17::config::N17Config`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct DiffusionConfig {
    /// Number of DiT transformer blocks.
    pub num_layers: usize,
    /// Attention heads per DiT block; `num_attention_heads * attention_head_dim` must equal `input_embedding_dim`.
    pub num_attention_heads: usize,
    /// Width of one DiT attention head.
    pub attention_head_dim: usize,
    /// Width of the DiT's output (`proj_out_2`); must equal [`Gr00tConfig::hidden_size`], the action decoder's input width.
    pub output_dim: usize,
    /// Block normalization; only `"ada_norm"` (timestep-conditioned adaptive LayerNorm) is supported.
    pub norm_type: String,
    /// Whether cross-attention blocks alternate with self-attention blocks; must be `true`.
    pub interleave_self_attention: bool,
    /// DiT-internal positional embedding kind; `None` (the default) means none. Not read by the forward.
    pub positional_embeddings: Option<String>,
}

impl Default for DiffusionConfig {
    fn default() -> Self {
        Self {
            num_layers: 32,
            num_attention_heads: 32,
            attention_head_dim: 48,
            output_dim: 1024,
            norm_type: "ada_norm".into(),
            interleave_self_attention: true,
            positional_embeddings: None,
        }
    }
}

/// The action-head / top-level fields of `Gr00tN1d6Config` that matter at inference.
/// Defaults are the class defaults (`gr00t/configs/model/gr00t_n1d6.py`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct Gr00tConfig {
    /// Width of the VLM features fed to the action head; must equal the Qwen3 `hidden_size`.
    pub backbone_embedding_dim: usize,
    /// How many Qwen3 decoder layers run: the backbone features are the hidden state after this many layers (`1..=num_hidden_layers`).
    pub select_layer: usize,
    /// Padded state width the state encoder takes; a robot's state is zero-padded to it.
    pub max_state_dim: usize,
    /// Padded action width of the action encoder and decoder; an embodiment's actions occupy the leading columns.
    pub max_action_dim: usize,
    /// Actions per predicted chunk (rows of the action tensor); at most `max_seq_len`.
    pub action_horizon: usize,
    /// Hidden width of the per-embodiment state encoder and action decoder MLPs; also the DiT's output width.
    pub hidden_size: usize,
    /// Width `D` of the DiT token stream (state/action token embeddings); must be even (sinusoidal timestep encoding).
    pub input_embedding_dim: usize,
    /// Whether the learned `action_head.position_embedding.weight` (`[max_seq_len, input_embedding_dim]`) is added to the action tokens.
    pub add_pos_embed: bool,
    /// Whether the backbone features pass through a LayerNorm (`action_head.vlln`) before the DiT.
    pub use_vlln: bool,
    /// Rows of the action position-embedding table; bounds `action_horizon`.
    pub max_seq_len: usize,
    /// Selects the `AlternateVLDiT`, the only DiT supported; must be `true`.
    pub use_alternate_vl_dit: bool,
    /// Cross-attention block `i` attends the text tokens when `i % (2 * n) == 0`, the image tokens otherwise; must be > 0.
    pub attend_text_every_n_blocks: usize,
    /// The DiT sub-configuration (`diffusion_model_cfg`).
    pub diffusion_model_cfg: DiffusionConfig,
    /// Flow-matching Euler steps per action chunk.
    pub num_inference_timesteps: usize,
    /// The flow time `t` in `[0, 1)` is discretized to `floor(t * num_timestep_buckets)` before the timestep embedding.
    pub num_timestep_buckets: usize,
    /// Embodiment slots in the category-specific (per-embodiment) weights; a request's `embodiment_id` must be below it.
    pub max_num_embodiments: usize,
    /// Training-only probability of dropping the state input; unused at inference.
    pub state_dropout_prob: f64,
}

impl Default for Gr00tConfig {
    fn default() -> Self {
        Self {
            backbone_embedding_dim: 2048,
            select_layer: 16,
            max_state_dim: 29,
            max_action_dim: 29,
            action_horizon: 16,
            hidden_size: 1024,
            input_embedding_dim: 1536,
            add_pos_embed: true,
            use_vlln: true,
            max_seq_len: 1024,
            use_alternate_vl_dit: true,
            attend_text_every_n_blocks: 2,
            diffusion_model_cfg: DiffusionConfig::default(),
            num_inference_timesteps: 4,
            num_timestep_buckets: 1000,
            max_num_embodiments: 32,
            state_dropout_prob: 0.0,
        }
    }
}

impl Gr00tConfig {
    /// The real N1.6-3B values (`full_config.json` of the goldens): padded state/action width 128,
    /// horizon 50; everything else is the class default.
    pub fn full_size() -> Self {
        Self {
            max_state_dim: 128,
            max_action_dim: 128,
            action_horizon: 50,
            ..Self::default()
        }
    }
}

/// SigLIP2 vision tower (`vision_config`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct VisionConfig {
    /// Token width of the vision tower.
    pub hidden_size: usize,
    /// Hidden width of each encoder layer's MLP.
    pub intermediate_size: usize,
    /// Number of SigLIP2 encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per encoder layer; must divide `hidden_size`.
    pub num_attention_heads: usize,
    /// Input image channels (3, RGB); pixel tensors are `[num_channels, H, W]`.
    pub num_channels: usize,
    /// Side of a square patch in pixels.
    pub patch_size: usize,
    /// Patches per image (a square number; 256 = a 16×16 grid), i.e. rows of the position embedding.
    pub num_patches: usize,
    /// Epsilon of the tower's LayerNorms.
    pub layer_norm_eps: f64,
    /// Activation of the encoder MLPs; the forward implements only `gelu_pytorch_tanh` and does not read this key.
    pub hidden_act: String,
    /// Rotary position embedding in the tower; `false` for SigLIP2 and not read by the forward.
    pub use_rope: bool,
    /// Windowed attention in the tower; `false` for SigLIP2 and not read by the forward.
    pub use_windows_attn: bool,
}

impl Default for VisionConfig {
    fn default() -> Self {
        Self {
            hidden_size: 1152,
            intermediate_size: 4304,
            num_hidden_layers: 27,
            num_attention_heads: 16,
            num_channels: 3,
            patch_size: 14,
            num_patches: 256,
            layer_norm_eps: 1e-6,
            hidden_act: "gelu_pytorch_tanh".into(),
            use_rope: false,
            use_windows_attn: false,
        }
    }
}

/// Qwen3 text model (`text_config`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct TextConfig {
    /// Residual-stream width; must equal [`Gr00tConfig::backbone_embedding_dim`].
    pub hidden_size: usize,
    /// Hidden width of each decoder layer's SwiGLU MLP.
    pub intermediate_size: usize,
    /// Decoder layers in the full model; only the first [`Gr00tConfig::select_layer`] run.
    pub num_hidden_layers: usize,
    /// Query heads per attention layer; a multiple of `num_key_value_heads`.
    pub num_attention_heads: usize,
    /// Key/value heads per attention layer (grouped-query attention).
    pub num_key_value_heads: usize,
    /// Width of one attention head; must be even (RoPE rotates pairs).
    pub head_dim: usize,
    /// Epsilon of the RMSNorms.
    pub rms_norm_eps: f64,
    /// RoPE base frequency.
    pub rope_theta: f64,
    /// Rows of the token-embedding table.
    pub vocab_size: usize,
    /// MLP activation; the forward implements only `silu` and does not read this key.
    pub hidden_act: String,
    /// Whether the q/k/v projections carry a bias (`o_proj` never does).
    pub attention_bias: bool,
}

impl Default for TextConfig {
    fn default() -> Self {
        Self {
            hidden_size: 2048,
            intermediate_size: 6144,
            num_hidden_layers: 28,
            num_attention_heads: 16,
            num_key_value_heads: 8,
            head_dim: 128,
            rms_norm_eps: 1e-6,
            rope_theta: 1_000_000.0,
            vocab_size: 151_680,
            hidden_act: "silu".into(),
            attention_bias: false,
        }
    }
}

/// The Eagle-Block2A-2B-v2 configuration (the bundled `config.json`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct EagleConfig {
    /// The SigLIP2 vision tower.
    pub vision_config: VisionConfig,
    /// The Qwen3 text model.
    pub text_config: TextConfig,
    /// Token id of `<IMG_CONTEXT>`: the placeholders in `input_ids` that image features replace.
    pub image_token_index: u32,
    /// Pixel-(un)shuffle ratio between vision patches and image tokens; only 0.5 (2×2 patches per token) is supported.
    pub downsample_ratio: f64,
    /// Whether the vision features are pixel-unshuffled before the connector; must be `true`.
    pub use_pixel_shuffle: bool,
    /// Linear layers in the vision-to-LLM MLP connector (`mlp1`); not read by the forward.
    pub mlp_connector_layers: usize,
    /// Vision tower layer whose output is used; `-1` is the last. Not read by the forward.
    pub select_layer: i64,
}

impl Default for EagleConfig {
    fn default() -> Self {
        Self {
            vision_config: VisionConfig::default(),
            text_config: TextConfig::default(),
            image_token_index: 151_669,
            downsample_ratio: 0.5,
            use_pixel_shuffle: true,
            mlp_connector_layers: 2,
            select_layer: -1,
        }
    }
}

impl EagleConfig {
    /// The bundled full-size values (SigLIP2 1152×27, Qwen3-1.7B).
    pub fn full_size() -> Self {
        Self::default()
    }
}

/// Everything the forward needs: the action-head config plus the Eagle sub-config.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The action-head / top-level `config.json` values.
    pub gr00t: Gr00tConfig,
    /// The Eagle VLM values (bundled default or `eagle_config.json`).
    pub eagle: EagleConfig,
}

/// File names inside a checkpoint directory.
pub const CONFIG_FILE: &str = "config.json";
/// File name of the optional Eagle override inside a checkpoint directory.
pub const EAGLE_CONFIG_FILE: &str = "eagle_config.json";

impl ModelConfig {
    /// The backbone's stages as the device would run them, for a prompt of `prompt_tokens`
    /// tokens and `images` square views of `image_side` pixels (after `smart_resize`: 252 for
    /// the GR1 examples' 256-pixel camera): SigLIP2 over each view's patches, the projector over
    /// a quarter of them (2×2 pixel-unshuffle), Qwen3's first `select_layer` layers over the
    /// prompt.
    pub fn backbone_dims(
        &self,
        prompt_tokens: usize,
        images: usize,
        image_side: usize,
    ) -> tt_blackhole::backbone::BackboneDims {
        use tt_blackhole::backbone::{BackboneDims, LlmDims, ProjectorDims, VisionDims};
        let (v, t) = (&self.eagle.vision_config, &self.eagle.text_config);
        let side = image_side / v.patch_size;
        let patches = side * side;
        BackboneDims {
            vision: VisionDims {
                layers: v.num_hidden_layers,
                hidden: v.hidden_size,
                mlp: v.intermediate_size,
                heads: v.num_attention_heads,
                patch_in: v.num_channels * v.patch_size * v.patch_size,
                patches,
                images,
            },
            projector: ProjectorDims {
                input: 4 * v.hidden_size,
                output: t.hidden_size,
                tokens: images * (side / 2) * (side / 2),
            },
            llm: LlmDims {
                layers: self.gr00t.select_layer,
                hidden: t.hidden_size,
                intermediate: t.intermediate_size,
                heads: t.num_attention_heads,
                kv_heads: t.num_key_value_heads,
                head_dim: t.head_dim,
                tokens: prompt_tokens,
            },
        }
    }

    /// The real N1.6-3B architecture.
    pub fn full_size() -> Self {
        Self {
            gr00t: Gr00tConfig::full_size(),
            eagle: EagleConfig::full_size(),
        }
    }

    /// Reads `config.json` and, when present, `eagle_config.json` of a checkpoint directory.
    pub fn from_dir(dir: &Path) -> Result<Self, ConfigError> {
        let gr00t: Gr00tConfig = read_json(&dir.join(CONFIG_FILE))?;
        let eagle_path = dir.join(EAGLE_CONFIG_FILE);
        let eagle = if eagle_path.exists() {
            read_json(&eagle_path)?
        } else {
            EagleConfig::full_size()
        };
        let cfg = Self { gr00t, eagle };
        cfg.validate().map_err(|e| ConfigError::Invalid {
            path: dir.join(CONFIG_FILE),
            message: e.to_string(),
        })?;
        Ok(cfg)
    }

    /// Checks the structural constraints the forward relies on; every violation is listed.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let g = &self.gr00t;
        let d = &g.diffusion_model_cfg;
        let v = &self.eagle.vision_config;
        let t = &self.eagle.text_config;
        let mut errs = Vec::new();
        if d.num_attention_heads * d.attention_head_dim != g.input_embedding_dim {
            errs.push(format!(
                "diffusion heads*head_dim {}*{} != input_embedding_dim {}",
                d.num_attention_heads, d.attention_head_dim, g.input_embedding_dim
            ));
        }
        if d.output_dim != g.hidden_size {
            errs.push(format!(
                "diffusion output_dim {} != hidden_size {}",
                d.output_dim, g.hidden_size
            ));
        }
        if g.backbone_embedding_dim != t.hidden_size {
            errs.push(format!(
                "backbone_embedding_dim {} != text hidden_size {}",
                g.backbone_embedding_dim, t.hidden_size
            ));
        }
        if g.select_layer == 0 || g.select_layer > t.num_hidden_layers {
            errs.push(format!(
                "select_layer {} outside 1..={}",
                g.select_layer, t.num_hidden_layers
            ));
        }
        if v.num_attention_heads == 0 || !v.hidden_size.is_multiple_of(v.num_attention_heads) {
            errs.push("vision hidden_size not divisible by heads".into());
        }
        if t.num_key_value_heads == 0
            || !t.num_attention_heads.is_multiple_of(t.num_key_value_heads)
        {
            errs.push("text heads not a multiple of kv heads".into());
        }
        if !t.head_dim.is_multiple_of(2) {
            errs.push("text head_dim must be even (RoPE)".into());
        }
        let grid = (v.num_patches as f64).sqrt() as usize;
        if grid * grid != v.num_patches {
            errs.push(format!(
                "vision num_patches {} is not a square",
                v.num_patches
            ));
        }
        if (self.eagle.downsample_ratio - 0.5).abs() > 1e-9 || !self.eagle.use_pixel_shuffle {
            errs.push("only pixel-unshuffle with downsample_ratio 0.5 is supported".into());
        }
        if !g.input_embedding_dim.is_multiple_of(2) {
            errs.push("input_embedding_dim must be even (sinusoid)".into());
        }
        if g.action_horizon > g.max_seq_len {
            errs.push("action_horizon > max_seq_len".into());
        }
        if g.attend_text_every_n_blocks == 0 {
            errs.push("attend_text_every_n_blocks must be > 0".into());
        }
        if !g.use_alternate_vl_dit || !d.interleave_self_attention || d.norm_type != "ada_norm" {
            errs.push(
                "only the alternate VL-DiT with interleaved self-attention and ada_norm is supported"
                    .into(),
            );
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(InvalidConfig(errs))
        }
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ConfigError> {
    Ok(crate::json_file::read_json(path)?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn full_size_backbone_dims_are_the_published_models() {
        let d = ModelConfig::full_size().backbone_dims(116, 1, 252);
        assert_eq!(
            (d.vision.patches, d.vision.patch_in, d.vision.layers),
            (324, 588, 27)
        );
        assert_eq!(
            (d.projector.input, d.projector.output, d.projector.tokens),
            (4608, 2048, 81)
        );
        assert_eq!(
            (d.llm.layers, d.llm.kv_heads, d.llm.head_dim, d.llm.tokens),
            (16, 8, 128, 116)
        );
        assert_eq!(d, tt_blackhole::backbone::BackboneDims::FULL);
    }

    use super::*;

    #[test]
    fn diff_form_takes_class_defaults() {
        let g: Gr00tConfig = serde_json::from_str(r#"{"action_horizon": 50}"#).unwrap();
        assert_eq!(g.action_horizon, 50);
        assert_eq!(g.max_state_dim, 29);
        assert_eq!(g.diffusion_model_cfg.num_layers, 32);
        assert!(ModelConfig::full_size().validate().is_ok());
    }
}
