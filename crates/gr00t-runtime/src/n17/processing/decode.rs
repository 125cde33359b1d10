//! From the model's normalised chunk `[max_action_horizon, max_action_dim]` back to actions
//! in the embodiment's units (`Gr00tN1d7Processor.decode_action` +
//! `StateActionProcessor.unapply_action`):
//!
//! 1. per group, in modality order: rows `0..action_horizon`, the group's columns;
//! 2. un-normalise: min/max groups clip to [-1, 1] first (`(y + 1) / 2 (hi - lo) + lo`, the
//!    `(y + 1) / 2` in float32 like numpy on the float32 chunk, the rest in float64); mean/std
//!    groups are `y std + mean` stored as float32 (numpy writes into `zeros_like(y)`);
//! 3. relative groups onto the LAST raw state row: joints by addition, end-effector poses by
//!    `T_abs = T_ref @ T_rel` ([`super::pose`]);
//! 4. cast to float32.

use std::collections::BTreeMap;

use super::config::{ActionFormat, ActionGroup, ActionKind, ActionNorm, EmbodimentConfig};
use super::observation::check_state;
use super::pose::Pose;
use crate::request::InputError;

/// One decoded (or normalised) action group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupActions {
    /// The action key.
    pub name: String,
    /// Steps (`action_horizon`).
    pub horizon: usize,
    /// Values per step.
    pub dim: usize,
    /// `[horizon, dim]` row-major.
    pub values: Vec<f32>,
}

/// The chunk does not have the model's shape.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("action chunk has {len} values, expected [{rows}, {cols}] = {}", rows * cols)]
pub struct ChunkShapeError {
    /// Values given.
    pub len: usize,
    /// Expected rows (`max_action_horizon`).
    pub rows: usize,
    /// Expected columns (`max_action_dim`).
    pub cols: usize,
}

