//! The checkpoint's processor files and the state / action transforms they define.
//!
//! - `processor_config.json`: `Gr00tN1d6Processor` kwargs, with per-embodiment modality configs
//!   (camera keys, state and action groups in order, sin/cos and mean/std keys, action
//!   representations) and the global switches (`apply_sincos_state_encoding`,
//!   `use_relative_action`, `use_percentiles`, `clip_outliers`, `max_state_dim`, ...);
//! - `statistics.json`: `{embodiment: {"state" | "action" | "relative_action": {group: stats}}}`,
//!   1-D `[D]` lists for state/action, per-step `[T][D]` for relative actions;
//! - `embodiment_id.json`: `{tag: slot}`.
//!
//! [`Processor::encode_state`] mirrors `StateActionProcessor.apply_state` + the zero pad;
//! [`Processor::decode_actions`] mirrors `Gr00tN1d6Processor.decode_action` +
//! `StateActionProcessor.unapply_action` (float64 arithmetic, cast to float32 at the end, as
//! the reference does with numpy).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::preprocess::ImageChainConfig;

// Re-exported where N1.7 and this module name them; `ProcessorKwargs`, named only by tests,
// is reached as `processor::kwargs::ProcessorKwargs`.
pub(crate) mod kwargs;

pub(crate) use kwargs::{
    ActionConfig, KwargsDefaults, N16Processor, ProcessorClass, ProcessorFile,
};

/// Why the processor files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    /// The file cannot be read, or is not valid JSON for what was expected.
    #[error(transparent)]
    File(#[from] crate::json_file::JsonFileError),
    /// The files parsed but their content cannot be used (missing keys, mismatched lengths,
    /// widths beyond the model's).
    #[error("`{path}`: {message}")]
    Invalid {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ProcessorError> {
    Ok(crate::json_file::read_json(path)?)
}

#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Arr {
    One(Vec<f64>),
    Two(Vec<Vec<f64>>),
}

#[derive(Deserialize, Clone, Default)]
struct Stats {
    min: Option<Arr>,
    max: Option<Arr>,
    mean: Option<Arr>,
    std: Option<Arr>,
    q01: Option<Arr>,
    q99: Option<Arr>,
}

type StatsFile = BTreeMap<String, BTreeMap<String, BTreeMap<String, Stats>>>;

/// How one state group is encoded.
#[derive(Clone, Debug, PartialEq)]
pub enum StateEncoding {
    /// `[sin(x_1..x_D), cos(x_1..x_D)]`: the width doubles.
    SinCos,
    /// `(x - mean) / std`, components with `std == 0` pass through.
    MeanStd {
        /// Per-component mean.
        mean: Vec<f64>,
        /// Per-component standard deviation.
        std: Vec<f64>,
    },
    /// `2 (x - lo) / (hi - lo) - 1` (0 where `hi ≈ lo`), clipped to [-1, 1] if `clip`.
    MinMax {
        /// Per-component low bound (`min`, or `q01` with `use_percentiles`).
        lo: Vec<f64>,
        /// Per-component high bound (`max`, or `q99` with `use_percentiles`).
        hi: Vec<f64>,
        /// `clip_outliers` of the processor config.
        clip: bool,
    },
}

/// One state group, in modality order.
#[derive(Clone, Debug)]
pub struct StateGroup {
    /// State key (`state` modality key), e.g. `left_arm`.
    pub name: String,
    /// Width of the raw group (before a sin/cos encoding doubles it).
    pub dim: usize,
    /// How the group is normalized.
    pub encoding: StateEncoding,
}

/// How one action group is un-normalised.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionNorm {
    /// Clip to [-1, 1], then `(y + 1) / 2 (hi - lo) + lo`; `[T][D]` (per step) or `[1][D]`.
    MinMax {
        /// Low bounds (`min`, or `q01` with `use_percentiles`), one row per step or a single row.
        lo: Vec<Vec<f64>>,
        /// High bounds (`max`, or `q99` with `use_percentiles`), same shape as `lo`.
        hi: Vec<Vec<f64>>,
    },
    /// `y std + mean`.
    MeanStd {
        /// Per-component mean.
        mean: Vec<f64>,
        /// Per-component standard deviation.
        std: Vec<f64>,
    },
}

