//! The seam through which a device runs the whole action head ([`DitExecutor::run_flow`]):
//! the device backend's one graph per forward; the emulator declines (the host runs the loop).
//!
//! [`DitExecutor::run_flow`]: gr00t_runtime::model::DitExecutor::run_flow

use tt_blackhole::device::DitRunError;

use super::device_backend::ForwardInputs;
use super::executor::Engine;
use super::head_arena::HeadArena;
use gr00t_runtime::model::FlowInputs;

/// The observation a [`FlowDevice`] runs the head over (what [`DitExecutor::prepare`] kept).
pub struct FlowContext<'a> {
    /// The VL context `[tokens, cross_dim]`.
    pub context: &'a [f32],
    /// The text cross blocks' keys.
    pub text_mask: &'a [bool],
    /// The image cross blocks' keys.
    pub image_mask: &'a [bool],
}

/// A device that may run the whole action head: `None` when it does not (the emulator).
pub trait FlowDevice {
    /// The whole flow on the device with `head`'s weights.
    fn run_flow(
        &self,
        _head: &HeadArena,
        _ctx: &FlowContext<'_>,
        _flow: &FlowInputs<'_>,
    ) -> Option<Result<Vec<f32>, DitRunError>> {
        None
    }
}

impl FlowDevice for Engine<'_> {
    fn run_flow(
        &self,
        head: &HeadArena,
        ctx: &FlowContext<'_>,
        flow: &FlowInputs<'_>,
    ) -> Option<Result<Vec<f32>, DitRunError>> {
        match self {
            Engine::Emulator(_) => {
                let _ = (head, ctx, flow);
                None
            }
            Engine::Device(d) => Some(d.run_flow(
                head,
                &ForwardInputs {
                    context: ctx.context,
                    text_mask: ctx.text_mask,
                    image_mask: ctx.image_mask,
                    state: flow.state,
                    noise: flow.noise,
                    temb: flow.temb,
                    tau_enc: flow.tau_enc,
                    pos: flow.pos,
                },
            )),
        }
    }
}
