//! One observation in, [`ModelInputs`] out, and the action chunk back to physical actions.
//!
//! [`HostPipeline`] is the host half of a prediction, independent of any transport: the HTTP
//! server and the one-shot `predict` command both call [`HostPipeline::prepare`] and
//! [`HostPipeline::decode`]. Every rejection is an [`InputError`] that names the offending
//! field the way a client wrote it (`images.<camera>`, `state.<group>`, `instruction`, `noise`).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::policy::{ActionChunk, ModelInputs};
use crate::preprocess::{self, ImageError};
use crate::processor::Processor;
use crate::randn;
use crate::tokenizer::{QwenTokenizer, TokenizerError, formalize_instruction};

/// Pixels per image token: 14×14 patches merged 2×2.
const PIXELS_PER_TOKEN: usize = 28 * 28;
/// Longest instruction tokenized at all, in bytes: far above any token limit, it only keeps a
/// huge string from costing tokenizer time before the token limit rejects it.
pub const MAX_INSTRUCTION_BYTES: usize = 16 << 10;

/// A rejected input, naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{field}`: {message}")]
pub struct InputError {
    /// The field as the client named it, e.g. `images.<camera>`, `state.<group>`, `noise`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl InputError {
    /// An error for `field` with `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Where the initial flow-matching actions come from.
#[derive(Debug, Clone, PartialEq)]
pub enum NoiseSource {
    /// `torch.randn` with this seed (the Python policy's meaning of the seed).
    Seed(u64),
    /// Given values, row-major, with the shape the client sent.
    Given {
        /// The shape as sent; must be `[action_horizon, max_action_dim]` (a leading 1 allowed).
        shape: Vec<usize>,
        /// The values, row-major.
        values: Vec<f64>,
    },
}

/// One request, already decoded from its wire format (images are the raw PNG/JPEG bytes).
#[derive(Debug, Clone)]
pub struct Observation {
    /// Encoded image bytes (PNG or JPEG) by camera key; every camera of the processor must be present.
    pub images: BTreeMap<String, Vec<u8>>,
    /// Raw (physical) state by state group, one value per component.
    pub state: BTreeMap<String, Vec<f64>>,
    /// The task instruction, untokenized.
    pub instruction: String,
    /// The initial flow-matching actions: a seed or explicit values.
    pub noise: NoiseSource,
}

/// The inputs of one forward plus what decoding needs afterwards.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The preprocessed inputs handed to the [`crate::policy::Policy`].
    pub inputs: ModelInputs,
    /// Raw state as float32 (the relative groups are composed onto it).
    pub raw_state: BTreeMap<String, Vec<f32>>,
    /// Prompt length S.
    pub seq_len: usize,
    /// Wall time of image decode + preprocessing + tokenization, ms.
    pub prepare_ms: f64,
}

/// The non-image part of [`Prepared`].
struct Rest {
    raw_state: BTreeMap<String, Vec<f32>>,
    state: Vec<f32>,
    input_ids: Vec<u32>,
    noise: Vec<f32>,
}

/// Decoded actions, in modality order.
#[derive(Debug, Clone)]
pub struct DecodedActions {
    /// Physical actions per action group: `(group, [action_horizon][group dim])`.
    pub actions: Vec<(String, Vec<Vec<f32>>)>,
    /// The normalized (model-space) slice, per group, when asked for.
    pub normalized: Option<Vec<(String, Vec<Vec<f32>>)>>,
}

/// The host side of the runtime for one embodiment and one loaded model.
#[derive(Debug)]
pub struct HostPipeline {
    /// The embodiment's processor (normalization, groups, cameras).
    pub processor: Processor,
    /// The Qwen3 tokenizer that builds the prompt.
    pub tokenizer: QwenTokenizer,
    /// Longest accepted instruction, in tokens (`None`: no limit, as the reference).
    pub max_instruction_tokens: Option<usize>,
    /// `(action_horizon, max_action_dim)` of the model: the noise shape.
    pub noise_shape: (usize, usize),
    /// Prompt length with an empty instruction.
    base_seq_len: usize,
    /// The last few prompts' token ids by instruction (see [`Self::prompt_ids`]).
    prompts: std::sync::Mutex<Vec<(String, Vec<u32>)>>,
}

/// Distinct instructions whose token ids [`HostPipeline`] remembers.
const PROMPTS_KEPT: usize = 8;

/// Why a pipeline cannot be assembled.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The tokenizer files could not be loaded.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The processor's widths or horizon do not fit the loaded model's dimensions.
    #[error("model and processor disagree: {0}")]
    Mismatch(String),
}

