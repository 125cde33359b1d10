//! The flow-matching action head: vlln, category-specific state encoder, action encoder with
//! the sinusoidal timestep encoding, action position embeddings, the DiT timestep encoder,
//! the action decoder and the Euler loop. The DiT stack itself runs behind [`DitExecutor`].

use super::ModelError;
use super::dit::{DitExecutor, DitWeights, VlContext};
use super::layers::{CatLinear, Linear, NormParams};
use super::taps::Taps;
use crate::config::Gr00tConfig;
use crate::cpu::norms::{layer_norm, relu, silu};
use crate::weights::{Tensor, WeightError, WeightSource};

/// Channels of the diffusers timestep projection (hard-coded in `TimestepEncoder`).
pub const TIMESTEP_CHANNELS: usize = 256;

/// The action head's weights (`action_head.*`) and the flow-matching loop that turns VL features, state and noise into an action chunk.
pub struct ActionHead {
    /// The configuration the head was loaded with (widths, horizon, steps, embodiment count).
    pub cfg: Gr00tConfig,
    vlln: Option<NormParams>,
    state_enc: [CatLinear; 2],
    act_enc: [CatLinear; 3],
    pos_emb: Option<Tensor>,
    temb1: Linear,
    temb2: Linear,
    decoder: [CatLinear; 2],
    /// The DiT stack's weights (`action_head.model.*`), run by a [`DitExecutor`].
    pub dit: DitWeights,
    /// What a device that runs the whole head takes per timestep, computed once: the
    /// timestep embeddings and the action encoder's sinusoidal encodings (`head_flow.rs`).
    pub(crate) timestep_rows: std::sync::OnceLock<super::head_flow::TimestepRows>,
}

impl ActionHead {
    /// Loads every `action_head.*` tensor with the shapes `cfg` implies; `vlln` and the position embedding only when `use_vlln` / `add_pos_embed` are on.
    pub fn load(ws: &dyn WeightSource, cfg: &Gr00tConfig) -> Result<Self, WeightError> {
        let (e, d, hs) = (
            cfg.max_num_embodiments,
            cfg.input_embedding_dim,
            cfg.hidden_size,
        );
        let (sd, ad) = (cfg.max_state_dim, cfg.max_action_dim);
        let cat = |name: &str, k, n| CatLinear::load(ws, &format!("action_head.{name}"), e, k, n);
        Ok(Self {
            cfg: cfg.clone(),
            vlln: if cfg.use_vlln {
                Some(NormParams::layer_norm(
                    ws,
                    "action_head.vlln",
                    cfg.backbone_embedding_dim,
                )?)
            } else {
                None
            },
            state_enc: [
                cat("state_encoder.layer1", sd, hs)?,
                cat("state_encoder.layer2", hs, d)?,
            ],
            act_enc: [
                cat("action_encoder.W1", ad, d)?,
                cat("action_encoder.W2", 2 * d, d)?,
                cat("action_encoder.W3", d, d)?,
            ],
            pos_emb: if cfg.add_pos_embed {
                Some(ws.tensor(
                    "action_head.position_embedding.weight",
                    &[cfg.max_seq_len, d],
                )?)
            } else {
                None
            },
            temb1: Linear::load(
                ws,
                "action_head.model.timestep_encoder.timestep_embedder.linear_1",
                TIMESTEP_CHANNELS,
                d,
                true,
            )?,
            temb2: Linear::load(
                ws,
                "action_head.model.timestep_encoder.timestep_embedder.linear_2",
                d,
                d,
                true,
            )?,
            decoder: [
                cat("action_decoder.layer1", hs, hs)?,
                cat("action_decoder.layer2", hs, ad)?,
            ],
            dit: DitWeights::load(ws, cfg)?,
            timestep_rows: std::sync::OnceLock::new(),
        })
    }

    /// `vlln` LayerNorm (eps 1e-5) of the backbone features, in place.
    pub fn apply_vlln(&self, feats: &mut [f32]) {
        if let Some(n) = &self.vlln {
            layer_norm(
                feats,
                self.cfg.backbone_embedding_dim,
                Some(&n.w),
                n.b.as_deref(),
                1e-5,
            );
        }
    }

