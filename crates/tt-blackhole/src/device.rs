//! The device boundary. On a machine with a p150a and a tt-metal build, the DiT denoise runs
//! as one persistent megakernel; here it cannot (no card, no tt-metal, no SFPI toolchain), so
//! this crate defines the boundary and the emulator in `gr00t-runtime` implements it. Asking
//! for the card in a build without it fails with [`DeviceError::NotBuiltIn`], never silently
//! falls back.

use serde::{Deserialize, Serialize};

/// Where the megakernel's per-step schedule runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// The CPU emulation of the plan (block-float weights decoded exactly, bf16 packs, fp32
    /// accumulation). Always available.
    Emulator,
    /// A Blackhole p150a through tt-metal. Not built in.
    P150a,
}

/// Device selection failure.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeviceError {
    #[error(
        "megakernel device {0:?} is not built in: this build has no tt-metal dispatch (it needs a \
         Tenstorrent card and a tt-metal build); use the emulator (`emulator`)"
    )]
    NotBuiltIn(String),
    #[error("unknown megakernel device {0:?}: expected `emulator` or `p150a`")]
    Unknown(String),
}

/// Whether this build can dispatch to a real card. Always false: there is no tt-metal binding.
pub const CARD_BUILT_IN: bool = false;

/// Parse a device name (`emulator`, `p150a` / `card` / `tt-metal`) and check that it is
/// available in this build.
pub fn select_device(name: &str) -> Result<DeviceKind, DeviceError> {
    match name.trim().to_ascii_lowercase().as_str() {
        "" | "emulator" | "emulated" | "cpu" => Ok(DeviceKind::Emulator),
        "p150a" | "card" | "tt-metal" | "device" | "blackhole" => {
            if CARD_BUILT_IN {
                Ok(DeviceKind::P150a)
            } else {
                Err(DeviceError::NotBuiltIn(name.to_string()))
            }
        }
        _ => Err(DeviceError::Unknown(name.to_string())),
    }
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

/// What executes the DiT blocks of one step: the emulator, or (not built here) the card.
/// Output: `[sa_tokens, D]`, the token stream after the last block (before `norm_out`).
pub trait DitDevice: Send + Sync {
    fn kind(&self) -> DeviceKind;
    /// Once per observation: cut the plan for this context length (the L1 check depends on
    /// it). Fails when the plan does not fit.
    fn prepare(&mut self, ctx_tokens: usize) -> Result<(), String>;
    fn run_blocks(&self, inputs: &DitStepInputs<'_>) -> Result<Vec<f32>, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_selection_fails_clearly() {
        assert_eq!(select_device("emulator"), Ok(DeviceKind::Emulator));
        let e = select_device("p150a").unwrap_err();
        assert!(matches!(e, DeviceError::NotBuiltIn(_)));
        assert!(e.to_string().contains("not built in"));
        assert!(matches!(select_device("gpu"), Err(DeviceError::Unknown(_))));
    }
}
