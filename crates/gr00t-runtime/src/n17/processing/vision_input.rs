//! The Qwen3-VL image inputs (`Qwen2VLImageProcessorFast` as `Qwen3VLProcessor` calls it):
//! `pixel_values` `[patches, 3 * temporal * patch * patch]` and `image_grid_thw`.
//!
//! Per image: `smart_resize` to multiples of `patch * merge` within the pixel budget (the
//! GR00T transform's square output is already such a size, so no resampling is implemented:
//! any other size is an error), `(x - mean * 255) / (std * 255)` in f32 (the fast
//! processor's fused rescale + normalise), the single frame repeated to `temporal_patch_size`,
//! rows = patches in merge-block order (block row, block column, row in block, column in
//! block), columns = `[channel][t][py][px]`. Images are concatenated in prompt order.

use std::path::Path;

use serde::Deserialize;

use super::config::{ConfigError, read_json};
use crate::preprocess::RgbImage;

/// Why an image cannot become patches.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VisionInputError {
    /// `smart_resize` would resample the image; only identity sizes are supported.
    #[error(
        "image {index} is {width}x{height}; the Qwen processor would resize it to \
         {want_width}x{want_height}, which is not implemented"
    )]
    NeedsResize {
        /// Index of the image in prompt order.
        index: usize,
        /// Its width.
        width: usize,
        /// Its height.
        height: usize,
        /// `smart_resize` width.
        want_width: usize,
        /// `smart_resize` height.
        want_height: usize,
    },
    /// An aspect ratio over 200, which `smart_resize` rejects.
    #[error("image {index} is {width}x{height}: aspect ratio over 200")]
    AspectRatio {
        /// Index of the image in prompt order.
        index: usize,
        /// Its width.
        width: usize,
        /// Its height.
        height: usize,
    },
}

#[derive(Deserialize)]
struct SizeEntry {
    shortest_edge: Option<u64>,
    longest_edge: Option<u64>,
}

#[derive(Deserialize)]
struct PreprocessorFile {
    #[serde(default)]
    size: Option<SizeEntry>,
    #[serde(default)]
    min_pixels: Option<u64>,
    #[serde(default)]
    max_pixels: Option<u64>,
    #[serde(default = "d_patch")]
    patch_size: usize,
    #[serde(default = "d_temporal")]
    temporal_patch_size: usize,
    #[serde(default = "d_merge")]
    merge_size: usize,
    #[serde(default = "d_half")]
    image_mean: Vec<f64>,
    #[serde(default = "d_half")]
    image_std: Vec<f64>,
    #[serde(default = "d_rescale")]
    rescale_factor: f64,
    #[serde(default = "yes")]
    do_rescale: bool,
    #[serde(default = "yes")]
    do_normalize: bool,
}

fn d_patch() -> usize {
    16
}
fn d_temporal() -> usize {
    2
}
fn d_merge() -> usize {
    2
}
fn d_half() -> Vec<f64> {
    vec![0.5; 3]
}
fn d_rescale() -> f64 {
    1.0 / 255.0
}
fn yes() -> bool {
    true
}

/// The image processor's settings (`preprocessor_config.json` of the backbone).
#[derive(Clone, Debug, PartialEq)]
pub struct QwenImageConfig {
    /// Side of a vision patch (16).
    pub patch_size: usize,
    /// Frames per patch (2; a still image is repeated).
    pub temporal_patch_size: usize,
    /// Patches merged per side into one LLM token (2).
    pub merge_size: usize,
    /// Pixel budget floor (`size.shortest_edge`).
    pub min_pixels: u64,
    /// Pixel budget ceiling (`size.longest_edge`).
    pub max_pixels: u64,
    /// Per-channel mean, already divided by the rescale factor (127.5), f32 as torch has it.
    pub mean: [f32; 3],
    /// Per-channel std, already divided by the rescale factor (127.5), f32 as torch has it.
    pub std: [f32; 3],
}

impl QwenImageConfig {
    /// Reads `preprocessor_config.json` of the backbone's processor directory.
    pub fn load(dir: &Path) -> Result<Self, ConfigError> {
        let path = dir.join("preprocessor_config.json");
        let f: PreprocessorFile = read_json(&path)?;
        let bad = |field: &str, message: &str| ConfigError::Field {
            path: path.clone(),
            field: field.into(),
            message: message.into(),
        };
        let min_pixels = f
            .size
            .as_ref()
            .and_then(|s| s.shortest_edge)
            .or(f.min_pixels)
            .ok_or_else(|| bad("size.shortest_edge", "missing (and no min_pixels)"))?;
        let max_pixels = f
            .size
            .as_ref()
            .and_then(|s| s.longest_edge)
            .or(f.max_pixels)
            .ok_or_else(|| bad("size.longest_edge", "missing (and no max_pixels)"))?;
        if !f.do_rescale || !f.do_normalize {
            return Err(bad(
                "do_normalize",
                "only rescale + normalise (true) is supported",
            ));
        }
        if f.image_mean.len() != 3 || f.image_std.len() != 3 {
            return Err(bad("image_mean", "image_mean and image_std need 3 values"));
        }
        if f.patch_size == 0 || f.temporal_patch_size == 0 || f.merge_size == 0 {
            return Err(bad(
                "patch_size",
                "patch, temporal and merge sizes must be > 0",
            ));
        }
        // transformers fuses the two steps: mean / rescale_factor in f32 (0.5 * 255 = 127.5).
        let fuse = |v: f64| (v as f32) * ((1.0 / f.rescale_factor) as f32);
        let pick = |v: &[f64]| [fuse(v[0]), fuse(v[1]), fuse(v[2])];
        Ok(Self {
            patch_size: f.patch_size,
            temporal_patch_size: f.temporal_patch_size,
            merge_size: f.merge_size,
            min_pixels,
            max_pixels,
            mean: pick(&f.image_mean),
            std: pick(&f.image_std),
        })
    }