    /// state `[max_state_dim]` → state token `[D]`.
    pub fn encode_state(&self, state: &[f32], emb: usize) -> Vec<f32> {
        let mut h = self.state_enc[0].forward(state, 1, emb);
        relu(&mut h);
        self.state_enc[1].forward(&h, 1, emb)
    }

    /// Noisy actions `[horizon, max_action_dim]` at discrete timestep `tau` → `[horizon, D]`
    /// (before the position embedding).
    pub fn encode_actions(&self, actions: &[f32], tau: i64, emb: usize) -> Vec<f32> {
        let d = self.cfg.input_embedding_dim;
        let hz = actions.len() / self.cfg.max_action_dim;
        let a = self.act_enc[0].forward(actions, hz, emb);
        let enc = action_time_encoding(tau, d);
        let mut cat = vec![0.0f32; hz * 2 * d];
        for t in 0..hz {
            cat[t * 2 * d..t * 2 * d + d].copy_from_slice(&a[t * d..(t + 1) * d]);
            cat[t * 2 * d + d..(t + 1) * 2 * d].copy_from_slice(&enc);
        }
        let mut h = self.act_enc[1].forward(&cat, hz, emb);
        silu(&mut h);
        self.act_enc[2].forward(&h, hz, emb)
    }

    /// Rows `0..horizon` of the learned action position embedding, `[horizon, D]` (zeros when
    /// `add_pos_embed` is off).
    pub fn position_embedding(&self, horizon: usize) -> Vec<f32> {
        let d = self.cfg.input_embedding_dim;
        match &self.pos_emb {
            Some(t) => t.data().slice(0, horizon * d).to_f32_vec(),
            None => vec![0.0; horizon * d],
        }
    }

    /// The DiT's `timestep_encoder(tau)`: diffusers sinusoid (cos first, 256 channels) →
    /// Linear → SiLU → Linear, `[D]`.
    pub fn timestep_embedding(&self, tau: i64) -> Vec<f32> {
        let proj = diffusers_timestep_proj(tau, TIMESTEP_CHANNELS);
        let mut h = self.temb1.forward(&proj, 1);
        silu(&mut h);
        self.temb2.forward(&h, 1)
    }

    /// DiT output `[tokens, hidden_size]` → `[tokens, max_action_dim]`.
    pub fn decode(&self, dit_out: &[f32], tokens: usize, emb: usize) -> Vec<f32> {
        let mut h = self.decoder[0].forward(dit_out, tokens, emb);
        relu(&mut h);
        self.decoder[1].forward(&h, tokens, emb)
    }

    /// Discrete timestep of Euler step `k` of `n`: int(k/n · buckets).
    pub fn timestep(&self, k: usize) -> i64 {
        let n = self.cfg.num_inference_timesteps as f64;
        ((k as f64 / n) * self.cfg.num_timestep_buckets as f64) as i64
    }

    /// The flow-matching loop: `noise` `[horizon, max_action_dim]` → x_N (normalized chunk).
    pub fn flow(
        &self,
        vl: &VlContext<'_>,
        state: &[f32],
        emb: usize,
        noise: &[f32],
        dit: &mut dyn DitExecutor,
        taps: &mut Taps<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        dit.prepare(vl)?;
        // A device that runs the whole head takes the state and the noise as they are.
        if let Some(x) = self.flow_on_executor(state, emb, noise, dit, taps) {
            return x;
        }
        let state_feat = self.encode_state(state, emb);
        taps.emit(
            "action_head.state_features",
            &[1, 1, self.cfg.input_embedding_dim],
            &state_feat,
        );
        self.euler(&state_feat, emb, noise.to_vec(), None, dit, taps)
    }

