//! One embodiment's processing, resolved from the checkpoint's `processor_config.json`
//! (`Gr00tN1d7Processor` kwargs and its per-embodiment `ModalityConfig`s), `statistics.json`
//! and `embodiment_id.json` (tag -> projector index).
//!
//! Everything the reference decides per call from these files (which statistics a group uses,
//! whether it is clipped, which state a relative action group is composed onto) is decided
//! here once, so the per-request code only does arithmetic. Every problem is a
//! [`ConfigError`] naming the file and the field (`config_load.rs` reads the files).

use std::path::{Path, PathBuf};

/// Why the processor files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read, or is not valid JSON for what was expected.
    #[error(transparent)]
    File(#[from] crate::json_file::JsonFileError),
    /// The file parsed but one field cannot be used.
    #[error("`{path}`: `{field}`: {message}")]
    Field {
        /// The file at fault.
        path: PathBuf,
        /// Dotted path of the field inside the file, e.g.
        /// `processor_kwargs.modality_configs.<tag>.action.action_configs[0].format`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// Reads and parses one JSON file.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    Ok(crate::json_file::read_json(path)?)
}

/// How an action group relates to the state (`ActionRepresentation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionRep {
    /// Relative to the last state row (composed back onto it when decoding).
    Relative,
    /// Step-to-step deltas: only un-normalised, as the reference does.
    Delta,
    /// Absolute targets.
    Absolute,
}

/// `ActionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionKind {
    /// An end-effector pose (translation + rotation).
    Eef,
    /// Joint values.
    NonEef,
}

/// `ActionFormat`: the layout of an end-effector row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionFormat {
    /// Joint values, or a flattened 4x4 homogeneous matrix for an end effector.
    Default,
    /// xyz + the first two rows of the rotation matrix (9 values).
    XyzRot6d,
    /// xyz + rotation vector (6 values).
    XyzRotvec,
}

/// How one state group is encoded: N1.6's encodings, unchanged in N1.7.
pub use crate::processor::StateEncoding;

/// One state group, in modality order.
#[derive(Clone, Debug)]
pub struct StateGroup {
    /// The `state` modality key, e.g. `eef_9d`.
    pub name: String,
    /// Raw width (before a sin/cos encoding doubles it).
    pub dim: usize,
    /// Its encoding.
    pub encoding: StateEncoding,
}

impl StateGroup {
    /// Width of the encoded group.
    pub fn encoded_dim(&self) -> usize {
        if self.encoding == StateEncoding::SinCos {
            2 * self.dim
        } else {
            self.dim
        }
    }
}

/// How an action group is un-normalised; the bounds have one row (all steps) or one per step.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionNorm {
    /// Clip to [-1, 1], then `(y + 1) / 2 (hi - lo) + lo`.
    MinMax {
        /// Low bounds, `[1 or horizon][dim]`.
        lo: Vec<Vec<f64>>,
        /// High bounds, same shape.
        hi: Vec<Vec<f64>>,
    },
    /// `y std + mean` (components with `std == 0` pass through), not clipped.
    MeanStd {
        /// Means, `[1 or horizon][dim]`.
        mean: Vec<Vec<f64>>,
        /// Standard deviations, same shape.
        std: Vec<Vec<f64>>,
    },
}

/// A relative action group's composition onto the state.
#[derive(Clone, Debug, PartialEq)]
pub struct Relative {
    /// The state group whose last row is the reference.
    pub state_key: String,
    /// End effector (pose composition) or joints (addition).
    pub kind: ActionKind,
    /// Row layout of the end-effector action and state.
    pub format: ActionFormat,
}

/// One action group, in modality order.
#[derive(Clone, Debug)]
pub struct ActionGroup {
    /// The `action` modality key.
    pub name: String,
    /// Columns of the group in the model's chunk (and width of the decoded action).
    pub dim: usize,
    /// Its un-normalisation.
    pub norm: ActionNorm,
    /// `Some` when the group is relative and `use_relative_action` is on.
    pub relative: Option<Relative>,
}

/// The eval image transform's sizes (albumentations chain).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImageTransform {
    /// `SmallestMaxSize` target: `shortest_image_edge`, else `image_target_size[0]`.
    pub max_size: usize,
    /// `FractionalCenterCrop` fraction: `crop_fraction`, else `image_crop_size[0] /
    /// image_target_size[0]`.
    pub crop_fraction: f64,
}

/// The processing of one embodiment.
#[derive(Clone, Debug)]
pub struct EmbodimentConfig {
    /// The embodiment tag (key into all three files).
    pub tag: String,
    /// Projector index of the category-specific layers (`embodiment_id.json`).
    pub embodiment_id: usize,
    /// Camera keys (`video` modality keys), in order.
    pub cameras: Vec<String>,
    /// Frames per camera (length of the `video` `delta_indices`).
    pub frames_per_camera: usize,
    /// The `language` modality key.
    pub language_key: String,
    /// Whether the instruction is lower-cased and stripped of punctuation.
    pub formalize_language: bool,
    /// The eval image transform.
    pub image: ImageTransform,
    /// State groups in modality order.
    pub state_groups: Vec<StateGroup>,
    /// State rows per request (length of the `state` `delta_indices`).
    pub state_history: usize,
    /// `exclude_state`: the model gets zeros instead of the state.
    pub exclude_state: bool,
    /// Action groups in modality order (their concatenation is the chunk's used columns).
    pub action_groups: Vec<ActionGroup>,
    /// Steps decoded per chunk (length of the `action` `delta_indices`).
    pub action_horizon: usize,
    /// Width the encoded state is zero-padded to.
    pub max_state_dim: usize,
    /// Width of the model's action chunk.
    pub max_action_dim: usize,
    /// Rows of the model's action chunk.
    pub max_action_horizon: usize,
}

impl EmbodimentConfig {
    /// Reads `processor_config.json`, `statistics.json` and `embodiment_id.json` of a
    /// checkpoint directory for embodiment `tag`.
    pub fn load(dir: &Path, tag: &str) -> Result<Self, ConfigError> {
        super::config_load::load(dir, tag)
    }

    /// Width of the encoded state before padding.
    pub fn encoded_state_dim(&self) -> usize {
        self.state_groups.iter().map(StateGroup::encoded_dim).sum()
    }

    /// Columns of the action chunk used by this embodiment.
    pub fn action_width(&self) -> usize {
        self.action_groups.iter().map(|g| g.dim).sum()
    }

    /// Images per request (`cameras x frames_per_camera`).
    pub fn num_images(&self) -> usize {
        self.cameras.len() * self.frames_per_camera
    }
}
