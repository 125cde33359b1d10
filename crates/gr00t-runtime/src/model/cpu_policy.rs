//! The `cpu` backend of the [`Policy`] seam.

use super::{DitExecutor, Encoders, Gr00tModel, ModelError, Taps};
use crate::policy::{
    ActionChunk, ForwardTiming, HostStages, ModelInputs, Policy, PolicyError, Stage,
};
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
    /// Wraps an already-loaded model.
    pub fn new(model: Gr00tModel) -> Self {
        Self { model }
    }
    /// The model this backend runs.
    pub fn model(&self) -> &Gr00tModel {
        &self.model
    }
}

impl From<ModelError> for PolicyError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Input(m) => PolicyError::Shape(m),
            ModelError::Dit(tt_blackhole::device::DitRunError::Fault(f)) => PolicyError::Device(f),
            other => PolicyError::Backend(other.to_string()),
        }
    }
}

impl Gr00tModel {
    /// `(action_horizon, max_action_dim, max_state_dim)`: what [`Policy::dims`] reports.
    pub fn policy_dims(&self) -> (usize, usize, usize) {
        let g = &self.cfg.gr00t;
        (g.action_horizon, g.max_action_dim, g.max_state_dim)
    }

    /// One forward as every [`Policy`] runs it: encode, then the action head on the DiT executor
    /// that `make_dit` builds, timed per phase (building the executor counts to the action head,
    /// where a device backend pays its set-up), with the stages the host ran (the backbone but
    /// what `enc` ran, and what of the head the executor left to it).
    pub fn predict_timed<D: DitExecutor>(
        &self,
        inputs: &ModelInputs,
        enc: Encoders<'_>,
        make_dit: impl FnOnce() -> Result<D, ModelError>,
    ) -> Result<(ActionChunk, ForwardTiming), PolicyError> {
        let mut taps = Taps::none();
        let t0 = Instant::now();
        let bb = self.encode_with(inputs, enc, &mut taps)?;
        // A device's image encoder ran the vision tower and the projector; its LLM encoder the
        // body and vlln.
        let mut backbone = HostStages::BACKBONE;
        if enc.images.is_some() {
            backbone = backbone.without(Stage::Vision).without(Stage::Projector);
        }
        if enc.llm.is_some() {
            backbone = backbone.without(Stage::Llm).without(Stage::Vlln);
        }
        let t1 = Instant::now();
        let mut dit = make_dit()?;
        let chunk = self.act(&bb, inputs, &mut dit, &mut taps)?;
        let t2 = Instant::now();
        Ok((
            chunk,
            ForwardTiming {
                encode_ms: (t1 - t0).as_secs_f64() * 1e3,
                device_ms: (t2 - t1).as_secs_f64() * 1e3,
                host_stages: backbone.union(dit.host_stages()),
            },
        ))
    }
}

impl Policy for CpuPolicy {
    fn backend_name(&self) -> &str {
        "cpu"
    }
    fn dims(&self) -> (usize, usize, usize) {
        self.model.policy_dims()
    }
    fn predict(&self, inputs: &ModelInputs) -> Result<(ActionChunk, ForwardTiming), PolicyError> {
        self.model
            .predict_timed(inputs, Encoders::default(), || Ok(self.model.cpu_dit()))
    }
}