impl HostPipeline {
    /// Assemble; `model_dims` is [`crate::policy::Policy::dims`] of the loaded model.
    pub fn new(
        processor: Processor,
        tokenizer: QwenTokenizer,
        model_dims: (usize, usize, usize),
        max_instruction_tokens: Option<usize>,
    ) -> Result<Self, PipelineError> {
        let (horizon, action_dim, state_dim) = model_dims;
        if state_dim != processor.max_state_dim {
            return Err(PipelineError::Mismatch(format!(
                "model max_state_dim {state_dim} != processor max_state_dim {}",
                processor.max_state_dim
            )));
        }
        if action_dim != processor.max_action_dim {
            return Err(PipelineError::Mismatch(format!(
                "model max_action_dim {action_dim} != processor max_action_dim {}",
                processor.max_action_dim
            )));
        }
        if horizon < processor.action_horizon {
            return Err(PipelineError::Mismatch(format!(
                "model action_horizon {horizon} < the {} steps the processor decodes",
                processor.action_horizon
            )));
        }
        let tokens = Self::image_tokens_for(&processor);
        let base_seq_len = tokenizer.prompt_ids("", &tokens)?.len();
        Ok(Self {
            processor,
            tokenizer,
            max_instruction_tokens,
            noise_shape: (horizon, action_dim),
            base_seq_len,
            prompts: Default::default(),
        })
    }

    fn image_tokens_for(p: &Processor) -> Vec<usize> {
        let e = p.image.shortest_edge;
        let (h, w) = preprocess::smart_resize(e, e);
        vec![h * w / PIXELS_PER_TOKEN; p.cameras.len()]
    }

    /// The prompt length for an instruction (used to report `seq_len` and enforce the limit).
    pub fn instruction_tokens(&self, seq_len: usize) -> usize {
        seq_len.saturating_sub(self.base_seq_len)
    }