/// Why a chunk could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The chunk's size is wrong (a caller bug, not a client error).
    #[error(transparent)]
    Chunk(#[from] ChunkShapeError),
    /// The raw state needed by relative groups is missing or mis-shaped.
    #[error(transparent)]
    State(#[from] InputError),
}

/// Step 1: the normalised values of each group (`decode.normalized.*` of the golden).
pub fn split_normalized(
    cfg: &EmbodimentConfig,
    chunk: &[f32],
) -> Result<Vec<GroupActions>, ChunkShapeError> {
    let (rows, cols) = (cfg.max_action_horizon, cfg.max_action_dim);
    if chunk.len() != rows * cols {
        return Err(ChunkShapeError {
            len: chunk.len(),
            rows,
            cols,
        });
    }
    let mut col = 0;
    let mut out = Vec::with_capacity(cfg.action_groups.len());
    for g in &cfg.action_groups {
        let mut values = Vec::with_capacity(cfg.action_horizon * g.dim);
        for t in 0..cfg.action_horizon {
            values.extend_from_slice(&chunk[t * cols + col..t * cols + col + g.dim]);
        }
        out.push(GroupActions {
            name: g.name.clone(),
            horizon: cfg.action_horizon,
            dim: g.dim,
            values,
        });
        col += g.dim;
    }
    Ok(out)
}

/// Row `t` of per-step statistics (a single row applies to every step).
fn stat_row(rows: &[Vec<f64>], t: usize) -> &[f64] {
    &rows[if rows.len() == 1 { 0 } else { t }]
}

/// Step 2 for one group: `[horizon][dim]` float64.
fn unnormalize(g: &ActionGroup, n: &GroupActions) -> Vec<Vec<f64>> {
    (0..n.horizon)
        .map(|t| {
            let y = &n.values[t * n.dim..(t + 1) * n.dim];
            match &g.norm {
                ActionNorm::MinMax { lo, hi } => {
                    let (lo, hi) = (stat_row(lo, t), stat_row(hi, t));
                    (0..n.dim)
                        .map(|d| {
                            let unit = (y[d].clamp(-1.0, 1.0) + 1.0f32) / 2.0f32;
                            unit as f64 * (hi[d] - lo[d]) + lo[d]
                        })
                        .collect()
                }
                ActionNorm::MeanStd { mean, std } => {
                    let (mean, std) = (stat_row(mean, t), stat_row(std, t));
                    (0..n.dim)
                        .map(|d| {
                            if std[d] == 0.0 {
                                y[d] as f64
                            } else {
                                (y[d] as f64 * std[d] + mean[d]) as f32 as f64
                            }
                        })
                        .collect()
                }
            }
        })
        .collect()
}

/// Actions in the embodiment's units, per group in modality order, `[action_horizon, dim]`
/// each. `state` is the request's raw state (its last row is the reference of relative
/// groups).
pub fn decode_actions(
    cfg: &EmbodimentConfig,
    chunk: &[f32],
    state: &BTreeMap<String, Vec<Vec<f32>>>,
) -> Result<Vec<GroupActions>, DecodeError> {
    let normalized = split_normalized(cfg, chunk)?;
    if cfg.action_groups.iter().any(|g| g.relative.is_some()) {
        check_state(cfg, state)?;
    }
    let mut out = Vec::with_capacity(normalized.len());
    for (g, n) in cfg.action_groups.iter().zip(&normalized) {
        let mut rows = unnormalize(g, n);
        if let Some(rel) = &g.relative {
            let last = state[&rel.state_key]
                .last()
                .expect("check_state guarantees state_history >= 1 rows");
            let reference: Vec<f64> = last.iter().map(|&v| v as f64).collect();
            for row in &mut rows {
                match (rel.kind, rel.format) {
                    (ActionKind::NonEef, _) => {
                        for (v, r) in row.iter_mut().zip(&reference) {
                            *v += r;
                        }
                    }
                    (ActionKind::Eef, ActionFormat::XyzRot6d) => {
                        let abs =
                            Pose::from_xyz_rot6d(&reference).compose(&Pose::from_xyz_rot6d(row));
                        row.copy_from_slice(&abs.to_xyz_rot6d());
                    }
                    (ActionKind::Eef, ActionFormat::XyzRotvec) => {
                        let abs =
                            Pose::from_xyz_rotvec(&reference).compose(&Pose::from_xyz_rotvec(row));
                        row.copy_from_slice(&abs.to_xyz_rotvec());
                    }
                    (ActionKind::Eef, ActionFormat::Default) => {
                        unreachable!("EmbodimentConfig::load rejects relative EEF in DEFAULT")
                    }
                }
            }
        }
        out.push(GroupActions {
            name: g.name.clone(),
            horizon: n.horizon,
            dim: n.dim,
            values: rows.iter().flatten().map(|&v| v as f32).collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::n17::processing::config::{ImageTransform, Relative, StateEncoding, StateGroup};
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4};

    /// One relative EEF group in xyz + rotvec with identity un-normalisation (bounds -1, 1).
    fn rotvec_config() -> EmbodimentConfig {
        EmbodimentConfig {
            tag: "hand".into(),
            embodiment_id: 0,
            cameras: vec![],
            frames_per_camera: 1,
            language_key: "lang".into(),
            formalize_language: true,
            image: ImageTransform {
                max_size: 256,
                crop_fraction: 1.0,
            },
            state_groups: vec![StateGroup {
                name: "eef".into(),
                dim: 6,
                encoding: StateEncoding::SinCos,
            }],
            state_history: 2,
            exclude_state: false,
            action_groups: vec![ActionGroup {
                name: "eef".into(),
                dim: 6,
                norm: ActionNorm::MinMax {
                    lo: vec![vec![-1.0; 6]],
                    hi: vec![vec![1.0; 6]],
                },
                relative: Some(Relative {
                    state_key: "eef".into(),
                    kind: ActionKind::Eef,
                    format: ActionFormat::XyzRotvec,
                }),
            }],
            action_horizon: 1,
            max_state_dim: 8,
            max_action_dim: 8,
            max_action_horizon: 2,
        }
    }

    #[test]
    fn relative_rotvec_is_composed_onto_the_last_state_row() {
        let cfg = rotvec_config();
        let old = vec![9.0f32, 9.0, 9.0, 0.0, 0.0, 0.0];
        let last = vec![1.0f32, 2.0, 3.0, 0.0, 0.0, FRAC_PI_2 as f32];
        let state = BTreeMap::from([("eef".to_string(), vec![old, last])]);
        let mut chunk = vec![0f32; 16];
        chunk[..6].copy_from_slice(&[1.0, 0.0, 0.0, 0.0, 0.0, FRAC_PI_4 as f32]);
        // Row 1 lies beyond the embodiment's horizon and is ignored.
        chunk[8..].fill(5.0);
        let out = decode_actions(&cfg, &chunk, &state).unwrap();
        let want = [1.0, 3.0, 3.0, 0.0, 0.0, 3.0 * FRAC_PI_4];
        assert_eq!((out[0].horizon, out[0].dim), (1, 6));
        for (g, w) in out[0].values.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-6, "{:?}", out[0].values);
        }
    }
}
