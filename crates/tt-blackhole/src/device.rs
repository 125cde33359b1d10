//! The device boundary. The DiT blocks of a denoise step run behind [`DitDevice`]: the CPU
//! emulator in `gr00t-runtime`, or (its cargo feature `device`) a Tenstorrent device through
//! ttnn: a p150a card or the ttsim simulator of one. This crate only names the choice; asking
//! for a device in a build without the dispatch fails with [`DeviceError::NotBuiltIn`], never
//! silently falls back.

use serde::{Deserialize, Serialize};

/// Where the megakernel's per-step schedule runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// The CPU emulation of the plan (block-float weights decoded exactly, bf16 packs, fp32
    /// accumulation). Always available.
    Emulator,
    /// A Blackhole p150a card through tt-metal (ttnn).
    P150a,
    /// The same host code and kernels on tt-metal's functional simulator of a p150a
    /// (`TT_METAL_SIMULATOR`); no SFPU, slow dispatch.
    Simulator,
}

/// Device selection failure.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeviceError {
    /// A card or simulator was named, but this build has no tt-metal dispatch (holds the name).
    #[error(
        "megakernel device {0:?} is not built in: this build has no tt-metal dispatch (build \
         gr00t-server with `--features device`, and run it where ttnn and a card or the simulator \
         exist); use the emulator (`emulator`)"
    )]
    NotBuiltIn(String),
    /// The name is not a device this crate knows (holds the name as given).
    #[error("unknown megakernel device {0:?}: expected `emulator`, `p150a` or `sim`")]
    Unknown(String),
}

/// Parse a device name (`emulator`, `p150a` / `card` / `tt-metal`, `sim` / `simulator`) and
/// check that it is available in this build: `dispatch_built_in` says whether the caller was
/// compiled with a tt-metal dispatch (gr00t-runtime's feature `device`).
pub fn select_device(name: &str, dispatch_built_in: bool) -> Result<DeviceKind, DeviceError> {
    let kind = match name.trim().to_ascii_lowercase().as_str() {
        "" | "emulator" | "emulated" | "cpu" => return Ok(DeviceKind::Emulator),
        "p150a" | "card" | "tt-metal" | "device" | "blackhole" => DeviceKind::P150a,
        "sim" | "simulator" | "ttsim" => DeviceKind::Simulator,
        _ => return Err(DeviceError::Unknown(name.to_string())),
    };
    if dispatch_built_in {
        Ok(kind)
    } else {
        Err(DeviceError::NotBuiltIn(name.to_string()))
    }
}

/// Why a [`DitDevice`] could not prepare or run a step's DiT blocks.
#[derive(Debug, thiserror::Error)]
pub enum DitRunError {
    /// The core plan cannot be cut for these dimensions (e.g. a buffer overflows L1).
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// The arena does not hold what the model or the plan expects.
    #[error("DiT arena: {0}")]
    Arena(String),
    /// A step's inputs disagree with the plan's dimensions.
    #[error("DiT step input: {0}")]
    Input(String),
    /// The device failed: a reply the runtime cannot use, a device it cannot open.
    #[error("{0}")]
    Device(String),
    /// The device's worker failed a request (typed: what happened, to which request).
    #[error(transparent)]
    Fault(#[from] DeviceFault),
}

/// What happened to a request the device's worker was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The worker process could not be started.
    Spawn,
    /// The worker exited, or its pipes broke, while the request was in flight.
    Exited,
    /// The worker gave no answer within the deadline and was killed.
    Timeout,
    /// The worker refused the request: it does not match the protocol's schema.
    Schema,
    /// The worker ran the request and it failed (a ttnn or tt-metal exception).
    Failed,
    /// The worker's answer does not match the protocol (framing, JSON, a field).
    Protocol,
}

impl FaultKind {
    /// Whether the worker is gone or unusable after such a fault, as opposed to one request
    /// failing on a live worker.
    pub fn is_fatal(self) -> bool {
        !matches!(self, FaultKind::Schema | FaultKind::Failed)
    }
}

/// A failure of the device's worker, kept typed from the worker up to the HTTP edge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
pub struct DeviceFault {
    /// What happened.
    pub kind: FaultKind,
    /// The request's op (`graph`, `replay`, `matmul`, ...).
    pub op: String,
    /// The whole message (the worker's error, its last output, the deadline that passed).
    pub message: String,
    /// The request that failed, its long strings (kernel sources) shortened.
    pub request: String,
}

/// One denoise step's DiT inputs, host-side f32 (batch 1).
#[derive(Debug, Clone, Copy)]
pub struct DitStepInputs<'a> {
    /// `[sa_tokens, D]`: the state token and the action tokens (+ position embedding).
    pub tokens: &'a [f32],
    /// `[D]`: the timestep embedding temb of this step.
    pub temb: &'a [f32],
    /// `[ctx_tokens, cross_dim]`: vl_embeds after vlln.
    pub context: &'a [f32],
    /// `[ctx_tokens]`: keys the text cross blocks (i % 4 == 0) may attend.
    pub text_mask: &'a [bool],
    /// `[ctx_tokens]`: keys the image cross blocks (i % 4 == 2) may attend.
    pub image_mask: &'a [bool],
}

/// What executes the DiT blocks of one step: the emulator, or a device (card or simulator).
/// Output: `[sa_tokens, D]`, the token stream after the last block (before `norm_out`).
pub trait DitDevice: Send + Sync {
    /// Which device this is.
    fn kind(&self) -> DeviceKind;
    /// Once per observation: cut the plan for this context length (the L1 check depends on
    /// it). Fails when the plan does not fit.
    fn prepare(&mut self, ctx_tokens: usize) -> Result<(), DitRunError>;
    /// Run every DiT block of one step on `inputs` (after [`DitDevice::prepare`]) and return the
    /// token stream, `[sa_tokens, D]` row-major.
    fn run_blocks(&self, inputs: &DitStepInputs<'_>) -> Result<Vec<f32>, DitRunError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_selection_fails_clearly() {
        assert_eq!(select_device("emulator", false), Ok(DeviceKind::Emulator));
        for name in ["p150a", "sim"] {
            let e = select_device(name, false).unwrap_err();
            assert!(matches!(e, DeviceError::NotBuiltIn(_)));
            assert!(e.to_string().contains("not built in"));
        }
        assert_eq!(select_device("p150a", true), Ok(DeviceKind::P150a));
        assert_eq!(select_device("SIM", true), Ok(DeviceKind::Simulator));
        assert!(matches!(
            select_device("gpu", true),
            Err(DeviceError::Unknown(_))
        ));
    }
}
