//! The transport-agnostic prediction service: host pipeline + policy + the device lock.
//!
//! [`Runtime::predict_body`] is what `POST /predict` and `gr00t-server predict` both run, so
//! they return the same JSON. Host work (JSON, PNG decode, preprocessing, tokenization,
//! decoding) runs concurrently; only the forward holds the device lock, so requests to the one
//! device are serialized, in arrival order ([`FifoLock`]).

use std::time::Instant;

use gr00t_runtime::policy::{DeviceSupervision, HostStages, Policy, PolicyError};
use gr00t_runtime::request::HostPipeline;

use crate::api::{GroupArrays, PredictRequest, PredictResponse, Timing};
use crate::error::ApiError;
use crate::fifo::FifoLock;

/// Static description served by `/info`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RuntimeInfo {
    /// Model version (`n16` or `n17`, the checkpoint's).
    pub version: String,
    /// Embodiment tag (`GR00T_EMBODIMENT`).
    pub embodiment: String,
    /// The embodiment's slot in the checkpoint (`embodiment_id.json`).
    pub embodiment_id: usize,
    /// Prompt layout (`GR00T_LAYOUT`: `gr1` or `dynamic`).
    pub layout: String,
    /// The backend actually running the forward (`Policy::backend_name`).
    pub backend: String,
    /// What `GR00T_DIT_BACKEND` asked for.
    pub dit_backend_requested: String,
    /// Stage name of `backend` ([`stage_for`]).
    pub stage: String,
    /// Precision policy (`GR00T_POLICY`).
    pub policy: String,
    /// Hugging Face repository of the weights (`TT_WEIGHTS_REPO`).
    pub weights_repo: String,
    /// Pinned weights revision (`TT_WEIGHTS_REVISION`); `None`: not pinned.
    pub weights_revision: Option<String>,
    /// The checkpoint directory loaded.
    pub model_dir: String,
    /// [`crate::demo::weights_fingerprint`] of the loaded checkpoint.
    pub weights_fingerprint: Option<String>,
    /// Camera keys a request's `images` must hold, in order.
    pub cameras: Vec<String>,
    /// State groups a request's `state` must hold: (name, dimension), in order.
    pub state_groups: Vec<(String, usize)>,
    /// Action groups of the response: (name, dimension), in order.
    pub action_groups: Vec<(String, usize)>,
    /// Steps per action group.
    pub action_horizon: usize,
    /// Instruction token limit of the layout; `None`: no limit beyond the processor's own.
    pub max_instruction_tokens: Option<usize>,
    /// PCC of the boot self-check against the demo; `None`: no check ran.
    pub warmup_pcc: Option<f64>,
    /// What this binary is and how the image that carries it was built.
    pub build: crate::build_info::BuildInfo,
    /// N1.7 only (omitted for N1.6): the history a request carries and the RTC chunk shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n17: Option<crate::n17_runtime::N17Info>,
}

/// `stage` names by backend, as the seed server reports them.
pub fn stage_for(backend: &str) -> &'static str {
    match backend {
        "megakernel" => "stage2-megakernel",
        // The megakernel schedule run by the CPU emulator of the card.
        "megakernel-emulated" => "stage2-megakernel-emulated",
        // The DiT blocks of each step on a device (feature `device`), activations kept there,
        // the SFPU steps (LayerNorm, softmax, GELU) on the device too (docs/blackhole.md §11).
        "megakernel-sim" => "stage2-megakernel-sim-devicestep",
        "megakernel-p150a" => "stage2-megakernel-p150a-devicestep",
        "ttnn" => "stage1-ttnn-traces",
        _ => "cpu-reference",
    }
}

/// What answers the predictions: N1.6's host pipeline and policy, or the N1.7 model (chosen
/// by the checkpoint's `config.json`, see [`crate::boot::load_runtime`]).
// One per process: the variants' size difference costs nothing, and N1.6's pipeline stays
// inline (no extra indirection on its hot path).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Served {
    N16 {
        pipeline: HostPipeline,
        policy: Box<dyn Policy>,
    },
    N17(Box<crate::n17_runtime::N17Engine>),
}

/// A loaded model ready to predict: host pipeline, policy and the device lock.
pub struct Runtime {
    pub(crate) served: Served,
    /// What `/info` serves.
    pub info: RuntimeInfo,
    device: FifoLock,
    /// The stages the host ran for the last finished forward (`device.host_stages`).
    last_host_stages: std::sync::Mutex<Option<HostStages>>,
}

impl Runtime {
    pub(crate) fn new(pipeline: HostPipeline, policy: Box<dyn Policy>, info: RuntimeInfo) -> Self {
        Self {
            served: Served::N16 { pipeline, policy },
            info,
            device: FifoLock::new(),
            last_host_stages: std::sync::Mutex::new(None),
        }
    }

    /// An N1.7 runtime (CPU only: no device to supervise).
    pub(crate) fn new_n17(engine: crate::n17_runtime::N17Engine, info: RuntimeInfo) -> Self {
        Self {
            served: Served::N17(Box::new(engine)),
            info,
            device: FifoLock::new(),
            last_host_stages: std::sync::Mutex::new(None),
        }
    }

