//! The whole N1.7 policy on the CPU: one raw observation → processing → Qwen3-VL backbone →
//! action head (optionally with real-time chunking) → decoded actions per group.
//!
//! A checkpoint directory is N1.7 when its `config.json` says so ([`detect_version_file`]);
//! [`check_version`] is the guard a server runs first, so that `GR00T_VERSION=n16` against an
//! N1.7 checkpoint (or the reverse) is refused with both names instead of failing deep in a
//! weight load. The backbone's own files (its `config.json`, tokenizer, chat template,
//! image-processor config) live in a separate "processor" directory: the reference loads them
//! from the (gated) backbone repository, not from the GR00T checkpoint.
//!
//! Besides the decoded actions, [`N17Model::predict`] returns the normalised model-space
//! chunk `[action_horizon, max_action_dim]` (40 × 132): an RTC client sends it back as the
//! next request's `previous_chunk`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::model::Taps;
use crate::n17::backbone::{BackboneConfig, BackboneError, Qwen3VlBackbone};
use crate::n17::config::{GrootVersion, N17Config, N17ConfigError, detect_version_file};
use crate::n17::head::{HeadError, HeadInputs, N17ActionHead, Rtc};
use crate::n17::processing::{
    DecodeError, GroupActions, LoadError, Observation, PrepareError, PreparedInputs, Processing,
};
use crate::weights::{WeightError, WeightStore};

/// `GR00T_VERSION` value of N1.6.
pub const VERSION_N16: &str = "n16";
/// `GR00T_VERSION` value of N1.7.
pub const VERSION_N17: &str = "n17";

/// The `GR00T_VERSION` spelling of a generation.
pub fn version_name(v: GrootVersion) -> &'static str {
    match v {
        GrootVersion::N16 => VERSION_N16,
        GrootVersion::N17 => VERSION_N17,
    }
}

