//! The device's backbone stages as the model's encoders (`GR00T_BACKBONE_BACKEND=device`):
//! SigLIP2 and the projector per camera ([`DeviceImages`]), Qwen3's body, its final norm and
//! vlln ([`DeviceLlm`]), both over the forward's device steps, which the action head takes after
//! them (so one forward's counters cover the backbone and the head).

use crate::backbone_arena::BackboneArena;
use crate::device_backend::{Camera, DeviceForward, Prompt};
use gr00t_runtime::model::ModelError;

/// The device's vision tower and projector as the model's image encoder, over the forward's
/// device steps (until the action head takes them).
pub(crate) struct DeviceImages<'s, 'a> {
    pub(crate) steps: &'s std::cell::RefCell<Option<Box<dyn DeviceForward + 'a>>>,
    pub(crate) arena: &'s BackboneArena,
    pub(crate) vision: &'s gr00t_runtime::config::VisionConfig,
}

/// The device's Qwen3 body, final norm and vlln as the model's LLM encoder, over the forward's
/// device steps (until the action head takes them).
pub(crate) struct DeviceLlm<'s, 'a> {
    pub(crate) steps: &'s std::cell::RefCell<Option<Box<dyn DeviceForward + 'a>>>,
    pub(crate) arena: &'s BackboneArena,
    pub(crate) text: &'s gr00t_runtime::config::TextConfig,
    /// `select_layer`: the body's kept layers.
    pub(crate) layers: usize,
}

impl gr00t_runtime::model::LlmEncoder for DeviceLlm<'_, '_> {
    fn vl_context(
        &self,
        ids: &[u32],
        image_token: u32,
        image_rows: &[f32],
    ) -> Result<Vec<f32>, ModelError> {
        let steps = self.steps.borrow();
        let steps = steps.as_ref().ok_or(ModelError::NotPrepared(
            "the LLM encoder after the action head",
        ))?;
        let prompt = Prompt {
            ids,
            image_token,
            image_rows,
        };
        steps
            .vl_context(self.arena, self.text, self.layers, prompt)
            .map_err(ModelError::DeviceBackbone)
    }
}

impl gr00t_runtime::model::ImageEncoder for DeviceImages<'_, '_> {
    fn image_tokens(
        &self,
        pixels: &[f32],
        hw: (usize, usize),
        [index, of]: [usize; 2],
    ) -> Result<Vec<f32>, ModelError> {
        let steps = self.steps.borrow();
        let steps = steps.as_ref().ok_or(ModelError::NotPrepared(
            "the image encoder after the action head",
        ))?;
        let camera = Camera { index, of };
        steps
            .image_tokens(self.arena, self.vision, pixels, hw, camera)
            .map_err(ModelError::DeviceBackbone)
    }
}