    /// The device the policy runs on, when it can be lost and reopened (`None`: host only).
    pub fn policy_device(&self) -> Option<&dyn DeviceSupervision> {
        match &self.served {
            Served::N16 { policy, .. } => policy.device(),
            Served::N17(_) => None,
        }
    }

    /// Requests whose host work is done and that wait for the device.
    pub fn queued(&self) -> u64 {
        self.device.waiting()
    }

    /// Close the policy's device, if it runs on one (shutdown; bounded).
    pub fn close_device(&self) {
        if let Some(d) = self.policy_device() {
            d.close();
        }
    }

    /// The served backend's measured device traffic, as `/info` and `predict --stats-json`
    /// show it: `null` for a backend without a device (CPU reference, emulator); for a device,
    /// the last finished forward's counts (`programs_per_step`, `host_to_device_bytes_per_step`,
    /// `device_to_host_bytes_per_step`, `steps`, each step, the forward, the totals since the
    /// device opened), or `{"forwards": 0, "note": ...}` before the first forward; and under
    /// `step_host` the host's share of the steps since the device opened, those whose graph
    /// was sent whole (`built`: a timestep or context the worker did not hold yet) and those
    /// the worker replayed (`replayed`: only the tokens sent); and under `host_stages` the model
    /// stages the host ran for the last forward, by name, in forward order (`preprocess`,
    /// `tokenize` and `decode` always; the backbone while it runs on the host; the head's stages
    /// the device did not take).
    pub fn device_stats(&self) -> serde_json::Value {
        let Some(dev) = self.policy_device() else {
            return serde_json::Value::Null;
        };
        let mut v = match dev.stats() {
            Some(s) => serde_json::to_value(s).unwrap_or(serde_json::Value::Null),
            None => serde_json::json!({
                "forwards": 0,
                "note": "no forward has finished on the device yet: the counts come after the first",
            }),
        };
        if let Some(host) = dev.step_host() {
            v["step_host"] = host;
        }
        let stages = *self
            .last_host_stages
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(stages) = stages {
            v["host_stages"] = serde_json::to_value(stages).unwrap_or_default();
        }
        v
    }

    /// Parse and run one `/predict` body.
    pub fn predict_body(&self, body: &[u8]) -> Result<PredictResponse, ApiError> {
        let t0 = Instant::now();
        if let Served::N17(engine) = &self.served {
            return engine.predict_body(body, t0, &self.device);
        }
        gr00t_runtime::preprocess::expect_decode();
        let req = PredictRequest::parse(body)?;
        self.predict(req, t0)
    }

    /// Run one parsed request; `t0` is when the request started (for `timing_ms.total`).
    pub fn predict(&self, req: PredictRequest, t0: Instant) -> Result<PredictResponse, ApiError> {
        let Served::N16 { pipeline, policy } = &self.served else {
            return Err(ApiError::Internal(
                "an N1.6 request was given to the N1.7 runtime".into(),
            ));
        };
        let (obs, seed, with_norm) = req.into_observation()?;
        let prepared = pipeline.prepare(&obs)?;
        let decode_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (chunk, fwd) = {
            // Arrival order; a panic inside a forward still hands the device to the next.
            let _turn = self.device.lock();
            policy.predict(&prepared.inputs).map_err(forward_error)?
        };
        // The pipeline's own stages around the policy's: image preprocessing and the prompt
        // before it, the chunk's decode after.
        *self
            .last_host_stages
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(HostStages::PIPELINE.union(fwd.host_stages));
        let t1 = Instant::now();
        let decoded = pipeline
            .decode(&prepared, &chunk, with_norm)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let decode_actions = t1.elapsed().as_secs_f64() * 1e3;
        Ok(PredictResponse {
            actions: GroupArrays(decoded.actions),
            actions_normalized: decoded.normalized.map(GroupArrays),
            action_horizon: pipeline.processor.action_horizon,
            embodiment: pipeline.processor.embodiment.clone(),
            seq_len: prepared.seq_len,
            seed,
            timing_ms: Timing {
                decode: decode_ms,
                encode: fwd.encode_ms,
                device: fwd.device_ms,
                decode_actions,
                total: t0.elapsed().as_secs_f64() * 1e3,
            },
            chunk: None,
        })
    }
}

/// A failed forward as the client sees it: inputs that do not fit the model are its fault
/// (400), a lost device is temporary (503 with `Retry-After`: the supervisor reopens it), the
/// rest is the server's (500).
fn forward_error(e: PolicyError) -> ApiError {
    match e {
        PolicyError::Shape(m) => ApiError::bad("body", format!("does not fit the model: {m}")),
        PolicyError::DeviceUnavailable { device, reason } => ApiError::Unavailable {
            message: format!("forward failed: device {device} unavailable: {reason}"),
            retry_after_s: crate::error::RETRY_AFTER_S,
        },
        e @ (PolicyError::Backend(_) | PolicyError::Device(_)) => {
            ApiError::Internal(format!("forward failed: {e}"))
        }
    }
}

/// Pearson correlation of two equally long series (1.0 for two identical constant series).
pub fn pcc(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    if saa == 0.0 || sbb == 0.0 {
        return if a == b { 1.0 } else { 0.0 };
    }
    sab / (saa.sqrt() * sbb.sqrt())
}
