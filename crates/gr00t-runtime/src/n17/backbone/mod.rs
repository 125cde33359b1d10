//! The N1.7 backbone: the Qwen3-VL vision tower, deepstack mergers, M-RoPE and the Qwen3 text
//! layers up to `select_layer`, features taken before the final norm.
//!
//! Entry points: [`BackboneConfig`] (the backbone's own `config.json`), [`Qwen3VlBackbone`]
//! (load from any [`WeightSource`], forward from `pixel_values` / `image_grid_thw` /
//! `input_ids` to the features `[S, hidden]`) and [`rope_index`] (the M-RoPE position ids).
//! Tap names follow `shared/golden/gr00t-n17-tiny/case1/taps.md`.

pub mod config;
pub mod rope;
pub mod text;
pub mod vision;

pub use config::{BackboneConfig, BackboneConfigError, TextCfg, VisionCfg};
pub use rope::{RopeIndex, mrope_axis, mrope_cos_sin, rope_index};

use crate::model::Taps;
use crate::weights::{WeightError, WeightSource};
use text::{Deepstack, TextLayers};
use vision::VisionTower;

/// Why the backbone could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum BackboneError {
    /// The backbone configuration could not be read or is invalid.
    #[error(transparent)]
    Config(#[from] BackboneConfigError),
    /// A checkpoint tensor is missing, has the wrong shape or dtype, or could not be read.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// `select_layer` is outside `1..=text_config.num_hidden_layers`.
    #[error("select_layer {select_layer} is outside 1..={layers} (text_config.num_hidden_layers)")]
    SelectLayer {
        /// The requested layer count (GR00T checkpoint config).
        select_layer: usize,
        /// Layers of the text model.
        layers: usize,
    },
    /// The inputs do not fit the model: lengths, ids, grids, image-token counts.
    #[error("input: {0}")]
    Input(String),
}

/// The Qwen3-VL backbone as GR00T N1.7 runs it.
pub struct Qwen3VlBackbone {
    cfg: BackboneConfig,
    vision: VisionTower,
    text: TextLayers,
}

impl Qwen3VlBackbone {
    /// Loads the vision tower, the token embedding and text layers `0..select_layer` (the GR00T
    /// checkpoint's `select_layer`) from `source` (`backbone.model.model.*` names).
    pub fn load(
        source: &dyn WeightSource,
        cfg: &BackboneConfig,
        select_layer: usize,
    ) -> Result<Self, BackboneError> {
        cfg.validate()?;
        let layers = cfg.text.num_hidden_layers;
        if select_layer == 0 || select_layer > layers {
            return Err(BackboneError::SelectLayer {
                select_layer,
                layers,
            });
        }
        Ok(Self {
            cfg: cfg.clone(),
            vision: VisionTower::load(source, &cfg.vision)?,
            text: TextLayers::load(source, &cfg.text, select_layer)?,
        })
    }

    /// The configuration the backbone was built with.
    pub fn config(&self) -> &BackboneConfig {
        &self.cfg
    }

    /// `pixel_values` `[Σ t·h·w, patch_dim]` (merge-block row order, images in prompt order),
    /// `grid_thw` (one `(t, h, w)` patch grid per image) and the prompt `input_ids` (each image
    /// expanded to `t·h·w / merge²` image tokens) → features `[S, hidden]` of the last kept layer.
    pub fn forward(
        &self,
        pixel_values: &[f32],
        grid_thw: &[[usize; 3]],
        input_ids: &[u32],
        taps: &mut Taps,
    ) -> Result<Vec<f32>, BackboneError> {
        let cfg = &self.cfg;
        let (s, d) = (input_ids.len(), cfg.text.hidden_size);
        if let Some(&bad) = input_ids
            .iter()
            .find(|&&id| id as usize >= cfg.text.vocab_size)
        {
            return Err(BackboneError::Input(format!(
                "token id {bad} is outside the vocabulary of {}",
                cfg.text.vocab_size
            )));
        }
        let visual_rows: Vec<usize> = (0..s)
            .filter(|&i| input_ids[i] == cfg.image_token_id)
            .collect();
        let unit = cfg.vision.merge_unit();
        let image_tokens: usize = grid_thw.iter().map(|g| g[0] * g[1] * g[2] / unit).sum();
        if visual_rows.len() != image_tokens {
            return Err(BackboneError::Input(format!(
                "{} image tokens in input_ids, grid_thw gives {image_tokens}",
                visual_rows.len()
            )));
        }
        let index = rope_index(
            input_ids,
            grid_thw,
            cfg.image_token_id,
            cfg.vision_start_token_id,
            cfg.vision.spatial_merge_size,
        )?;
        let vis = self.vision.forward(pixel_values, grid_thw, taps)?;
        let mut x = self.text.embed(input_ids);
        for (r, &row) in visual_rows.iter().enumerate() {
            x[row * d..][..d].copy_from_slice(&vis.embeds[r * d..][..d]);
        }
        taps.emit("llm.inputs_embeds", &[1, s, d], &x);
        let t = &cfg.text;
        let (cos, sin) = mrope_cos_sin(&index.positions, t.head_dim, t.rope_theta, t.mrope_section);
        taps.emit("llm.rope_cos", &[1, s, t.head_dim], &cos);
        taps.emit("llm.rope_sin", &[1, s, t.head_dim], &sin);
        let visual = Deepstack {
            rows: &visual_rows,
            features: &vis.deepstack,
        };
        let out = self.text.forward(x, s, &cos, &sin, visual, taps);
        taps.emit("backbone.features", &[1, s, d], &out);
        Ok(out)
    }
}