/// Why the N1.7 model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum N17ModelError {
    /// `GR00T_VERSION` is neither `n16` nor `n17`.
    #[error("GR00T_VERSION={0:?} is not one of n16, n17")]
    UnknownVersion(String),
    /// The requested version is not the checkpoint's.
    #[error(
        "GR00T_VERSION={requested} but the checkpoint `{}` is {checkpoint} (its config.json `model_type`)",
        config.display()
    )]
    VersionMismatch {
        /// What was asked for.
        requested: &'static str,
        /// What the checkpoint's `config.json` says.
        checkpoint: &'static str,
        /// That `config.json`.
        config: PathBuf,
    },
    /// The checkpoint's `config.json` could not be read or is not an N1.7 configuration.
    #[error(transparent)]
    Config(#[from] N17ConfigError),
    /// The backbone's `config.json` could not be read, or a backbone weight is missing.
    #[error("backbone: {0}")]
    Backbone(#[from] BackboneError),
    /// An action-head weight is missing, or the head refused its inputs.
    #[error("action head: {0}")]
    Head(#[from] HeadError),
    /// The checkpoint's weights could not be opened.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// The processor files (modality config, statistics, tokenizer, chat template).
    #[error(transparent)]
    Processing(#[from] LoadError),
    /// The observation does not fit the embodiment (names the field).
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    /// The noise is not `[action_horizon, max_action_dim]` or not finite.
    #[error("noise: {0}")]
    Noise(String),
    /// The chunk could not be decoded back to actions.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// The generation of the checkpoint whose `config.json` is `config_path`, checked against the
/// requested `GR00T_VERSION` (`None`: whatever the checkpoint is).
pub fn check_version(
    requested: Option<&str>,
    config_path: &Path,
) -> Result<GrootVersion, N17ModelError> {
    let requested = match requested {
        None => None,
        Some(VERSION_N16) => Some(GrootVersion::N16),
        Some(VERSION_N17) => Some(GrootVersion::N17),
        Some(other) => return Err(N17ModelError::UnknownVersion(other.to_owned())),
    };
    let found = detect_version_file(config_path)?;
    match requested {
        Some(r) if r != found => Err(N17ModelError::VersionMismatch {
            requested: version_name(r),
            checkpoint: version_name(found),
            config: config_path.to_owned(),
        }),
        _ => Ok(found),
    }
}

/// Milliseconds spent in each stage of one prediction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct N17Timing {
    /// Shape checks, images, prompt and state.
    pub prepare_ms: f64,
    /// The Qwen3-VL backbone.
    pub backbone_ms: f64,
    /// vlln, VL self-attention, state encoder and the flow-matching loop.
    pub head_ms: f64,
    /// Un-normalisation and relative composition.
    pub decode_ms: f64,
}

/// One prediction.
#[derive(Debug, Clone)]
pub struct N17Output {
    /// Physical actions per action group, the embodiment's decoded horizon each, in the
    /// modality config's order.
    pub actions: Vec<GroupActions>,
    /// The normalised model-space chunk `[action_horizon, max_action_dim]` (40 × 132) before
    /// decoding: the next request's RTC `previous_chunk`.
    pub chunk: Vec<f32>,
    /// Rows of `chunk`.
    pub chunk_rows: usize,
    /// Columns of `chunk`.
    pub chunk_cols: usize,
    /// Prompt length in tokens (image and text tokens together).
    pub seq_len: usize,
    /// Where the time went.
    pub timing: N17Timing,
}

/// A loaded N1.7 checkpoint for one embodiment.
pub struct N17Model {
    /// The checkpoint's configuration.
    pub config: N17Config,
    /// The embodiment's processing (modality config, statistics, image processor, prompt).
    pub processing: Processing,
    backbone: Qwen3VlBackbone,
    head: N17ActionHead,
}

impl N17Model {
    /// Loads `model_dir` (`config.json`, safetensors weights, processor files) for
    /// `embodiment`, with the backbone's files from `processor_dir` (its `config.json`,
    /// tokenizer, chat template, `preprocessor_config.json`).
    pub fn load(
        model_dir: &Path,
        processor_dir: &Path,
        embodiment: &str,
    ) -> Result<Self, N17ModelError> {
        let config = N17Config::from_file(&model_dir.join("config.json"))?;
        let processing = Processing::load(model_dir, embodiment, processor_dir)?;
        let backbone_cfg = BackboneConfig::from_dir(processor_dir).map_err(BackboneError::from)?;
        let weights = WeightStore::open_dir(model_dir)?;
        let backbone = Qwen3VlBackbone::load(&weights, &backbone_cfg, config.select_layer)?;
        let head = N17ActionHead::load(&weights, &config)?;
        Ok(Self {
            config,
            processing,
            backbone,
            head,
        })
    }

    /// The loaded action head.
    pub fn head(&self) -> &N17ActionHead {
        &self.head
    }

    /// The loaded backbone.
    pub fn backbone(&self) -> &Qwen3VlBackbone {
        &self.backbone
    }

    /// Rows and columns of the model-space chunk (and of the noise): `(action_horizon,
    /// max_action_dim)`.
    pub fn chunk_shape(&self) -> (usize, usize) {
        (self.config.action_horizon, self.config.max_action_dim)
    }

    /// The embodiment's decoded horizon (the default RTC `action_horizon`).
    pub fn decoded_horizon(&self) -> usize {
        self.processing.config.action_horizon
    }

    /// Observation → decoded actions and the normalised chunk. `noise` is x0
    /// `[action_horizon, max_action_dim]`; `rtc` continues a previous chunk.
    pub fn predict(
        &self,
        obs: &Observation,
        noise: &[f32],
        rtc: Option<&Rtc>,
        taps: &mut Taps<'_>,
    ) -> Result<N17Output, N17ModelError> {
        let (rows, cols) = self.chunk_shape();
        if noise.len() != rows * cols {
            return Err(N17ModelError::Noise(format!(
                "{} values, expected {rows}x{cols}",
                noise.len()
            )));
        }
        let t = Instant::now();
        let prepared = self.processing.prepare(obs)?;
        let prepare_ms = ms_since(t);
        let (chunk, backbone_ms, head_ms) = self.forward(&prepared, noise, rtc, taps)?;
        let t = Instant::now();
        let actions = self.processing.decode(&chunk, &obs.state)?;
        Ok(N17Output {
            actions,
            chunk,
            chunk_rows: rows,
            chunk_cols: cols,
            seq_len: prepared.input_ids.len(),
            timing: N17Timing {
                prepare_ms,
                backbone_ms,
                head_ms,
                decode_ms: ms_since(t),
            },
        })
    }

    /// Prepared inputs → the normalised chunk, with the backbone's and the head's times (ms).
    pub fn forward(
        &self,
        prepared: &PreparedInputs,
        noise: &[f32],
        rtc: Option<&Rtc>,
        taps: &mut Taps<'_>,
    ) -> Result<(Vec<f32>, f64, f64), N17ModelError> {
        let t = Instant::now();
        let pv = &prepared.pixel_values;
        let features =
            self.backbone
                .forward(&pv.values, &pv.grid_thw, &prepared.input_ids, taps)?;
        let backbone_ms = ms_since(t);
        let t = Instant::now();
        let image_token = self.backbone.config().image_token_id;
        let image_mask: Vec<bool> = prepared
            .input_ids
            .iter()
            .map(|&id| id == image_token)
            .collect();
        // The processor pads nothing for one observation: every token is attended.
        let attention_mask = vec![true; image_mask.len()];
        let inputs = HeadInputs {
            features: &features,
            image_mask: &image_mask,
            attention_mask: &attention_mask,
            state: &prepared.state,
            embodiment_id: prepared.embodiment_id,
            noise,
        };
        let chunk = self.head.forward(&inputs, rtc, taps)?;
        Ok((chunk, backbone_ms, ms_since(t)))
    }

    /// Decodes a normalised chunk against raw state rows (e.g. to replay a chunk).
    pub fn decode(
        &self,
        chunk: &[f32],
        raw_state: &BTreeMap<String, Vec<Vec<f32>>>,
    ) -> Result<Vec<GroupActions>, N17ModelError> {
        Ok(self.processing.decode(chunk, raw_state)?)
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
