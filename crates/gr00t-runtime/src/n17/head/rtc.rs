//! Real-time chunking (RTC): continue the previous action chunk instead of starting from pure
//! noise, as `Gr00tN1d7ActionHead.get_action_with_features` does when the request carries an
//! `action` and `rtc_*` options.
//!
//! With horizon `h`, overlap `o`, frozen `f` and ramp rate `r`:
//! - the first `o` rows of x0 are the previous chunk's rows `h-o .. h` (in-painting), the rest is
//!   the noise;
//! - every Euler step adds `dt · v · m[row]` where `m` is 0 for rows `< f` (already being
//!   executed while this chunk is computed), `ramp(t) = (1 - e^(-r t)) / (1 - e^(-r))` at
//!   `t = linspace(0, 1, o - f + 2)[1..-1]` for rows `f .. o`, and 1 after.
//!
//! Differences from the reference, all on inputs it does not guard: it normalises the ramp by
//! `max(1 - e^(-r), 1e-8)`, which for `r == 0` freezes the ramp rows (mask 0) and for `r < 0`
//! gives masks of order 1e8; it slices with Python semantics, so `o > h` or `f > o` silently
//! pick other rows or fail deep inside torch. Here such requests are refused by
//! [`Rtc::validate`] with the field named, so a server can answer 400.

/// The ramp rate LeRobot's N1.7 port uses by default (`rtc_ramp_rate` 6.0); the reference
/// itself has no default and requires the option, so a server may offer this one.
pub const DEFAULT_RAMP_RATE: f32 = 6.0;

/// RTC options of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Rtc {
    /// The previous chunk in normalised model space, `[model horizon, max_action_dim]` row-major
    /// (the padded `[40, 132]` the head returned last time).
    pub previous_chunk: Vec<f32>,
    /// Decoded horizon `h` of the embodiment (rows of `previous_chunk` that are real actions);
    /// the overlap is taken from its end. A server defaults it to the embodiment's horizon.
    pub action_horizon: usize,
    /// Rows `o` of the new chunk that overlap the end of the previous one.
    pub overlap_steps: usize,
    /// Rows `f <= o` whose velocity is masked to 0 (the inference latency, in steps).
    pub frozen_steps: usize,
    /// Steepness `r > 0` of the exponential ramp over rows `f .. o`.
    pub ramp_rate: f32,
}

/// Why RTC options were refused; [`RtcError::field`] names the offending field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RtcError {
    /// `previous_chunk` does not have `[horizon, dim]` values.
    #[error("previous_chunk: {got} values, expected {rows}x{cols} = {}", rows * cols)]
    PreviousChunkShape {
        /// Values given.
        got: usize,
        /// Model horizon.
        rows: usize,
        /// `max_action_dim`.
        cols: usize,
    },
    /// `previous_chunk` holds a NaN or an infinity.
    #[error("previous_chunk: value {index} is not finite")]
    PreviousChunkNotFinite {
        /// Flat index of the first bad value.
        index: usize,
    },
    /// `action_horizon` is 0 or beyond the model's horizon.
    #[error("action_horizon: {got} is outside 1..={max}")]
    ActionHorizon {
        /// The value given.
        got: usize,
        /// The model's horizon.
        max: usize,
    },
    /// `overlap_steps > action_horizon`.
    #[error("overlap_steps: {overlap} exceeds action_horizon {horizon}")]
    Overlap {
        /// The value given.
        overlap: usize,
        /// The horizon it must not exceed.
        horizon: usize,
    },
    /// `frozen_steps > overlap_steps`.
    #[error("frozen_steps: {frozen} exceeds overlap_steps {overlap}")]
    Frozen {
        /// The value given.
        frozen: usize,
        /// The overlap it must not exceed.
        overlap: usize,
    },
    /// `ramp_rate` is not a finite number > 0.
    #[error("ramp_rate: {0} is not a finite number > 0")]
    RampRate(f32),
}

impl RtcError {
    /// The request field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            Self::PreviousChunkShape { .. } | Self::PreviousChunkNotFinite { .. } => {
                "previous_chunk"
            }
            Self::ActionHorizon { .. } => "action_horizon",
            Self::Overlap { .. } => "overlap_steps",
            Self::Frozen { .. } => "frozen_steps",
            Self::RampRate(_) => "ramp_rate",
        }
    }
}

impl Rtc {
    /// Checks the options against a model of `horizon` rows of `dim` values; pure.
    pub fn validate(&self, horizon: usize, dim: usize) -> Result<(), RtcError> {
        if self.previous_chunk.len() != horizon * dim {
            return Err(RtcError::PreviousChunkShape {
                got: self.previous_chunk.len(),
                rows: horizon,
                cols: dim,
            });
        }
        if let Some(index) = self.previous_chunk.iter().position(|v| !v.is_finite()) {
            return Err(RtcError::PreviousChunkNotFinite { index });
        }
        if self.action_horizon == 0 || self.action_horizon > horizon {
            return Err(RtcError::ActionHorizon {
                got: self.action_horizon,
                max: horizon,
            });
        }
        if self.overlap_steps > self.action_horizon {
            return Err(RtcError::Overlap {
                overlap: self.overlap_steps,
                horizon: self.action_horizon,
            });
        }
        if self.frozen_steps > self.overlap_steps {
            return Err(RtcError::Frozen {
                frozen: self.frozen_steps,
                overlap: self.overlap_steps,
            });
        }
        if !(self.ramp_rate.is_finite() && self.ramp_rate > 0.0) {
            return Err(RtcError::RampRate(self.ramp_rate));
        }
        Ok(())
    }

    /// The per-row velocity strength for a model of `horizon` rows (call after
    /// [`Rtc::validate`]). Rounded like the f32 reference: `t` from an f32 linspace,
    /// `1 - exp(-r·t)` in f32, divided by the last ramp value.
    pub fn velocity_mask(&self, horizon: usize) -> Vec<f32> {
        let (f, o) = (self.frozen_steps, self.overlap_steps);
        let mut m = vec![1.0f32; horizon];
        m[..f].fill(0.0);
        let n = o - f + 2;
        let ramp = |t: f32| 1.0 - ((-self.ramp_rate * t) as f64).exp() as f32;
        let last = ramp(1.0).max(1e-8);
        for (j, row) in m[f..o].iter_mut().enumerate() {
            *row = ramp(linspace01(n, j + 1)) / last;
        }
        m
    }

    /// x0: `noise` with its first `overlap_steps` rows replaced by rows
    /// `action_horizon - overlap_steps .. action_horizon` of the previous chunk.
    pub fn initial_actions(&self, noise: &[f32], dim: usize) -> Vec<f32> {
        let mut x = noise.to_vec();
        let (h, o) = (self.action_horizon, self.overlap_steps);
        x[..o * dim].copy_from_slice(&self.previous_chunk[(h - o) * dim..h * dim]);
        x
    }
}

/// Element `i` of torch's f32 `linspace(0, 1, n)`: the first half counts up from 0 by `step`,
/// the second half down from 1, so both ends are exact.
fn linspace01(n: usize, i: usize) -> f32 {
    let step = 1.0f32 / (n - 1) as f32;
    if i < n / 2 {
        i as f32 * step
    } else {
        1.0 - (n - 1 - i) as f32 * step
    }
}