    /// `smart_resize(height, width, factor = patch * merge, min_pixels, max_pixels)` ->
    /// `(height, width)`; `None` for an aspect ratio over 200.
    pub fn smart_resize(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        let factor = (self.patch_size * self.merge_size) as f64;
        let (h, w) = (height as f64, width as f64);
        if h.max(w) / h.min(w) > 200.0 {
            return None;
        }
        let mut hb = (h / factor).round_ties_even() * factor;
        let mut wb = (w / factor).round_ties_even() * factor;
        let (min_p, max_p) = (self.min_pixels as f64, self.max_pixels as f64);
        if hb * wb > max_p {
            let beta = (h * w / max_p).sqrt();
            hb = factor.max((h / beta / factor).floor() * factor);
            wb = factor.max((w / beta / factor).floor() * factor);
        } else if hb * wb < min_p {
            let beta = (min_p / (h * w)).sqrt();
            hb = (h * beta / factor).ceil() * factor;
            wb = (w * beta / factor).ceil() * factor;
        }
        Some((hb as usize, wb as usize))
    }

    /// Values per patch row (`3 * temporal * patch^2`).
    pub fn patch_dim(&self) -> usize {
        3 * self.temporal_patch_size * self.patch_size * self.patch_size
    }
}

/// The vision inputs of one prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct PixelValues {
    /// `[rows, cols]` row-major.
    pub values: Vec<f32>,
    /// Patches over all images.
    pub rows: usize,
    /// [`QwenImageConfig::patch_dim`].
    pub cols: usize,
    /// `(t, h, w)` patch grid per image, prompt order.
    pub grid_thw: Vec<[usize; 3]>,
}

impl PixelValues {
    /// `<|image_pad|>` tokens of each image: `t * h * w / merge^2`.
    pub fn tokens_per_image(&self, merge_size: usize) -> Vec<usize> {
        self.grid_thw
            .iter()
            .map(|g| g[0] * g[1] * g[2] / (merge_size * merge_size))
            .collect()
    }
}

/// Patches of `images` (prompt order).
pub fn pixel_values(
    cfg: &QwenImageConfig,
    images: &[RgbImage],
) -> Result<PixelValues, VisionInputError> {
    let (ps, ms, tps) = (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size);
    let cols = cfg.patch_dim();
    let mut grid_thw = Vec::with_capacity(images.len());
    for (index, img) in images.iter().enumerate() {
        let (h, w) =
            cfg.smart_resize(img.height, img.width)
                .ok_or(VisionInputError::AspectRatio {
                    index,
                    width: img.width,
                    height: img.height,
                })?;
        if (h, w) != (img.height, img.width) {
            return Err(VisionInputError::NeedsResize {
                index,
                width: img.width,
                height: img.height,
                want_width: w,
                want_height: h,
            });
        }
        grid_thw.push([1, h / ps, w / ps]);
    }
    let rows: usize = grid_thw.iter().map(|g| g[1] * g[2]).sum();
    let mut values = vec![0f32; rows * cols];
    let mut row = 0;
    // Per channel: the 256 possible normalised values, so the per-pixel work is a lookup
    // of the same f32 the division gives.
    let lut: Vec<[f32; 256]> = (0..3)
        .map(|c| std::array::from_fn(|v| (v as f32 - cfg.mean[c]) / cfg.std[c]))
        .collect();
    for (img, g) in images.iter().zip(&grid_thw) {
        let (gh, gw) = (g[1], g[2]);
        for bh in 0..gh / ms {
            for bw in 0..gw / ms {
                for mh in 0..ms {
                    for mw in 0..ms {
                        let (y0, x0) = ((bh * ms + mh) * ps, (bw * ms + mw) * ps);
                        let out = &mut values[row * cols..(row + 1) * cols];
                        for (c, lut) in lut.iter().enumerate() {
                            for py in 0..ps {
                                let src = &img.data[((y0 + py) * img.width + x0) * 3..];
                                for px in 0..ps {
                                    let v = lut[src[px * 3 + c] as usize];
                                    for t in 0..tps {
                                        out[((c * tps + t) * ps + py) * ps + px] = v;
                                    }
                                }
                            }
                        }
                        row += 1;
                    }
                }
            }
        }
    }
    Ok(PixelValues {
        values,
        rows,
        cols,
        grid_thw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> QwenImageConfig {
        QwenImageConfig {
            patch_size: 16,
            temporal_patch_size: 2,
            merge_size: 2,
            min_pixels: 65536,
            max_pixels: 16777216,
            mean: [127.5; 3],
            std: [127.5; 3],
        }
    }

    #[test]
    fn smart_resize_keeps_the_gr00t_size_and_grows_small_images() {
        let c = cfg();
        assert_eq!(c.smart_resize(256, 256), Some((256, 256)));
        assert_eq!(c.smart_resize(200, 200), Some((256, 256)));
        assert_eq!(c.smart_resize(320, 480), Some((320, 480)));
        assert_eq!(c.smart_resize(1, 300), None);
    }

    #[test]
    fn a_non_identity_size_is_an_error() {
        let img = RgbImage::new(200, 200, vec![0; 200 * 200 * 3]);
        let e = pixel_values(&cfg(), &[img]).unwrap_err();
        assert!(matches!(
            e,
            VisionInputError::NeedsResize {
                want_width: 256,
                ..
            }
        ));
    }
}
