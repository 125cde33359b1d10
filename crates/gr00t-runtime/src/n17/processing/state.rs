//! The model's state input: `StateActionProcessor.apply_state` per row, the groups
//! concatenated in modality order and zero-padded to `max_state_dim`, one row per state
//! timestep (`[state_history, max_state_dim]`).
//!
//! Float handling follows numpy: the raw state is float32, the statistics float64, and the
//! normalised values are written into a float32 array (`np.zeros_like(values)`) before
//! `2 * x - 1` and the clip run in float32.

use std::collections::BTreeMap;

use super::config::{EmbodimentConfig, StateEncoding};
use super::observation::check_state;
use crate::request::InputError;

/// `normalize_values_minmax` of one value (then the optional clip).
fn min_max(v: f32, lo: f64, hi: f64, clip: bool) -> f32 {
    // `~np.isclose(max, min)` decides which components are normalised; the others stay 0.
    if (hi - lo).abs() <= 1e-8 + 1e-5 * lo.abs() {
        return 0.0;
    }
    let unit = ((v as f64 - lo) / (hi - lo)) as f32;
    let y = 2.0f32 * unit - 1.0f32;
    if clip { y.clamp(-1.0, 1.0) } else { y }
}

/// `normalize_values_meanstd` of one value.
fn mean_std(v: f32, mean: f64, std: f64) -> f32 {
    if std == 0.0 {
        v
    } else {
        ((v as f64 - mean) / std) as f32
    }
}

/// Encodes one state row of every group into `out` (`encoded_state_dim` values).
fn encode_row(
    cfg: &EmbodimentConfig,
    state: &BTreeMap<String, Vec<Vec<f32>>>,
    t: usize,
    out: &mut Vec<f32>,
) {
    for g in &cfg.state_groups {
        let x = &state[&g.name][t];
        match &g.encoding {
            StateEncoding::SinCos => {
                out.extend(x.iter().map(|&v| (v as f64).sin() as f32));
                out.extend(x.iter().map(|&v| (v as f64).cos() as f32));
            }
            StateEncoding::MeanStd { mean, std } => {
                out.extend(
                    x.iter()
                        .enumerate()
                        .map(|(i, &v)| mean_std(v, mean[i], std[i])),
                );
            }
            StateEncoding::MinMax { lo, hi, clip } => {
                out.extend(
                    x.iter()
                        .enumerate()
                        .map(|(i, &v)| min_max(v, lo[i], hi[i], *clip)),
                );
            }
        }
    }
}

/// The normalised, padded state `[state_history * max_state_dim]` (row-major) from the raw
/// rows of every state group. With `exclude_state` the rows are zeros.
pub fn encode_state(
    cfg: &EmbodimentConfig,
    state: &BTreeMap<String, Vec<Vec<f32>>>,
) -> Result<Vec<f32>, InputError> {
    check_state(cfg, state)?;
    let mut out = Vec::with_capacity(cfg.state_history * cfg.max_state_dim);
    for t in 0..cfg.state_history {
        let start = out.len();
        if !cfg.exclude_state {
            encode_row(cfg, state, t, &mut out);
        }
        out.resize(start + cfg.max_state_dim, 0.0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_max_matches_numpy_float_steps() {
        // Mid-range, clipped above and below, and a degenerate range.
        assert_eq!(min_max(0.5, 0.0, 1.0, true), 0.0);
        assert_eq!(min_max(3.5, -1.0, 1.0, true), 1.0);
        assert_eq!(min_max(3.5, -1.0, 1.0, false), 3.5);
        assert_eq!(min_max(5.0, 1.0, 3.0, false), 3.0);
        assert_eq!(min_max(-7.0, -1.0, 1.0, true), -1.0);
        assert_eq!(min_max(0.3, 2.0, 2.0 + 1e-9, true), 0.0);
        assert_eq!(mean_std(1.5, 0.5, 0.0), 1.5);
        assert_eq!(mean_std(1.5, 0.5, 2.0), 0.5);
    }
}