/// One action group, in modality order.
#[derive(Clone, Debug)]
pub struct ActionGroup {
    /// Action key (`action` modality key), e.g. `left_arm`.
    pub name: String,
    /// Width of the group in the decoded action.
    pub dim: usize,
    /// How the group is un-normalized.
    pub norm: ActionNorm,
    /// `Some(state group)` for RELATIVE groups: the raw last state is added to every step.
    pub relative_to: Option<String>,
}

/// The processor of one embodiment.
#[derive(Clone, Debug)]
pub struct Processor {
    /// Embodiment tag, the key into `processor_config.json` and `statistics.json`.
    pub embodiment: String,
    /// Slot of the category-specific layers, from `embodiment_id.json`.
    pub embodiment_id: usize,
    /// Sizes of the image chain (`shortest_image_edge`, `crop_fraction`).
    pub image: ImageChainConfig,
    /// Camera keys (`video` modality keys), in order.
    pub cameras: Vec<String>,
    /// The `language` modality key, e.g. `annotation.human.task_description`; `None` when the embodiment has no language modality.
    pub language_key: Option<String>,
    /// Whether the instruction is lower-cased and stripped of punctuation before tokenizing.
    pub formalize_language: bool,
    /// State groups in modality order: the encoded state is their concatenation.
    pub state_groups: Vec<StateGroup>,
    /// Action groups in modality order: their concatenation is the model's action columns.
    pub action_groups: Vec<ActionGroup>,
    /// Steps returned per chunk (length of the action `delta_indices`).
    pub action_horizon: usize,
    /// Width the encoded state is zero-padded to (the model's `max_state_dim`).
    pub max_state_dim: usize,
    /// Padded action width of the model's output (`max_action_dim`).
    pub max_action_dim: usize,
    /// `max_action_horizon` of the processor config, `None` when absent; returned chunks have `action_horizon` steps.
    pub max_action_horizon: Option<usize>,
}

fn one_d(a: &Option<Arr>, what: &str, path: &Path) -> Result<Vec<f64>, ProcessorError> {
    match a {
        Some(Arr::One(v)) => Ok(v.clone()),
        Some(Arr::Two(v)) if v.len() == 1 => Ok(v[0].clone()),
        Some(Arr::Two(_)) => Err(invalid(path, format!("{what} must be a 1-D list"))),
        None => Err(invalid(path, format!("{what} is missing"))),
    }
}

fn two_d(a: &Option<Arr>, what: &str, path: &Path) -> Result<Vec<Vec<f64>>, ProcessorError> {
    match a {
        Some(Arr::One(v)) => Ok(vec![v.clone()]),
        Some(Arr::Two(v)) => Ok(v.clone()),
        None => Err(invalid(path, format!("{what} is missing"))),
    }
}

fn invalid(path: &Path, message: String) -> ProcessorError {
    ProcessorError::Invalid {
        path: path.into(),
        message,
    }
}

