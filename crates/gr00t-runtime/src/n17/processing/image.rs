//! The eval image transform of `Gr00tN1d7Processor` (albumentations `Compose`), per frame:
//! `LetterBoxPad` (zeros, top/left = difference // 2) -> `SmallestMaxSize(max_size,
//! INTER_AREA)` -> `FractionalCenterCrop(fraction)` -> `SmallestMaxSize(max_size, INTER_AREA)`,
//! bit-exact (the N1.6 helpers of [`crate::preprocess`], whose OpenCV `INTER_AREA` covers the
//! shrink and the enlarge this chain takes).
//!
//! Two orders matter: frames are transformed camera by camera ("transform order":
//! view-major, each camera's frames oldest first), and handed to the Qwen processor
//! time-major (all cameras of the oldest frame first), which is the order of the
//! `<|image_pad|>`s in the prompt.

use super::config::{EmbodimentConfig, ImageTransform};
use super::observation::Observation;
use crate::preprocess::{RgbImage, center_crop, letterbox, smallest_max_size};

/// Every stage of the transform for one frame.
#[derive(Clone, Debug)]
pub struct FrameStages {
    /// After `LetterBoxPad`.
    pub letterboxed: RgbImage,
    /// After the first `SmallestMaxSize`.
    pub resized1: RgbImage,
    /// After `FractionalCenterCrop`.
    pub cropped: RgbImage,
    /// After the second `SmallestMaxSize`: the image given to the Qwen processor.
    pub augmented: RgbImage,
}

/// The transform of one frame, keeping every stage.
pub fn transform_stages(frame: &RgbImage, t: &ImageTransform) -> FrameStages {
    let letterboxed = letterbox(frame);
    let resized1 = smallest_max_size(&letterboxed, t.max_size);
    let cropped = center_crop(&resized1, t.crop_fraction);
    let augmented = smallest_max_size(&cropped, t.max_size);
    FrameStages {
        letterboxed,
        resized1,
        cropped,
        augmented,
    }
}

/// The transform of one frame.
pub fn transform(frame: &RgbImage, t: &ImageTransform) -> RgbImage {
    transform_stages(frame, t).augmented
}

/// Index into the transform order (view-major) of the `k`-th image of the prompt
/// (time-major), for `cameras` cameras of `frames` frames each.
pub fn prompt_to_transform_index(k: usize, cameras: usize, frames: usize) -> usize {
    debug_assert!(k < cameras * frames);
    let (t, v) = (k / cameras, k % cameras);
    v * frames + t
}

/// The raw frames in transform order (view-major), for an observation that passed
/// [`Observation::check`].
pub fn frames_in_transform_order<'a>(
    cfg: &EmbodimentConfig,
    obs: &'a Observation,
) -> Vec<&'a RgbImage> {
    cfg.cameras
        .iter()
        .flat_map(|c| obs.video[c].iter())
        .collect()
}

/// The transformed images in prompt order (time-major), for an observation that passed
/// [`Observation::check`]; each image is transformed once, on the rayon pool.
pub fn prompt_images(cfg: &EmbodimentConfig, obs: &Observation) -> Vec<RgbImage> {
    use rayon::prelude::*;
    let raw = frames_in_transform_order(cfg, obs);
    let mut slots: Vec<Option<RgbImage>> = raw
        .par_iter()
        .map(|f| Some(transform(f, &cfg.image)))
        .collect();
    (0..slots.len())
        .map(|k| {
            let i = prompt_to_transform_index(k, cfg.cameras.len(), cfg.frames_per_camera);
            slots[i].take().expect("each transform index is used once")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_order_is_time_major() {
        // 2 cameras x 2 frames: prompt = ext t0, wrist t0, ext t1, wrist t1;
        // transform order = ext t0, ext t1, wrist t0, wrist t1.
        let got: Vec<usize> = (0..4).map(|k| prompt_to_transform_index(k, 2, 2)).collect();
        assert_eq!(got, [0, 2, 1, 3]);
        let got: Vec<usize> = (0..6).map(|k| prompt_to_transform_index(k, 3, 2)).collect();
        assert_eq!(got, [0, 2, 4, 1, 3, 5]);
    }
}
