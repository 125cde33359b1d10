//! The action head's flow where the DiT executor runs the whole head ([`DitExecutor::run_flow`]:
//! the device's one graph per forward): the host computes once what depends on the timestep
//! alone (the DiT's timestep embeddings, the action encoder's sinusoidal encodings; the device
//! keeps what it derives from them per timestep) and the position rows, and per forward hands
//! over the state and the noise.

use super::ModelError;
use super::action_head::{ActionHead, action_time_encoding};
use super::dit::{DitExecutor, FlowInputs};
use super::taps::Taps;

/// Per denoising step, what depends on the timestep alone; and the position rows.
#[derive(Debug)]
pub(crate) struct TimestepRows {
    temb: Vec<Vec<f32>>,
    tau_enc: Vec<Vec<f32>>,
    pos: Vec<f32>,
}

impl ActionHead {
    /// The flow on `dit`'s device when it runs the head (after [`DitExecutor::prepare`]);
    /// `None` when it does not. Taps: `flow.action_pred` (the stages in between stay on the
    /// device).
    pub(crate) fn flow_on_executor(
        &self,
        state: &[f32],
        emb: usize,
        noise: &[f32],
        dit: &mut dyn DitExecutor,
        taps: &mut Taps<'_>,
    ) -> Option<Result<Vec<f32>, ModelError>> {
        let cfg = &self.cfg;
        let (d, hz, ad) = (
            cfg.input_embedding_dim,
            cfg.action_horizon,
            cfg.max_action_dim,
        );
        // The same every forward (the timesteps are fixed): computed on the first.
        let rows = self.timestep_rows.get_or_init(|| {
            let taus: Vec<i64> = (0..cfg.num_inference_timesteps)
                .map(|k| self.timestep(k))
                .collect();
            TimestepRows {
                temb: taus.iter().map(|t| self.timestep_embedding(*t)).collect(),
                tau_enc: taus.iter().map(|t| action_time_encoding(*t, d)).collect(),
                pos: self.position_embedding(hz),
            }
        });
        let flow = FlowInputs {
            state,
            embodiment: emb,
            noise,
            temb: &rows.temb,
            tau_enc: &rows.tau_enc,
            pos: &rows.pos,
        };
        let x = dit.run_flow(&flow, taps)?;
        if let Ok(x) = &x {
            taps.emit("flow.action_pred", &[1, hz, ad], x);
        }
        Some(x)
    }
}