impl Processor {
    /// Load the three files from a model directory for `embodiment` (e.g. `gr1`).
    pub fn load(dir: &Path, embodiment: &str) -> Result<Self, ProcessorError> {
        let pc_path = dir.join("processor_config.json");
        let st_path = dir.join("statistics.json");
        let id_path = dir.join("embodiment_id.json");
        let pc: ProcessorFile<ActionConfig, N16Processor> = read_json(&pc_path)?;
        let stats: StatsFile = read_json(&st_path)?;
        let ids: BTreeMap<String, i64> = read_json(&id_path)?;
        let k = pc.processor_kwargs;
        let image = match (k.shortest_image_edge, k.crop_fraction) {
            (Some(shortest_edge), Some(crop_fraction))
                if k.use_albumentations
                    && k.image_crop_size.is_none()
                    && k.image_target_size.is_none() =>
            {
                ImageChainConfig {
                    shortest_edge,
                    crop_fraction,
                }
            }
            _ => {
                return Err(invalid(
                    &pc_path,
                    "only the albumentations eval chain by shortest_image_edge and crop_fraction \
                     (no crop/target size) is supported"
                        .into(),
                ));
            }
        };
        let required = |v: Option<usize>, key: &str| {
            v.ok_or_else(|| invalid(&pc_path, format!("`{key}` is missing or null")))
        };
        let max_state_dim = required(k.max_state_dim, "max_state_dim")?;
        let max_action_dim = required(k.max_action_dim, "max_action_dim")?;
        let mods = k.modality_configs.get(embodiment).ok_or_else(|| {
            invalid(
                &pc_path,
                format!(
                    "no modality config for embodiment `{embodiment}` (has: {})",
                    join_keys(&k.modality_configs)
                ),
            )
        })?;
        let slot = *ids
            .get(embodiment)
            .ok_or_else(|| invalid(&id_path, format!("no slot for embodiment `{embodiment}`")))?;
        let stats = stats.get(embodiment).ok_or_else(|| {
            invalid(
                &st_path,
                format!("no statistics for embodiment `{embodiment}`"),
            )
        })?;
        let get_mod = |name: &str| {
            mods.get(name).ok_or_else(|| {
                invalid(
                    &pc_path,
                    format!("embodiment `{embodiment}` has no `{name}` modality"),
                )
            })
        };
        let video = get_mod("video")?;
        let state = get_mod("state")?;
        let action = get_mod("action")?;
        let language_key = mods
            .get("language")
            .and_then(|l| l.modality_keys.first().cloned());
        if video.delta_indices.len() != 1 || state.delta_indices.len() != 1 {
            return Err(invalid(
                &pc_path,
                "only a single video/state frame (delta_indices [0]) is supported".into(),
            ));
        }
        let empty = BTreeMap::new();
        let state_stats = stats.get("state").unwrap_or(&empty);
        let action_stats = stats.get("action").unwrap_or(&empty);
        let rel_stats = stats.get("relative_action").unwrap_or(&empty);
        let sincos: Vec<String> = state.sin_cos_embedding_keys.clone().unwrap_or_default();
        let meanstd: Vec<String> = state.mean_std_embedding_keys.clone().unwrap_or_default();
        let mut state_groups = Vec::new();
        for g in &state.modality_keys {
            let s = state_stats.get(g).ok_or_else(|| {
                invalid(
                    &st_path,
                    format!("no state statistics for `{embodiment}.{g}`"),
                )
            })?;
            let what = |f: &str| format!("state statistics `{embodiment}.{g}.{f}`");
            let (lo_key, hi_key) = if k.use_percentiles {
                ("q01", "q99")
            } else {
                ("min", "max")
            };
            let lo = one_d(
                if k.use_percentiles { &s.q01 } else { &s.min },
                &what(lo_key),
                &st_path,
            )?;
            let dim = lo.len();
            let encoding = if k.apply_sincos_state_encoding && sincos.contains(g) {
                StateEncoding::SinCos
            } else if meanstd.contains(g) {
                StateEncoding::MeanStd {
                    mean: one_d(&s.mean, &what("mean"), &st_path)?,
                    std: one_d(&s.std, &what("std"), &st_path)?,
                }
            } else {
                let hi = one_d(
                    if k.use_percentiles { &s.q99 } else { &s.max },
                    &what(hi_key),
                    &st_path,
                )?;
                StateEncoding::MinMax {
                    lo: lo.clone(),
                    hi,
                    clip: k.clip_outliers,
                }
            };
            if let StateEncoding::MeanStd { mean: a, std: b }
            | StateEncoding::MinMax { lo: a, hi: b, .. } = &encoding
                && (a.len() != dim || b.len() != dim)
            {
                return Err(invalid(
                    &st_path,
                    format!("state statistics of `{embodiment}.{g}` have mismatched lengths"),
                ));
            }
            state_groups.push(StateGroup {
                name: g.clone(),
                dim,
                encoding,
            });
        }
        let configs = action.action_configs.as_deref().unwrap_or(&[]);
        if !configs.is_empty() && configs.len() != action.modality_keys.len() {
            return Err(invalid(
                &pc_path,
                format!(
                    "`{embodiment}` has {} action_configs for {} action groups",
                    configs.len(),
                    action.modality_keys.len()
                ),
            ));
        }
        let action_meanstd: Vec<String> =
            action.mean_std_embedding_keys.clone().unwrap_or_default();
        let horizon = action.delta_indices.len();
        let mut action_groups = Vec::new();
        for (i, g) in action.modality_keys.iter().enumerate() {
            let cfg = configs.get(i);
            let relative = match cfg.map(|c| c.rep.as_str()) {
                None | Some("ABSOLUTE") => false,
                Some("RELATIVE") => true,
                Some(other) => {
                    return Err(invalid(
                        &pc_path,
                        format!("action `{g}`: unsupported rep `{other}`"),
                    ));
                }
            };
            if let Some(kind) = cfg.and_then(|c| c.kind.as_deref())
                && relative
                && kind != "NON_EEF"
            {
                return Err(invalid(
                    &pc_path,
                    format!("action `{g}`: relative `{kind}` actions are not supported"),
                ));
            }
            let abs = action_stats.get(g).ok_or_else(|| {
                invalid(
                    &st_path,
                    format!("no action statistics for `{embodiment}.{g}`"),
                )
            })?;
            let dim = one_d(
                &abs.min,
                &format!("action statistics `{embodiment}.{g}.min`"),
                &st_path,
            )?
            .len();
            let use_rel = relative && k.use_relative_action;
            let norm = if use_rel {
                let r = rel_stats.get(g).ok_or_else(|| {
                    invalid(
                        &st_path,
                        format!("no relative_action statistics for `{embodiment}.{g}`"),
                    )
                })?;
                let lo = two_d(&r.min, &format!("relative_action `{g}.min`"), &st_path)?;
                let hi = two_d(&r.max, &format!("relative_action `{g}.max`"), &st_path)?;
                ActionNorm::MinMax { lo, hi }
            } else if action_meanstd.contains(g) {
                ActionNorm::MeanStd {
                    mean: one_d(&abs.mean, &format!("action `{g}.mean`"), &st_path)?,
                    std: one_d(&abs.std, &format!("action `{g}.std`"), &st_path)?,
                }
            } else {
                let (lo, hi) = if k.use_percentiles {
                    (&abs.q01, &abs.q99)
                } else {
                    (&abs.min, &abs.max)
                };
                ActionNorm::MinMax {
                    lo: vec![one_d(lo, &format!("action `{g}` low"), &st_path)?],
                    hi: vec![one_d(hi, &format!("action `{g}` high"), &st_path)?],
                }
            };
            match &norm {
                ActionNorm::MinMax { lo, hi } => {
                    let rows_ok = |v: &Vec<Vec<f64>>| {
                        (v.len() == 1 || v.len() >= horizon) && v.iter().all(|r| r.len() == dim)
                    };
                    if !rows_ok(lo) || !rows_ok(hi) {
                        return Err(invalid(
                            &st_path,
                            format!(
                                "action statistics of `{embodiment}.{g}` do not match [{horizon}][{dim}]"
                            ),
                        ));
                    }
                }
                ActionNorm::MeanStd { mean, std } => {
                    if mean.len() != dim || std.len() != dim {
                        return Err(invalid(
                            &st_path,
                            format!("action statistics of `{embodiment}.{g}` do not match [{dim}]"),
                        ));
                    }
                }
            }
            let relative_to = if use_rel {
                let key = cfg
                    .and_then(|c| c.state_key.clone())
                    .unwrap_or_else(|| g.clone());
                let sg = state_groups.iter().find(|s| s.name == key).ok_or_else(|| {
                    invalid(
                        &pc_path,
                        format!("relative action `{g}` refers to unknown state group `{key}`"),
                    )
                })?;
                if sg.dim != dim {
                    return Err(invalid(
                        &pc_path,
                        format!(
                            "relative action `{g}` has {dim} dims, state `{key}` has {}",
                            sg.dim
                        ),
                    ));
                }
                Some(key)
            } else {
                None
            };
            action_groups.push(ActionGroup {
                name: g.clone(),
                dim,
                norm,
                relative_to,
            });
        }
        let me = Self {
            embodiment: embodiment.into(),
            embodiment_id: usize::try_from(slot)
                .map_err(|_| invalid(&id_path, format!("negative slot {slot}")))?,
            image,
            cameras: video.modality_keys.clone(),
            language_key,
            formalize_language: k.formalize_language,
            state_groups,
            action_groups,
            action_horizon: horizon,
            max_state_dim,
            max_action_dim,
            max_action_horizon: k.max_action_horizon,
        };
        if me.encoded_state_dim() > me.max_state_dim {
            return Err(invalid(
                &pc_path,
                format!(
                    "encoded state has {} values > max_state_dim {}",
                    me.encoded_state_dim(),
                    me.max_state_dim
                ),
            ));
        }
        if me.action_width() > me.max_action_dim {
            return Err(invalid(
                &pc_path,
                format!(
                    "actions have {} columns > max_action_dim {}",
                    me.action_width(),
                    me.max_action_dim
                ),
            ));
        }
        Ok(me)
    }

