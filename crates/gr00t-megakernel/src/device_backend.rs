//! The seam between the megakernel policy and a device backend. The policy owns the arena,
//! the model and the supervision the server sees; a backend (the crate `gr00t-device`: the
//! ttnn worker, our kernels, the graph builder) runs the blocks, the head and the backbone on a
//! card or its simulator. The server's `device` feature passes the backend's [`DeviceOpener`]
//! in; without one, `p150a` and `sim` are refused as not built in.
//!
//! Three levels, as a device's state lives:
//! * [`DeviceOpener`]: opens a device and uploads the arena (once per boot);
//! * [`DeviceBackend`]: the open device, which the server supervises (loss, reopen, counters);
//! * [`DeviceForward`]: one observation's forward over it (its counters' window), the
//!   executor's [`DitDevice`], and the encoders' and the whole head's runs.

use tt_blackhole::arena::ArenaIndex;
use tt_blackhole::device::{DeviceKind, DitDevice, DitRunError};
use tt_blackhole::dims::DitDims;

use crate::backbone_arena::BackboneArena;
use crate::counters::DeviceStats;
use crate::executor::MegakernelConfig;
use crate::head_arena::HeadArena;
use gr00t_runtime::config::{TextConfig, VisionConfig};
use gr00t_runtime::model::dit::DitWeights;

/// Opens a device of one kind with the arena on it.
pub trait DeviceOpener: Send + Sync {
    /// Open `kind` (a p150a or the simulator) as `config` says (worker interpreter, deadline,
    /// chaining, replay) and upload `arena`, the bytes `index` describes.
    fn open(
        &self,
        kind: DeviceKind,
        index: &ArenaIndex,
        arena: &[u8],
        config: &MegakernelConfig,
    ) -> Result<Box<dyn DeviceBackend>, DitRunError>;
}

/// An open device holding the arena, as the policy supervises it.
pub trait DeviceBackend: Send + Sync {
    /// `None` while usable; else why not (the failure that lost it, or that it was closed).
    fn lost(&self) -> Option<String>;
    /// The process that drives the device, while it runs.
    fn worker_pid(&self) -> Option<u32>;
    /// How many times [`DeviceBackend::reopen`] brought it back.
    fn reopened(&self) -> u32;
    /// After a loss: open the device again and upload `arena` again.
    fn reopen(&self, arena: &[u8]) -> Result<(), DitRunError>;
    /// Close the device (bounded); it is lost from then on.
    fn close(&self);
    /// The last finished forward's measured traffic; `None` before the first.
    fn stats(&self) -> Option<DeviceStats>;
    /// What the steps' host share cost, as `/info` reports it.
    fn step_host(&self) -> serde_json::Value;
    /// One observation's forward, its plan first cut for `dims` (the context length is
    /// re-cut by [`DitDevice::prepare`]); `weights` are the model's DiT (its biases and block
    /// kinds). Its traffic is counted as one forward until it is dropped.
    fn forward<'a>(
        &'a self,
        weights: &'a DitWeights,
        dims: &DitDims,
    ) -> Result<Box<dyn DeviceForward + 'a>, DitRunError>;
    /// The backend's own type, for its tests and tools that need more than this seam (its
    /// counters by kind, its worker).
    fn as_any(&self) -> &dyn std::any::Any;
}

/// One observation's forward on an open device: each step's DiT blocks ([`DitDevice`]), or the
/// whole action head at once, and the backbone's stages before them.
pub trait DeviceForward: DitDevice {
    /// The whole action head (state and action encoders, every denoising step, the decoder and
    /// the Euler update) with `head`'s weights: the normalised chunk
    /// `[horizon, max_action_dim]`.
    fn run_flow(
        &self,
        head: &HeadArena,
        inputs: &ForwardInputs<'_>,
    ) -> Result<Vec<f32>, DitRunError>;

    /// The image tokens of one `[ch, h, w]` image from `arena`'s vision tower and projector
    /// (`[(h/p/2)·(w/p/2), text hidden]`); they also stay on the device, in `camera`'s rows.
    fn image_tokens(
        &self,
        arena: &BackboneArena,
        vision: &VisionConfig,
        pixels: &[f32],
        hw: (usize, usize),
        camera: Camera,
    ) -> Result<Vec<f32>, DitRunError>;

    /// The VL context `[ids, hidden]` of `prompt` from `arena`'s first `layers` Qwen3 layers,
    /// its final norm and vlln.
    fn vl_context(
        &self,
        arena: &BackboneArena,
        text: &TextConfig,
        layers: usize,
        prompt: Prompt<'_>,
    ) -> Result<Vec<f32>, DitRunError>;
}

/// One forward's inputs to the device (batch 1).
#[derive(Debug, Clone, Copy)]
pub struct ForwardInputs<'a> {
    /// The VL context `[tokens, cross_dim]` (after vlln), as the steps take it.
    pub context: &'a [f32],
    /// Per context token: a text key of the text cross blocks.
    pub text_mask: &'a [bool],
    /// Per context token: an image key of the image cross blocks.
    pub image_mask: &'a [bool],
    /// The normalised state `[max_state_dim]`.
    pub state: &'a [f32],
    /// x₀ `[horizon, max_action_dim]`.
    pub noise: &'a [f32],
    /// Per denoising step: the DiT's timestep embedding `[D]`.
    pub temb: &'a [Vec<f32>],
    /// Per denoising step: the action encoder's sinusoidal encoding of τ `[D]`.
    pub tau_enc: &'a [Vec<f32>],
    /// The action position embedding's rows `[horizon, D]` (zeros without one).
    pub pos: &'a [f32],
}

/// Which of an observation's cameras an image is: a device keeps each camera's tokens in rows
/// of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Camera {
    /// Its place among the observation's cameras.
    pub index: usize,
    /// The observation's cameras.
    pub of: usize,
}

/// One prompt as the device's LLM takes it.
#[derive(Debug, Clone, Copy)]
pub struct Prompt<'a> {
    /// The token ids.
    pub ids: &'a [u32],
    /// The id whose tokens take the image rows, in order.
    pub image_token: u32,
    /// The image tokens' rows `[image tokens, hidden]` (the projector's, every camera's).
    pub image_rows: &'a [f32],
}
