//! The N1.7 action head: vlln, the vl_self_attention stack, the state encoder over a history of
//! rows, the action encoder, the alternating text/image DiT, the decoder and the Euler steps
//! (with real-time chunking).
//!
//! Everything after the VL self-attention is N1.6's math with N1.7's sizes, so the encoders,
//! timestep embedding, decoder and DiT are N1.6's [`ActionHead`] / [`DitWeights`] loaded with
//! an N1.6 head configuration derived from the N1.7 one ([`head_config`]): the state encoder's
//! input width becomes `state_history_length * max_state_dim` (the history rows are
//! concatenated, as the reference's `view(B, 1, -1)` does). What is N1.7's own: the
//! vl_self_attention stack, the backbone attention mask in the DiT's cross-attention, the
//! state history, and RTC.
//!
//! The DiT's cross-attention reads text tokens `(~image_mask) & attention_mask` and image
//! tokens `image_mask & attention_mask`; tokens outside the attention mask are dropped from the
//! context after the (unmasked) VL self-attention, which is the same thing for the DiT and lets
//! the N1.6 executors ([`CpuDit`], the device) run unchanged.

pub mod rtc;
pub mod vl_self_attn;

pub use rtc::{Rtc, RtcError};
pub use vl_self_attn::VlSelfAttention;

use crate::config::Gr00tConfig;
use crate::model::dit::{BlockKind, DitWeights};
use crate::model::{ActionHead, CpuDit, DitExecutor, ModelError, Taps, VlContext};
use crate::n17::config::{InvalidN17Config, N17Config};
use crate::weights::{WeightError, WeightSource};

