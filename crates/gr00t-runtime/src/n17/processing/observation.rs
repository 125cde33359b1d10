//! One raw observation (the reference's `video.*`, `state.*`, language dicts for one batch
//! element) and its shape checks against the embodiment's modality config.
//!
//! Every rejection is a [`crate::request::InputError`] naming the field as the reference's
//! observation dict names it (`video.<camera>`, `state.<group>`, `language.<key>`), so a
//! transport can answer 400 with it. Keys the embodiment does not use are ignored, as the
//! reference does.

use std::collections::BTreeMap;

use super::config::EmbodimentConfig;
use crate::preprocess::RgbImage;
use crate::request::InputError;

/// One observation, already decoded from its wire format.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// Frames per camera key, oldest first (one per `video` delta index), HWC RGB.
    pub video: BTreeMap<String, Vec<RgbImage>>,
    /// Raw rows per state group, oldest first (one per `state` delta index).
    pub state: BTreeMap<String, Vec<Vec<f32>>>,
    /// The instruction as given (formalised by the processing when the config says so).
    pub instruction: String,
}

/// Field name of a camera.
pub fn video_field(camera: &str) -> String {
    format!("video.{camera}")
}

/// Field name of a state group.
pub fn state_field(group: &str) -> String {
    format!("state.{group}")
}

/// Checks the state groups alone (what decoding a chunk needs).
pub fn check_state(
    cfg: &EmbodimentConfig,
    state: &BTreeMap<String, Vec<Vec<f32>>>,
) -> Result<(), InputError> {
    for g in &cfg.state_groups {
        let field = state_field(&g.name);
        let rows = state
            .get(&g.name)
            .ok_or_else(|| InputError::new(&field, "missing"))?;
        if rows.len() != cfg.state_history {
            return Err(InputError::new(
                &field,
                format!(
                    "{} rows given, the embodiment takes {} (one per state delta index)",
                    rows.len(),
                    cfg.state_history
                ),
            ));
        }
        for (t, r) in rows.iter().enumerate() {
            if r.len() != g.dim {
                return Err(InputError::new(
                    &field,
                    format!("row {t} has {} values, expected {}", r.len(), g.dim),
                ));
            }
            if let Some(i) = r.iter().position(|v| !v.is_finite()) {
                return Err(InputError::new(
                    &field,
                    format!("row {t} value {i} is not finite"),
                ));
            }
        }
    }
    Ok(())
}

impl Observation {
    /// Checks that every camera has its frame count of non-empty images and every state group
    /// its rows of the right width.
    pub fn check(&self, cfg: &EmbodimentConfig) -> Result<(), InputError> {
        for cam in &cfg.cameras {
            let field = video_field(cam);
            let frames = self
                .video
                .get(cam)
                .ok_or_else(|| InputError::new(&field, "missing"))?;
            if frames.len() != cfg.frames_per_camera {
                return Err(InputError::new(
                    &field,
                    format!(
                        "{} frames given, the embodiment takes {} (one per video delta index)",
                        frames.len(),
                        cfg.frames_per_camera
                    ),
                ));
            }
            for (t, f) in frames.iter().enumerate() {
                if f.width == 0 || f.height == 0 || f.data.len() != f.width * f.height * 3 {
                    return Err(InputError::new(
                        &field,
                        format!(
                            "frame {t} is {}x{} with {} bytes; need a non-empty HWC RGB image",
                            f.width,
                            f.height,
                            f.data.len()
                        ),
                    ));
                }
            }
        }
        check_state(cfg, &self.state)
    }
}
