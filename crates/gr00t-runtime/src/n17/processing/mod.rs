//! N1.7 processing as the reference does it: images (letterbox, INTER_AREA resizes, the
//! fractional centre crop, Qwen3-VL patches), the prompt, state normalisation and encodings,
//! and the decoding of the action chunk back to the embodiment's units.
//!
//! Pure functions over plain types, one concern per module, in pipeline order:
//! - [`config`]: the embodiment's modality config, statistics and projector id;
//! - [`observation`]: the raw request and its field-named shape checks;
//! - [`image`]: the eval transform per frame and the view-major / time-major orders;
//! - [`vision_input`]: `pixel_values` and `image_grid_thw`;
//! - [`prompt`]: instruction -> chat template -> `input_ids`;
//! - [`state`]: the normalised, padded state rows;
//! - [`decode`] and [`pose`]: the chunk back to actions (relative joints and EEF poses).
//!
//! [`Processing`] ties them together for a transport: [`Processing::prepare`] and
//! [`Processing::decode`].

pub mod config;
mod config_load;
pub mod decode;
pub mod image;
pub mod observation;
pub mod pose;
pub mod prompt;
pub mod state;
pub mod vision_input;

use std::collections::BTreeMap;
use std::path::Path;

pub use config::{ConfigError, EmbodimentConfig};
pub use decode::{DecodeError, GroupActions};
pub use observation::Observation;
pub use prompt::{PromptError, Prompter};
pub use vision_input::{PixelValues, QwenImageConfig, VisionInputError};

use crate::request::InputError;
use crate::tokenizer::formalize_instruction;

/// Why processing files could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The checkpoint's processor files or the image-processor config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The chat template or the tokenizer.
    #[error(transparent)]
    Prompt(#[from] PromptError),
}

/// Why one observation could not be turned into model inputs.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The request is malformed (names the field): a client error.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The images cannot become patches with these processor settings.
    #[error(transparent)]
    Vision(#[from] VisionInputError),
    /// The prompt could not be rendered or tokenised.
    #[error(transparent)]
    Prompt(#[from] PromptError),
}

/// What the model takes for one observation.
#[derive(Clone, Debug)]
pub struct PreparedInputs {
    /// The instruction after formalisation.
    pub instruction: String,
    /// Token ids `[seq]` (the attention mask is all ones).
    pub input_ids: Vec<u32>,
    /// Patches of every image, prompt order.
    pub pixel_values: PixelValues,
    /// Normalised state `[state_history, max_state_dim]` row-major.
    pub state: Vec<f32>,
    /// Rows of `state`.
    pub state_history: usize,
    /// Projector index of the embodiment.
    pub embodiment_id: usize,
}

/// The processing of one embodiment of a checkpoint.
#[derive(Debug)]
pub struct Processing {
    /// The embodiment's settings.
    pub config: EmbodimentConfig,
    /// The image processor's settings.
    pub vision: QwenImageConfig,
    /// The chat template and tokenizer.
    pub prompter: Prompter,
}

impl Processing {
    /// Loads the checkpoint's processor files (`checkpoint_dir`) for `embodiment` and the
    /// backbone's processor files (`backbone_processor_dir`: tokenizer, chat template,
    /// `preprocessor_config.json`).
    pub fn load(
        checkpoint_dir: &Path,
        embodiment: &str,
        backbone_processor_dir: &Path,
    ) -> Result<Self, LoadError> {
        Ok(Self {
            config: EmbodimentConfig::load(checkpoint_dir, embodiment)?,
            vision: QwenImageConfig::load(backbone_processor_dir)?,
            prompter: Prompter::load(backbone_processor_dir)?,
        })
    }

    /// The instruction as the prompt gets it (`re.sub(r"[^\w\s]", "", text.lower())` when
    /// `formalize_language`).
    pub fn instruction(&self, raw: &str) -> String {
        if self.config.formalize_language {
            formalize_instruction(raw)
        } else {
            raw.to_owned()
        }
    }

    /// The model inputs of one observation.
    pub fn prepare(&self, obs: &Observation) -> Result<PreparedInputs, PrepareError> {
        obs.check(&self.config)?;
        let state = state::encode_state(&self.config, &obs.state)?;
        let images = image::prompt_images(&self.config, obs);
        let pixel_values = vision_input::pixel_values(&self.vision, &images)?;
        let instruction = self.instruction(&obs.instruction);
        let tokens = pixel_values.tokens_per_image(self.vision.merge_size);
        let prompt = self.prompter.prompt(&instruction, &tokens)?;
        Ok(PreparedInputs {
            instruction,
            input_ids: prompt.input_ids,
            pixel_values,
            state,
            state_history: self.config.state_history,
            embodiment_id: self.config.embodiment_id,
        })
    }

    /// The model's normalised chunk `[max_action_horizon, max_action_dim]` back to actions,
    /// given the request's raw state.
    pub fn decode(
        &self,
        chunk: &[f32],
        raw_state: &BTreeMap<String, Vec<Vec<f32>>>,
    ) -> Result<Vec<GroupActions>, DecodeError> {
        decode::decode_actions(&self.config, chunk, raw_state)
    }
}
