//! [`DeviceSteps`]' on-device step: the device-lifetime constants put once per worker, the
//! observation's cross K/V once per observation, then one graph exchange per step
//! (`super::super::graph` builds them).

use serde_json::json;
use tt_blackhole::device::{DitRunError, DitStepInputs};

use super::super::graph::{CrossKeys, Upload, observation_graph, step_graph};
use super::{DeviceSteps, lock};

/// What the cross K/V on the device were computed from, and on which worker (a reopened
/// device holds none of them).
#[derive(PartialEq)]
pub(super) struct ObservationKey {
    worker: u32,
    context: Vec<f32>,
    text_mask: Vec<bool>,
    image_mask: Vec<bool>,
}

impl DeviceSteps<'_> {
    /// The graphs' device-lifetime tensors (biases, the scaler tile, the plain LayerNorm's
    /// vectors), put once per worker.
    pub(super) fn ensure_constants(&self) -> Result<(), DitRunError> {
        let mut done = lock(&self.dev.constants);
        if !*done {
            let up = super::super::graph::constants(self.dev, self.weights)?;
            self.dev
                .call(&json!({"op": "put", "tensors": up.specs()}), &up.bytes())?;
            *done = true;
        }
        Ok(())
    }

    /// The observation's context, masks and cross K/V on the device, once per observation
    /// (again only when a step brings another context, or the worker was replaced).
    pub(super) fn ensure_observation(
        &self,
        inp: &DitStepInputs<'_>,
    ) -> Result<CrossKeys, DitRunError> {
        let key = ObservationKey {
            worker: self.dev.reopened(),
            context: inp.context.to_vec(),
            text_mask: inp.text_mask.to_vec(),
            image_mask: inp.image_mask.to_vec(),
        };
        let mut obs = lock(&self.observation);
        if let Some((k, keys)) = obs.as_ref()
            && *k == key
        {
            return Ok(*keys);
        }
        let cross = self.plan.dims.cross_dim;
        if inp.context.len() != inp.text_mask.len() * cross
            || inp.text_mask.len() != inp.image_mask.len()
        {
            return Err(DitRunError::Input("context and masks disagree".into()));
        }
        let (g, up, keys) = observation_graph(
            self.dev,
            &self.plan,
            self.weights,
            inp.context,
            inp.text_mask,
            inp.image_mask,
        )?;
        let (request, _) = g.request(&up, &[])?;
        self.dev.call(&request, &up.bytes())?;
        *obs = Some((key, keys));
        Ok(keys)
    }

    /// One step's graph: the tokens and SiLU(temb) in, the stream after the last block out.
    pub(super) fn run_step_graph(
        &self,
        inp: &DitStepInputs<'_>,
        keys: CrossKeys,
    ) -> Result<Vec<f32>, DitRunError> {
        let dims = &self.plan.dims;
        let d = dims.width();
        if inp.tokens.len() != dims.sa_tokens * d || inp.temb.len() != d {
            return Err(DitRunError::Input(format!(
                "tokens {} (want {}x{d}), temb {}",
                inp.tokens.len(),
                dims.sa_tokens,
                inp.temb.len()
            )));
        }
        // SiLU(temb) on the host, packed to bf16, as the emulator does it.
        let mut act = inp.temb.to_vec();
        crate::cpu::norms::silu(&mut act);
        act.iter_mut()
            .for_each(|v| *v = tt_blackhole::bf16::round_to_bf16(*v));
        let (g, up, out): (_, Upload, String) =
            step_graph(self.dev, &self.plan, self.weights, inp.tokens, &act, keys)?;
        let steps = g.steps();
        let m = dims.sa_tokens;
        let (request, programs) = g.request(&up, &[(&out, m, d)])?;
        let (ans, back) = self.dev.call(&request, &up.bytes())?;
        if ans["steps"].as_u64() != Some(steps as u64)
            || ans["programs"].as_u64() != Some(programs as u64)
        {
            return Err(DitRunError::Device(format!(
                "the step graph ran {} of its {steps} steps in {} programs, the plan packed {programs}",
                ans["steps"], ans["programs"]
            )));
        }
        if back.len() != m * d * 4 {
            return Err(DitRunError::Device(format!(
                "the step graph returned {} bytes, want {}",
                back.len(),
                m * d * 4
            )));
        }
        Ok(back
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}
