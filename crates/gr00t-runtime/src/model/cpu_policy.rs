//! The `cpu` backend of the [`Policy`] seam.

use super::{Gr00tModel, ModelError, Taps};
use crate::policy::{ActionChunk, ForwardTiming, ModelInputs, Policy, PolicyError};
use std::path::Path;
use std::time::Instant;

/// [`Gr00tModel`] on the CPU reference kernels.
pub struct CpuPolicy {
    model: Gr00tModel,
}

impl CpuPolicy {
    /// Loads a checkpoint directory (`config.json`, `model.safetensors[.index.json]`).
    pub fn load(model_dir: &Path) -> Result<Self, ModelError> {
        Ok(Self {
            model: Gr00tModel::load(model_dir)?,
        })
    }
    pub fn new(model: Gr00tModel) -> Self {
        Self { model }
    }
    pub fn model(&self) -> &Gr00tModel {
        &self.model
    }
}

impl From<ModelError> for PolicyError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Input(m) => PolicyError::Shape(m),
            other => PolicyError::Backend(other.to_string()),
        }
    }
}

impl Policy for CpuPolicy {
    fn backend_name(&self) -> &str {
        "cpu"
    }
    fn dims(&self) -> (usize, usize, usize) {
        let g = &self.model.cfg.gr00t;
        (g.action_horizon, g.max_action_dim, g.max_state_dim)
    }
    fn predict(&self, inputs: &ModelInputs) -> Result<(ActionChunk, ForwardTiming), PolicyError> {
        let mut taps = Taps::none();
        let t0 = Instant::now();
        let bb = self.model.encode(inputs, &mut taps)?;
        let t1 = Instant::now();
        let mut dit = self.model.cpu_dit();
        let chunk = self.model.act(&bb, inputs, &mut dit, &mut taps)?;
        let t2 = Instant::now();
        Ok((
            chunk,
            ForwardTiming {
                encode_ms: (t1 - t0).as_secs_f64() * 1e3,
                device_ms: (t2 - t1).as_secs_f64() * 1e3,
            },
        ))
    }
}
