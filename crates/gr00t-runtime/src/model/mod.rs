//! The GR00T N1.6 forward (CPU reference backend): Eagle backbone (SigLIP2 + projector + Qwen3
//! body) → vlln → flow-matching action head with the DiT.
//!
//! Entry points: [`Gr00tModel`] (load, [`Gr00tModel::encode`], [`Gr00tModel::forward`],
//! [`Gr00tModel::forward_with`] for another DiT executor) and [`CpuPolicy`] (the `cpu` backend of
//! [`crate::policy::Policy`]). Intermediate tensors go to an optional [`Taps`] sink, named like
//! the golden `taps.safetensors`.

pub mod action_head;
mod cpu_policy;
pub mod dit;
mod head_flow;
pub mod layers;
pub mod llm;
pub mod qwen3_layer;
pub mod synthetic;
pub mod taps;
pub mod vision;

pub use action_head::ActionHead;
pub use cpu_policy::CpuPolicy;
pub use dit::{CpuDit, DitExecutor, FlowInputs, VlContext};
pub use taps::Taps;

use crate::config::{ConfigError, ModelConfig};
use crate::policy::{ActionChunk, ModelInputs};
use crate::weights::{WeightError, WeightSource, WeightStore};
use llm::Qwen3Body;
use std::path::Path;
use vision::{Projector, VisionTower};

/// Where a camera's image tokens come from when not from the host's SigLIP2 tower and
/// projector: a device that runs both.
pub trait ImageEncoder {
    /// The image tokens `[(h/p/2)·(w/p/2), text hidden]` of one `[3, h, w]` image, the
    /// projector's output rows in raster order of the 2×2 blocks (`hw`: its `(h, w)`); the
    /// image is camera `camera[0]` of the observation's `camera[1]`.
    fn image_tokens(
        &self,
        pixels: &[f32],
        hw: (usize, usize),
        camera: [usize; 2],
    ) -> Result<Vec<f32>, ModelError>;
}

/// Where the VL context comes from when not from the host's Qwen3 body and `vlln`: a device
/// that runs the body up to `select_layer`, its final norm and the action head's `vlln`.
pub trait LlmEncoder {
    /// The VL context `[ids.len(), text hidden]` of the prompt `ids`, whose tokens of id
    /// `image_token` take the rows of `image_rows` (`[image tokens, text hidden]`) in order.
    fn vl_context(
        &self,
        ids: &[u32],
        image_token: u32,
        image_rows: &[f32],
    ) -> Result<Vec<f32>, ModelError>;
}

/// The backbone's stages a device runs in the host's place (none: the host runs them all).
#[derive(Clone, Copy, Default)]
pub struct Encoders<'a> {
    /// SigLIP2's tower and the projector, per camera.
    pub images: Option<&'a dyn ImageEncoder>,
    /// The Qwen3 body and `vlln`.
    pub llm: Option<&'a dyn LlmEncoder>,
}

