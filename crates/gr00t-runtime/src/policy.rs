//! The seam between the host side (preprocessing, decoding) and a model backend.

mod device_stats;
mod host_stages;

pub use device_stats::{Cumulative, DeviceStats, Traffic};
pub use host_stages::{HostStages, Stage};

/// Everything a backend needs for one forward pass, already preprocessed (batch size 1).
#[derive(Debug, Clone)]
pub struct ModelInputs {
    /// Token ids of the prompt, `<IMG_CONTEXT>` placeholders included (length S).
    pub input_ids: Vec<u32>,
    /// One entry per camera, each `[3, H, W]` row-major f32, normalized to [-1, 1].
    pub pixel_values: Vec<Vec<f32>>,
    /// Image height and width in pixels (252 for the real model).
    pub image_hw: (usize, usize),
    /// Normalized, encoded state padded to `max_state_dim`.
    pub state: Vec<f32>,
    /// Embodiment slot of the category-specific layers (GR1 = 20 in the real mapping).
    pub embodiment_id: usize,
    /// The initial flow-matching actions x_0, `[action_horizon, max_action_dim]` row-major.
    pub noise: Vec<f32>,
}

/// The normalized action chunk `[action_horizon, max_action_dim]` produced by the flow loop.
#[derive(Debug, Clone)]
pub struct ActionChunk {
    /// Rows: `action_horizon`.
    pub horizon: usize,
    /// Columns: `max_action_dim` (the embodiment's actions in the leading columns, padding after).
    pub dim: usize,
    /// `[horizon, dim]` row-major, in the model's normalized action space (decoded by the host).
    pub data: Vec<f32>,
}

/// Wall time of each phase of a forward, in milliseconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ForwardTiming {
    /// Vision tower + projector + LLM (+ vlln).
    pub encode_ms: f64,
    /// Action head: state encoder + flow-matching loop.
    pub device_ms: f64,
    /// The model stages the host ran (the rest ran on the device).
    pub host_stages: HostStages,
}

/// A model backend: CPU reference, megakernel emulation, or a real device.
pub trait Policy: Send + Sync {
    /// Short backend name as shown in `/info` (`cpu`, `megakernel-emulated`, …).
    fn backend_name(&self) -> &str;
    /// `(action_horizon, max_action_dim, max_state_dim)` of the loaded model.
    fn dims(&self) -> (usize, usize, usize);
    /// Run one forward.
    fn predict(&self, inputs: &ModelInputs) -> Result<(ActionChunk, ForwardTiming), PolicyError>;
    /// The device this policy runs on, when it runs on one that can be lost and reopened (a
    /// ttnn worker): what a server supervises. `None`: a host-only backend.
    fn device(&self) -> Option<&dyn DeviceSupervision> {
        None
    }
}

/// A device under a policy: whether it is usable now, and how to get it back.
pub trait DeviceSupervision: Send + Sync {
    /// Where it stands: usable or lost, the worker's pid, how often it was reopened.
    fn status(&self) -> DeviceStatus;
    /// Reopen a lost device: a new worker, the device opened, the arena uploaded again.
    fn reopen(&self) -> Result<(), PolicyError>;
    /// Close the device and end its worker, in bounded time (shutdown).
    fn close(&self);
    /// The last finished forward's measured device traffic (programs, bytes each way, per
    /// step); `None` before the first forward, or for a device that does not count.
    fn stats(&self) -> Option<DeviceStats> {
        None
    }
    /// The host's share of the denoising steps since the device opened, as JSON: the steps
    /// whose graph went to the device's worker whole (`built`) and those it replayed
    /// (`replayed`); `None` for a device without a worker.
    fn step_host(&self) -> Option<serde_json::Value> {
        None
    }
}

/// A device's state, as `/health` reports it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceStatus {
    /// The device as configured (`p150a`, `sim`).
    pub device: String,
    /// Whether a forward can run on it now.
    pub usable: bool,
    /// Why it is not usable (the failure, with the worker's last lines).
    pub lost: Option<String>,
    /// The process id of the worker that owns the device, while one runs.
    pub worker_pid: Option<u32>,
    /// How many times the device was reopened after a loss.
    pub reopened: u32,
}

/// Why a forward failed.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The inputs do not fit the loaded model (lengths, image-token count, embodiment id); a client error.
    #[error("input shape: {0}")]
    Shape(String),
    /// The device is lost (its worker died, or was killed after a missed deadline) or being
    /// reopened: nothing wrong with the request; retry later.
    #[error("device {device} unavailable: {reason}")]
    DeviceUnavailable {
        /// The device as configured (`p150a`, `sim`).
        device: String,
        /// What happened to it (the worker's error, with its last lines).
        reason: String,
    },
    /// The device's worker failed a request of the forward (typed: what happened, to which
    /// request).
    #[error("device: {0}")]
    Device(tt_blackhole::device::DeviceFault),
    /// The backend failed for any other reason (weights, device, internal error).
    #[error("backend: {0}")]
    Backend(String),
}