    /// The Euler steps from `x0` `[horizon, max_action_dim]` after [`DitExecutor::prepare`],
    /// shared by N1.6 and N1.7. Each step adds `dt · v`, or `dt · v · strength[row]` when
    /// `row_strength` is given (N1.7's real-time chunking, whose caller also in-paints the
    /// previous chunk into `x0`); without it the arithmetic is N1.6's, bit for bit.
    /// Taps `flow.step{k}.*` and `flow.action_pred`.
    pub fn euler(
        &self,
        state_features: &[f32],
        emb: usize,
        x0: Vec<f32>,
        row_strength: Option<&[f32]>,
        dit: &mut dyn DitExecutor,
        taps: &mut Taps<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        let cfg = &self.cfg;
        let (d, hz, ad) = (
            cfg.input_embedding_dim,
            cfg.action_horizon,
            cfg.max_action_dim,
        );
        if let Some(m) = row_strength
            && m.len() != hz
        {
            return Err(ModelError::Input(format!(
                "velocity strength has {} rows, expected the horizon {hz}",
                m.len()
            )));
        }
        let pos = self.position_embedding(hz);
        let steps = cfg.num_inference_timesteps;
        let dt = 1.0f32 / steps as f32;
        let tokens = hz + 1;
        let mut x = x0;
        let mut sa = vec![0.0f32; tokens * d];
        for k in 0..steps {
            let tau = self.timestep(k);
            taps.emit_with(|| format!("flow.step{k}.actions_in"), &[1, hz, ad], &x);
            let enc = self.encode_actions(&x, tau, emb);
            taps.emit_with(
                || format!("flow.step{k}.action_encoder_out"),
                &[1, hz, d],
                &enc,
            );
            taps.emit_with(|| format!("flow.step{k}.pos_embed"), &[hz, d], &pos);
            sa[..d].copy_from_slice(state_features);
            for ((o, e), p) in sa[d..].iter_mut().zip(&enc).zip(&pos) {
                *o = e + p;
            }
            taps.emit_with(|| format!("flow.step{k}.dit_input"), &[1, tokens, d], &sa);
            let temb = self.timestep_embedding(tau);
            taps.emit_with(|| format!("flow.step{k}.temb"), &[1, d], &temb);
            let out = dit.run(k, &sa, tokens, &temb, taps)?;
            let expect = tokens * cfg.hidden_size;
            if out.len() != expect {
                return Err(ModelError::Length {
                    what: "output",
                    got: out.len(),
                    expected: expect,
                });
            }
            let dec = self.decode(&out, tokens, emb);
            taps.emit_with(
                || format!("flow.step{k}.decoder_output"),
                &[1, tokens, ad],
                &dec,
            );
            let vel = &dec[ad..];
            taps.emit_with(|| format!("flow.step{k}.velocity"), &[1, hz, ad], vel);
            match row_strength {
                None => {
                    for (xv, v) in x.iter_mut().zip(vel) {
                        *xv += dt * v;
                    }
                }
                // Multiplied in the reference's order, (dt · v) · strength.
                Some(m) => {
                    let rows = x.chunks_exact_mut(ad).zip(vel.chunks_exact(ad));
                    for ((xr, vr), &s) in rows.zip(m) {
                        for (xv, v) in xr.iter_mut().zip(vr) {
                            *xv += dt * v * s;
                        }
                    }
                }
            }
        }
        taps.emit("flow.action_pred", &[1, hz, ad], &x);
        Ok(x)
    }
}

/// `SinusoidalPositionalEncoding(d)` of the action encoder, sines first, rounded like the f32
/// reference: exponent = −i·(ln 10000 / half) in f32, freq = exp(exponent), angle = τ·freq.
pub fn action_time_encoding(tau: i64, d: usize) -> Vec<f32> {
    let half = d / 2;
    let step = (10000f32.ln()) / half as f32;
    let mut out = vec![0.0f32; d];
    for i in 0..half {
        let e = -(i as f32) * step;
        let freq = (e as f64).exp() as f32;
        let ang = (tau as f32 * freq) as f64;
        out[i] = ang.sin() as f32;
        out[half + i] = ang.cos() as f32;
    }
    out
}

/// diffusers `get_timestep_embedding(τ, ch, flip_sin_to_cos=True, downscale_freq_shift=1)`:
/// [cos(τ·f), sin(τ·f)], f_i = exp(−ln(10000)·i/(half − 1)), rounded like the f32 reference.
pub fn diffusers_timestep_proj(tau: i64, ch: usize) -> Vec<f32> {
    let half = ch / 2;
    let c = -(10000f64.ln()) as f32;
    let mut out = vec![0.0f32; ch];
    for i in 0..half {
        let e = (i as f32 * c) / (half as f32 - 1.0);
        let freq = (e as f64).exp() as f32;
        let ang = (tau as f32 * freq) as f64;
        out[i] = ang.cos() as f32;
        out[half + i] = ang.sin() as f32;
    }
    out
}