    /// Validate and preprocess one observation.
    pub fn prepare(&self, obs: &Observation) -> Result<Prepared, InputError> {
        let t0 = Instant::now();
        let p = &self.processor;
        // Cameras.
        for key in obs.images.keys() {
            if !p.cameras.contains(key) {
                return Err(InputError::new(
                    format!("images.{key}"),
                    format!("unknown camera; expected {}", p.cameras.join(", ")),
                ));
            }
        }
        // The chain's output size does not depend on the frame's (letterbox, then resizes to
        // a fixed square), so the prompt is known before any pixel is: state, prompt and noise
        // run beside the first frame's decode. Errors keep their order: images, then the rest.
        let image_tokens = Self::image_tokens_for(p);
        let mut rest = None;
        let mut pixel_values = Vec::with_capacity(p.cameras.len());
        let mut image_hw = (0, 0);
        for (i, cam) in p.cameras.iter().enumerate() {
            let field = format!("images.{cam}");
            let bytes = obs
                .images
                .get(cam)
                .ok_or_else(|| InputError::new(&field, "missing camera image"))?;
            let decoded = if i == 0 {
                let (r, side) = preprocess::decode_preprocess_beside(bytes, &p.image, || {
                    self.prepare_rest(obs, &image_tokens)
                });
                rest = Some(side);
                r
            } else {
                preprocess::decode_preprocess(bytes, &p.image)
            };
            let (hw, values) =
                decoded.map_err(|e: ImageError| InputError::new(&field, e.to_string()))?;
            // The chain's fixed output size (see above): a broken invariant, not bad input.
            assert_eq!(
                hw.0 * hw.1 / PIXELS_PER_TOKEN,
                image_tokens[i],
                "the image chain made {hw:?}, not the size the prompt was built for"
            );
            image_hw = hw;
            pixel_values.push(values);
        }
        let rest = rest.unwrap_or_else(|| self.prepare_rest(obs, &image_tokens))?;
        let seq_len = rest.input_ids.len();
        let inputs = ModelInputs {
            input_ids: rest.input_ids,
            pixel_values,
            image_hw,
            state: rest.state,
            embodiment_id: p.embodiment_id,
            noise: rest.noise,
        };
        Ok(Prepared {
            inputs,
            raw_state: rest.raw_state,
            seq_len,
            prepare_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The tokenizer's prompt ids, remembered for the last few instructions: a robot sends the
    /// same instruction with every frame of a task, and the ids are a pure function of it
    /// (the image token counts are fixed per pipeline).
    fn prompt_ids(
        &self,
        instruction: &str,
        image_tokens: &[usize],
    ) -> Result<Vec<u32>, TokenizerError> {
        let lock = || self.prompts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, ids)) = lock().iter().find(|(i, _)| i == instruction) {
            return Ok(ids.clone());
        }
        let ids = self.tokenizer.prompt_ids(instruction, image_tokens)?;
        let mut kept = lock();
        if !kept.iter().any(|(i, _)| i == instruction) {
            if kept.len() == PROMPTS_KEPT {
                kept.remove(0);
            }
            kept.push((instruction.to_owned(), ids.clone()));
        }
        Ok(ids)
    }

    /// Everything of [`Self::prepare`] but the images: state, prompt, noise.
    fn prepare_rest(&self, obs: &Observation, image_tokens: &[usize]) -> Result<Rest, InputError> {
        let p = &self.processor;
        // State.
        for key in obs.state.keys() {
            if !p.state_groups.iter().any(|g| &g.name == key) {
                return Err(InputError::new(
                    format!("state.{key}"),
                    "unknown state group",
                ));
            }
        }
        let mut raw_state = BTreeMap::new();
        for g in &p.state_groups {
            let field = format!("state.{}", g.name);
            let v = obs.state.get(&g.name).ok_or_else(|| {
                InputError::new(&field, format!("missing state group ({} values)", g.dim))
            })?;
            if v.len() != g.dim {
                return Err(InputError::new(
                    &field,
                    format!("expected {} values, got {}", g.dim, v.len()),
                ));
            }
            let mut f = Vec::with_capacity(v.len());
            for (i, &x) in v.iter().enumerate() {
                let y = x as f32;
                if !y.is_finite() {
                    return Err(InputError::new(
                        format!("{field}[{i}]"),
                        "not a finite float32 number",
                    ));
                }
                f.push(y);
            }
            raw_state.insert(g.name.clone(), f);
        }
        let state = p.encode_state(&raw_state);
        // Prompt.
        if obs.instruction.len() > MAX_INSTRUCTION_BYTES {
            return Err(InputError::new(
                "instruction",
                format!("longer than {MAX_INSTRUCTION_BYTES} bytes"),
            ));
        }
        let instruction = if p.formalize_language {
            formalize_instruction(&obs.instruction)
        } else {
            obs.instruction.clone()
        };
        let input_ids = self
            .prompt_ids(&instruction, image_tokens)
            .map_err(|e| InputError::new("instruction", e.to_string()))?;
        if let Some(max) = self.max_instruction_tokens {
            let n = self.instruction_tokens(input_ids.len());
            if n > max {
                return Err(InputError::new(
                    "instruction",
                    format!("{n} tokens, the limit is {max}"),
                ));
            }
        }
        // Noise.
        let (h, d) = self.noise_shape;
        let noise = match &obs.noise {
            NoiseSource::Seed(s) => randn::randn_cached(*s, h * d),
            NoiseSource::Given { shape, values } => {
                let ok = shape.as_slice() == [h, d] || shape.as_slice() == [1, h, d];
                if !ok || values.len() != h * d {
                    return Err(InputError::new(
                        "noise",
                        format!("expected shape [{h}, {d}] or [1, {h}, {d}], got {shape:?}"),
                    ));
                }
                let mut out = Vec::with_capacity(values.len());
                for &x in values {
                    let y = x as f32;
                    if !y.is_finite() {
                        return Err(InputError::new(
                            "noise",
                            "contains a non-finite float32 number",
                        ));
                    }
                    out.push(y);
                }
                out
            }
        };
        Ok(Rest {
            raw_state,
            state,
            input_ids,
            noise,
        })
    }

    /// Turn the model's normalized chunk into physical actions.
    pub fn decode(
        &self,
        prepared: &Prepared,
        chunk: &ActionChunk,
        with_normalized: bool,
    ) -> Result<DecodedActions, ChunkShapeError> {
        let p = &self.processor;
        if chunk.horizon < p.action_horizon
            || chunk.dim < p.action_width()
            || chunk.data.len() != chunk.horizon * chunk.dim
        {
            return Err(ChunkShapeError {
                horizon: chunk.horizon,
                dim: chunk.dim,
                values: chunk.data.len(),
                need_horizon: p.action_horizon,
                need_dim: p.action_width(),
            });
        }
        let actions = p.decode_actions(&chunk.data, chunk.dim, &prepared.raw_state);
        let normalized = with_normalized.then(|| p.split_normalized(&chunk.data, chunk.dim));
        Ok(DecodedActions {
            actions,
            normalized,
        })
    }
}
/// The model's action chunk does not have the shape the processor decodes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "model returned a [{horizon}, {dim}] chunk ({values} values); need at least [{need_horizon}, {need_dim}]"
)]
pub struct ChunkShapeError {
    /// Rows of the model's chunk.
    pub horizon: usize,
    /// Columns of the model's chunk.
    pub dim: usize,
    /// Values in the chunk's data.
    pub values: usize,
    /// Rows the processor decodes (`action_horizon`).
    pub need_horizon: usize,
    /// Columns the processor decodes (its action groups' total width).
    pub need_dim: usize,
}