/// Why the head could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    /// The configuration breaks a constraint of the head.
    #[error("configuration: {0}")]
    Config(#[from] InvalidN17Config),
    /// A checkpoint tensor is missing or has the wrong shape or dtype.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// An input does not fit the model.
    #[error("{field}: {message}")]
    Input {
        /// The input at fault (`features`, `image_mask`, `state`, …).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The real-time-chunking options were refused.
    #[error("rtc.{0}")]
    Rtc(#[from] RtcError),
    /// The DiT executor failed.
    #[error(transparent)]
    Dit(#[from] ModelError),
}

/// One observation's inputs to the head (batch 1).
#[derive(Debug, Clone, Copy)]
pub struct HeadInputs<'a> {
    /// Backbone features `[seq, backbone_embedding_dim]` (output of layer `select_layer - 1`,
    /// before the final norm).
    pub features: &'a [f32],
    /// Per token: an image token (`input_ids == image_token_id`).
    pub image_mask: &'a [bool],
    /// Per token: the tokenizer attention mask.
    pub attention_mask: &'a [bool],
    /// Normalised state `[state_history_length, max_state_dim]`, oldest row first.
    pub state: &'a [f32],
    /// Projector index of the embodiment.
    pub embodiment_id: usize,
    /// x0 `[action_horizon, max_action_dim]`.
    pub noise: &'a [f32],
}

/// The loaded head.
pub struct N17ActionHead {
    /// The configuration it was loaded with.
    pub cfg: N17Config,
    /// N1.6's head pieces with the N1.7 sizes (vlln, encoders, decoder, timestep MLP, DiT).
    pub inner: ActionHead,
    vl_self_attn: Option<VlSelfAttention>,
}

/// The N1.6 head configuration with the N1.7 sizes that [`ActionHead::load`] and
/// [`DitWeights::load`] take.
pub fn head_config(cfg: &N17Config) -> Gr00tConfig {
    Gr00tConfig {
        backbone_embedding_dim: cfg.backbone_embedding_dim,
        select_layer: cfg.select_layer,
        max_state_dim: cfg.state_history_length * cfg.max_state_dim,
        max_action_dim: cfg.max_action_dim,
        action_horizon: cfg.action_horizon,
        hidden_size: cfg.hidden_size,
        input_embedding_dim: cfg.input_embedding_dim,
        add_pos_embed: cfg.add_pos_embed,
        use_vlln: cfg.use_vlln,
        max_seq_len: cfg.max_seq_len,
        use_alternate_vl_dit: cfg.use_alternate_vl_dit,
        attend_text_every_n_blocks: cfg.attend_text_every_n_blocks,
        diffusion_model_cfg: cfg.diffusion_model_cfg.clone(),
        num_inference_timesteps: cfg.num_inference_timesteps,
        num_timestep_buckets: cfg.num_timestep_buckets,
        max_num_embodiments: cfg.max_num_embodiments,
        ..Gr00tConfig::default()
    }
}

impl N17ActionHead {
    /// Loads every `action_head.*` tensor with the shapes `cfg` implies.
    pub fn load(ws: &dyn WeightSource, cfg: &N17Config) -> Result<Self, HeadError> {
        cfg.validate()?;
        Ok(Self {
            inner: ActionHead::load(ws, &head_config(cfg))?,
            vl_self_attn: VlSelfAttention::load(ws, cfg)?,
            cfg: cfg.clone(),
        })
    }

    /// The DiT weights (for another [`DitExecutor`], e.g. the device).
    pub fn dit_weights(&self) -> &DitWeights {
        &self.inner.dit
    }

    /// The CPU DiT executor over this head's weights.
    pub fn cpu_dit(&self) -> CpuDit<'_> {
        CpuDit::new(&self.inner.dit)
    }

    /// Discrete timestep of Euler step `k`: `int(k / steps * num_timestep_buckets)`.
    pub fn timestep(&self, k: usize) -> i64 {
        self.inner.timestep(k)
    }

    /// Checks every input's length, the embodiment id and finiteness.
    pub fn check_inputs(&self, inp: &HeadInputs<'_>) -> Result<(), HeadError> {
        let c = &self.cfg;
        let bad = |field, message: String| Err(HeadError::Input { field, message });
        let seq = inp.image_mask.len();
        if seq == 0 {
            return bad("image_mask", "no tokens".into());
        }
        if inp.attention_mask.len() != seq {
            return bad(
                "attention_mask",
                format!("{} tokens, image_mask has {seq}", inp.attention_mask.len()),
            );
        }
        let want = [
            (
                "features",
                inp.features.len(),
                seq * c.backbone_embedding_dim,
            ),
            (
                "state",
                inp.state.len(),
                c.state_history_length * c.max_state_dim,
            ),
            (
                "noise",
                inp.noise.len(),
                c.action_horizon * c.max_action_dim,
            ),
        ];
        for (field, got, expected) in want {
            if got != expected {
                return bad(field, format!("{got} values, expected {expected}"));
            }
        }
        if inp.embodiment_id >= c.max_num_embodiments {
            return bad(
                "embodiment_id",
                format!("{} >= {}", inp.embodiment_id, c.max_num_embodiments),
            );
        }
        for (field, v) in [
            ("features", inp.features),
            ("state", inp.state),
            ("noise", inp.noise),
        ] {
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return bad(field, format!("value {i} is not finite"));
            }
        }
        // A cross block with no key to attend to gives NaN in the reference (SDPA over an
        // all-false mask): refuse the observation instead.
        let (mut text, mut image) = (false, false);
        for (&im, &at) in inp.image_mask.iter().zip(inp.attention_mask) {
            text |= at && !im;
            image |= at && im;
        }
        for b in 0..c.diffusion_model_cfg.num_layers {
            match BlockKind::of(b, c.attend_text_every_n_blocks) {
                BlockKind::CrossText if !text => {
                    return bad("attention_mask", "no text token to attend to".into());
                }
                BlockKind::CrossImage if !image => {
                    return bad("image_mask", "no image token to attend to".into());
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `process_backbone_output`: vlln then the VL self-attention, `[seq, dim]` in place.
    /// Taps `action_head.vlln_out`, `action_head.vl_self_attn.block{i}`, `action_head.vl_embeds`.
    pub fn encode_vl(&self, feats: &mut [f32], seq: usize, taps: &mut Taps<'_>) {
        let d = self.cfg.backbone_embedding_dim;
        self.inner.apply_vlln(feats);
        taps.emit("action_head.vlln_out", &[1, seq, d], feats);
        if let Some(sa) = &self.vl_self_attn {
            sa.forward(feats, seq, taps);
        }
        taps.emit("action_head.vl_embeds", &[1, seq, d], feats);
    }

    /// The state token `[input_embedding_dim]` from the history rows concatenated.
    /// Taps `action_head.state_encoder_input`, `action_head.state_features`.
    pub fn encode_state(&self, state: &[f32], emb: usize, taps: &mut Taps<'_>) -> Vec<f32> {
        taps.emit(
            "action_head.state_encoder_input",
            &[1, 1, state.len()],
            state,
        );
        let f = self.inner.encode_state(state, emb);
        taps.emit(
            "action_head.state_features",
            &[1, 1, self.cfg.input_embedding_dim],
            &f,
        );
        f
    }

    /// The whole head on the CPU DiT: inputs → normalised chunk `[action_horizon,
    /// max_action_dim]`.
    pub fn forward(
        &self,
        inp: &HeadInputs<'_>,
        rtc: Option<&Rtc>,
        taps: &mut Taps<'_>,
    ) -> Result<Vec<f32>, HeadError> {
        let mut dit = self.cpu_dit();
        self.forward_with(inp, rtc, &mut dit, taps)
    }

    /// The whole head with a caller-provided DiT executor.
    pub fn forward_with(
        &self,
        inp: &HeadInputs<'_>,
        rtc: Option<&Rtc>,
        dit: &mut dyn DitExecutor,
        taps: &mut Taps<'_>,
    ) -> Result<Vec<f32>, HeadError> {
        self.check_inputs(inp)?;
        if let Some(r) = rtc {
            r.validate(self.cfg.action_horizon, self.cfg.max_action_dim)?;
        }
        let seq = inp.image_mask.len();
        let d = self.cfg.backbone_embedding_dim;
        let mut vl = inp.features.to_vec();
        self.encode_vl(&mut vl, seq, taps);
        // Keep only the tokens inside the attention mask (see the module doc).
        let mut kept = Vec::with_capacity(vl.len());
        let mut kept_image = Vec::with_capacity(seq);
        for (t, (&im, &at)) in inp.image_mask.iter().zip(inp.attention_mask).enumerate() {
            if at {
                kept.extend_from_slice(&vl[t * d..(t + 1) * d]);
                kept_image.push(im);
            }
        }
        let ctx = VlContext {
            vl_embeds: &kept,
            seq: kept_image.len(),
            dim: d,
            image_mask: &kept_image,
        };
        let state = self.encode_state(inp.state, inp.embodiment_id, taps);
        dit.prepare(&ctx)?;
        // N1.6's Euler loop; RTC in-paints the first rows of x0 and scales each row's velocity.
        let hz = self.cfg.action_horizon;
        let (x0, strength) = match rtc {
            Some(r) => (
                r.initial_actions(inp.noise, self.cfg.max_action_dim),
                Some(r.velocity_mask(hz)),
            ),
            None => (inp.noise.to_vec(), None),
        };
        Ok(self.inner.euler(
            &state,
            inp.embodiment_id,
            x0,
            strength.as_deref(),
            dit,
            taps,
        )?)
    }
}