/// Why the model could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The checkpoint's configuration could not be read or is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A checkpoint tensor is missing, has the wrong shape or dtype, or could not be read.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// The inputs (or an environment setting) do not fit the model: lengths, ids, image sizes.
    #[error("input: {0}")]
    Input(String),
    /// A DiT executor was run before `prepare` (a caller's bug, reported rather than panicking).
    #[error("DiT executor: {0} ran before prepare")]
    NotPrepared(&'static str),
    /// A DiT stage got or gave a tensor of the wrong length.
    #[error("DiT {what}: {got} values, expected {expected}")]
    Length {
        /// Which tensor (e.g. `"device output"`).
        what: &'static str,
        /// Values it had.
        got: usize,
        /// Values it should have had.
        expected: usize,
    },
    /// `GR00T_MK_DEVICE` names no device this build can run on.
    #[error(transparent)]
    Device(#[from] tt_blackhole::device::DeviceError),
    /// The device named by `GR00T_MK_DEVICE` could not be opened (the cause is in the message,
    /// not also a `source()`, so a report that walks the chain prints it once).
    #[error("{device}: {cause}")]
    DeviceOpen {
        /// The device as `GR00T_MK_DEVICE` named it.
        device: String,
        /// Why it could not be opened.
        cause: tt_blackhole::device::DitRunError,
    },
    /// The DiT weight arena could not be built or opened.
    #[error("DiT arena: {0}")]
    Arena(#[from] tt_blackhole::arena::ArenaError),
    /// The action head's weights could not be packed for the device (the device backend's
    /// error, gr00t-megakernel's `HeadArenaError`, kept as the source: this crate does not
    /// depend on the backend).
    #[error("action head arena: {0}")]
    HeadArena(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The megakernel's DiT blocks (emulator or device) could not run.
    #[error("DiT blocks: {0}")]
    Dit(#[from] tt_blackhole::device::DitRunError),
    /// The backbone's weights could not be packed for the device (gr00t-megakernel's
    /// `BackboneArenaError`, kept as the source).
    #[error("backbone arena: {0}")]
    BackboneArena(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The backbone's stages on the device (the vision tower, the projector) could not run.
    #[error("backbone on the device: {0}")]
    DeviceBackbone(#[source] tt_blackhole::device::DitRunError),
}

/// Backbone output for one observation: the VL tokens after `vlln` and the image mask.
#[derive(Debug, Clone)]
pub struct BackboneOutput {
    /// `[seq, dim]`.
    pub vl_embeds: Vec<f32>,
    /// VL tokens (rows of `vl_embeds`).
    pub seq: usize,
    /// Token width (`backbone_embedding_dim`).
    pub dim: usize,
    /// Per token: `input_ids == image_token_index`.
    pub image_mask: Vec<bool>,
}

impl BackboneOutput {
    /// Borrows the output as the [`VlContext`] the DiT executors take.
    pub fn context(&self) -> VlContext<'_> {
        VlContext {
            vl_embeds: &self.vl_embeds,
            seq: self.seq,
            dim: self.dim,
            image_mask: &self.image_mask,
        }
    }
}

/// The whole model.
pub struct Gr00tModel {
    /// Action-head and Eagle configuration.
    pub cfg: ModelConfig,
    /// SigLIP2 vision tower (`backbone.model.vision_model.vision_model.*`).
    pub vision: VisionTower,
    /// Pixel-unshuffle + `mlp1` connector from vision features to LLM width.
    pub projector: Projector,
    /// Qwen3 body truncated at `select_layer` (`backbone.model.language_model.model.*`).
    pub llm: Qwen3Body,
    /// Flow-matching action head, DiT included (`action_head.*`).
    pub head: ActionHead,
}

impl Gr00tModel {
    /// Loads `config.json` (+ `eagle_config.json` if present) and the (sharded) safetensors.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let cfg = ModelConfig::from_dir(dir)?;
        let ws = WeightStore::open_dir(dir)?;
        Self::from_source(cfg, &ws)
    }

    /// Builds the model from any weight source (checkpoint or random).
    pub fn from_source(cfg: ModelConfig, ws: &dyn WeightSource) -> Result<Self, ModelError> {
        cfg.validate()
            .map_err(|m| ModelError::Input(format!("configuration: {m}")))?;
        Ok(Self {
            vision: VisionTower::load(ws, &cfg.eagle.vision_config)?,
            projector: Projector::load(ws, &cfg.eagle)?,
            llm: Qwen3Body::load(ws, &cfg.eagle.text_config, cfg.gr00t.select_layer)?,
            head: ActionHead::load(ws, &cfg.gr00t)?,
            cfg,
        })
    }

    /// Image tokens per camera for an `h × w` image.
    pub fn tokens_per_image(&self, h: usize, w: usize) -> usize {
        let p = self.cfg.eagle.vision_config.patch_size;
        (h / p / 2) * (w / p / 2)
    }

    /// Checks every input shape against the configuration.
    pub fn check_inputs(&self, inp: &ModelInputs) -> Result<(), ModelError> {
        let g = &self.cfg.gr00t;
        let v = &self.cfg.eagle.vision_config;
        let bad = |m: String| Err(ModelError::Input(m));
        let (h, w) = inp.image_hw;
        let unit = v.patch_size * 2;
        if inp.pixel_values.is_empty() {
            return bad("no camera image".into());
        }
        if h == 0 || w == 0 || h % unit != 0 || w % unit != 0 {
            return bad(format!(
                "image {h}x{w} is not a positive multiple of {unit}"
            ));
        }
        for (i, px) in inp.pixel_values.iter().enumerate() {
            if px.len() != v.num_channels * h * w {
                return bad(format!(
                    "camera {i}: {} pixel values, expected {}x{h}x{w}",
                    px.len(),
                    v.num_channels
                ));
            }
        }
        let vocab = self.llm.vocab();
        if let Some(id) = inp.input_ids.iter().find(|&&id| id as usize >= vocab) {
            return bad(format!("token id {id} >= vocab size {vocab}"));
        }
        let n_img = inp
            .input_ids
            .iter()
            .filter(|&&id| id == self.cfg.eagle.image_token_index)
            .count();
        let want = inp.pixel_values.len() * self.tokens_per_image(h, w);
        if n_img != want {
            return bad(format!(
                "{n_img} image tokens in input_ids, the images give {want}"
            ));
        }
        if inp.state.len() != g.max_state_dim {
            return bad(format!(
                "state has {} values, expected max_state_dim {}",
                inp.state.len(),
                g.max_state_dim
            ));
        }
        if inp.noise.len() != g.action_horizon * g.max_action_dim {
            return bad(format!(
                "noise has {} values, expected {}x{}",
                inp.noise.len(),
                g.action_horizon,
                g.max_action_dim
            ));
        }
        if inp.embodiment_id >= g.max_num_embodiments {
            return bad(format!(
                "embodiment id {} >= {}",
                inp.embodiment_id, g.max_num_embodiments
            ));
        }
        if inp.noise.iter().chain(&inp.state).any(|v| !v.is_finite()) {
            return bad("non-finite state or noise".into());
        }
        Ok(())
    }

    /// Backbone: vision tower per camera, projector, token splice, Qwen3 body, final norm, vlln.
    pub fn encode(
        &self,
        inp: &ModelInputs,
        taps: &mut Taps<'_>,
    ) -> Result<BackboneOutput, ModelError> {
        self.encode_with(inp, Encoders::default(), taps)
    }

    /// [`Gr00tModel::encode`] with each camera's image tokens from `enc.images` (a device's
    /// vision tower and projector) and the VL context from `enc.llm` (a device's Qwen3 body and
    /// `vlln`) instead of the host's; the taps of what a device ran are then not emitted.
    pub fn encode_with(
        &self,
        inp: &ModelInputs,
        enc: Encoders<'_>,
        taps: &mut Taps<'_>,
    ) -> Result<BackboneOutput, ModelError> {
        let images = enc.images;
        self.check_inputs(inp)?;
        let (h, w) = inp.image_hw;
        let p = self.cfg.eagle.vision_config.patch_size;
        let mut image_rows = Vec::new();
        let cameras = inp.pixel_values.len();
        for (i, px) in inp.pixel_values.iter().enumerate() {
            match images {
                Some(enc) => image_rows.extend(enc.image_tokens(px, (h, w), [i, cameras])?),
                None => {
                    let vis = self.vision.forward(px, h, w, taps, i == 0);
                    image_rows.extend(self.projector.forward(&vis, h / p, w / p, taps, i == 0));
                }
            }
        }
        let s = inp.input_ids.len();
        let d = self.llm.hidden();
        let img_tok = self.cfg.eagle.image_token_index;
        let image_mask: Vec<bool> = inp.input_ids.iter().map(|&id| id == img_tok).collect();
        if let Some(llm) = enc.llm {
            let vl_embeds = llm.vl_context(&inp.input_ids, img_tok, &image_rows)?;
            if vl_embeds.len() != s * d {
                return Err(ModelError::Input(format!(
                    "the device's VL context has {} values for {s} tokens of {d}",
                    vl_embeds.len()
                )));
            }
            taps.emit("action_head.vl_embeds", &[1, s, d], &vl_embeds);
            return Ok(BackboneOutput {
                vl_embeds,
                seq: s,
                dim: d,
                image_mask,
            });
        }
        let mut x = self.llm.embed(&inp.input_ids);
        let mut next = 0;
        for (t, &m) in image_mask.iter().enumerate() {
            if m {
                x[t * d..(t + 1) * d].copy_from_slice(&image_rows[next * d..(next + 1) * d]);
                next += 1;
            }
        }
        let mut feats = self.llm.forward(x, s, taps);
        taps.emit("backbone.features", &[1, s, d], &feats);
        self.head.apply_vlln(&mut feats);
        taps.emit("action_head.vl_embeds", &[1, s, d], &feats);
        Ok(BackboneOutput {
            vl_embeds: feats,
            seq: s,
            dim: d,
            image_mask,
        })
    }

    /// Full forward with a caller-provided DiT executor.
    pub fn forward_with(
        &self,
        inp: &ModelInputs,
        dit: &mut dyn DitExecutor,
        taps: &mut Taps<'_>,
    ) -> Result<ActionChunk, ModelError> {
        let bb = self.encode(inp, taps)?;
        self.act(&bb, inp, dit, taps)
    }

    /// The action head on an encoded observation.
    pub fn act(
        &self,
        bb: &BackboneOutput,
        inp: &ModelInputs,
        dit: &mut dyn DitExecutor,
        taps: &mut Taps<'_>,
    ) -> Result<ActionChunk, ModelError> {
        let g = &self.cfg.gr00t;
        let data = self.head.flow(
            &bb.context(),
            &inp.state,
            inp.embodiment_id,
            &inp.noise,
            dit,
            taps,
        )?;
        Ok(ActionChunk {
            horizon: g.action_horizon,
            dim: g.max_action_dim,
            data,
        })
    }

    /// Full forward on the CPU DiT executor.
    pub fn forward(
        &self,
        inp: &ModelInputs,
        taps: &mut Taps<'_>,
    ) -> Result<ActionChunk, ModelError> {
        let mut dit = self.cpu_dit();
        self.forward_with(inp, &mut dit, taps)
    }

    /// The CPU reference DiT executor over this model's DiT weights.
    pub fn cpu_dit(&self) -> CpuDit<'_> {
        CpuDit::new(&self.head.dit)
    }
}