    /// Width of the encoded state before padding.
    pub fn encoded_state_dim(&self) -> usize {
        self.state_groups
            .iter()
            .map(|g| {
                if g.encoding == StateEncoding::SinCos {
                    2 * g.dim
                } else {
                    g.dim
                }
            })
            .sum()
    }

    /// Total action columns used by this embodiment.
    pub fn action_width(&self) -> usize {
        self.action_groups.iter().map(|g| g.dim).sum()
    }

    /// Encode the raw state (one `[D]` f32 vector per group, modality order) and zero-pad to
    /// `max_state_dim`. The caller has validated the group set and lengths.
    pub fn encode_state(&self, raw: &BTreeMap<String, Vec<f32>>) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.max_state_dim);
        for g in &self.state_groups {
            let x = &raw[&g.name];
            match &g.encoding {
                StateEncoding::SinCos => {
                    out.extend(x.iter().map(|&v| (v as f64).sin() as f32));
                    out.extend(x.iter().map(|&v| (v as f64).cos() as f32));
                }
                StateEncoding::MeanStd { mean, std } => {
                    out.extend(x.iter().enumerate().map(|(i, &v)| {
                        if std[i] == 0.0 {
                            v
                        } else {
                            ((v as f64 - mean[i]) / std[i]) as f32
                        }
                    }));
                }
                StateEncoding::MinMax { lo, hi, clip } => {
                    out.extend(x.iter().enumerate().map(|(i, &v)| {
                        let range = hi[i] - lo[i];
                        // numpy.isclose(max, min): |a - b| <= 1e-8 + 1e-5 |b|
                        if range.abs() <= 1e-8 + 1e-5 * lo[i].abs() {
                            return 0.0;
                        }
                        let y = 2.0 * (v as f64 - lo[i]) / range - 1.0;
                        (if *clip { y.clamp(-1.0, 1.0) } else { y }) as f32
                    }));
                }
            }
        }
        out.resize(self.max_state_dim, 0.0);
        out
    }

    /// Slice the normalized chunk `[horizon_total, dim_total]` to `[action_horizon, group dims]`
    /// per group (modality order). Returns the normalized per-group arrays.
    pub fn split_normalized(
        &self,
        chunk: &[f32],
        chunk_dim: usize,
    ) -> Vec<(String, Vec<Vec<f32>>)> {
        let mut col = 0;
        let mut out = Vec::new();
        for g in &self.action_groups {
            let rows = (0..self.action_horizon)
                .map(|t| chunk[t * chunk_dim + col..t * chunk_dim + col + g.dim].to_vec())
                .collect();
            out.push((g.name.clone(), rows));
            col += g.dim;
        }
        out
    }

    /// Physical actions per group (modality order), `[action_horizon][dim]` each.
    pub fn decode_actions(
        &self,
        chunk: &[f32],
        chunk_dim: usize,
        raw_state: &BTreeMap<String, Vec<f32>>,
    ) -> Vec<(String, Vec<Vec<f32>>)> {
        let normalized = self.split_normalized(chunk, chunk_dim);
        self.action_groups
            .iter()
            .zip(normalized)
            .map(|(g, (name, rows))| {
                let offset = g.relative_to.as_ref().map(|k| &raw_state[k]);
                let phys = rows
                    .iter()
                    .enumerate()
                    .map(|(t, row)| {
                        row.iter()
                            .enumerate()
                            .map(|(d, &y)| {
                                let y = y as f64;
                                let mut v = match &g.norm {
                                    ActionNorm::MinMax { lo, hi } => {
                                        let r = if lo.len() == 1 { 0 } else { t };
                                        let (l, h) = (lo[r][d], hi[r.min(hi.len() - 1)][d]);
                                        (y.clamp(-1.0, 1.0) + 1.0) / 2.0 * (h - l) + l
                                    }
                                    ActionNorm::MeanStd { mean, std } => y * std[d] + mean[d],
                                };
                                if let Some(s) = offset {
                                    v += s[d] as f64;
                                }
                                v as f32
                            })
                            .collect()
                    })
                    .collect();
                (name, phys)
            })
            .collect()
    }
}

fn join_keys<V>(m: &BTreeMap<String, V>) -> String {
    m.keys().cloned().collect::<Vec<_>>().join(", ")
}
