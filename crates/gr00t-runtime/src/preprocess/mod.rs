//! The GR00T N1.6 image chain (eval path), bit-exact with the Python reference.
//!
//! Per camera frame (uint8 RGB, HWC):
//! 1. `LetterBoxPad`: pad with zeros to a square (top/left = difference div 2);
//! 2. albumentations `SmallestMaxSize(256, INTER_AREA)` ([`cv_area`]);
//! 3. `FractionalCenterCrop(0.95)`;
//! 4. `SmallestMaxSize(256, INTER_AREA)` again (243 -> 256 is OpenCV's area-mode *enlarge* path);
//! 5. Eagle `fetch_image`: Qwen `smart_resize` (factor 28) and Pillow BICUBIC ([`pil_bicubic`]);
//! 6. normalise `(v - 127.5) / 127.5` in f32, CHW.
//!
//! Every intermediate is returned so tests compare each stage with the golden taps.

pub mod base64;
pub mod cv_area;
#[cfg(target_arch = "x86_64")]
mod cv_area_avx2;
pub mod normalize;
pub mod pil_bicubic;
#[cfg(target_arch = "x86_64")]
mod pil_bicubic_avx2;
pub mod png_rgb8;
pub mod stream;
pub mod unfilter;

pub use stream::{
    Pixels, decode_preprocess, decode_preprocess_beside, decode_preprocess_overlapped,
    expect_decode, set_overlap_decode,
};

/// Run `f` on this thread's reusable byte buffer of `len` bytes (its contents are left over
/// from the last use: only for callers that write every byte before reading it). Decode
/// buffers are ~200 KB per frame; reusing them saves zeroing and page-faulting them per
/// request. Buffers over [`SCRATCH_KEEP`] are not kept (a 4K frame would pin 50 MB in every
/// thread that ever decoded one).
pub(crate) fn with_scratch<R>(
    key: &'static std::thread::LocalKey<std::cell::Cell<Vec<u8>>>,
    len: usize,
    f: impl FnOnce(&mut [u8]) -> R,
) -> R {
    let mut buf = key.take();
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let r = f(&mut buf[..len]);
    if buf.capacity() <= SCRATCH_KEEP {
        key.set(buf);
    }
    r
}

/// Largest scratch buffer a thread keeps between requests (a 512×512 frame's rows).
pub(crate) const SCRATCH_KEEP: usize = 1 << 20;

/// An 8-bit RGB image, HWC row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `height * width * 3` bytes.
    pub data: Vec<u8>,
}

impl RgbImage {
    /// Wrap raw HWC bytes; panics if the length does not match (internal invariant).
    pub fn new(width: usize, height: usize, data: Vec<u8>) -> Self {
        assert_eq!(data.len(), width * height * 3, "RgbImage buffer size");
        Self {
            width,
            height,
            data,
        }
    }
}

/// A borrowed rectangle of an [`RgbImage`]: `height` rows of `width` pixels, row `y` starting
/// at byte `y * stride` of `data` (lets the centre crop feed the next resize without a copy).
#[derive(Clone, Copy, Debug)]
pub struct RgbView<'a> {
    data: &'a [u8],
    stride: usize,
    /// Width of the rectangle in pixels.
    pub width: usize,
    /// Height of the rectangle in pixels.
    pub height: usize,
}

impl<'a> RgbView<'a> {
    /// The whole image.
    pub fn full(img: &'a RgbImage) -> Self {
        Self::crop(img, 0, 0, img.width, img.height)
    }

    /// `width x height` pixels from `(x0, y0)`; panics if that leaves the image.
    pub fn crop(img: &'a RgbImage, x0: usize, y0: usize, width: usize, height: usize) -> Self {
        assert!(
            x0 + width <= img.width && y0 + height <= img.height,
            "crop inside the image"
        );
        let stride = img.width * 3;
        Self {
            data: &img.data[y0 * stride + x0 * 3..],
            stride,
            width,
            height,
        }
    }

    /// Row `y`: `width * 3` bytes.
    pub fn row(&self, y: usize) -> &'a [u8] {
        &self.data[y * self.stride..y * self.stride + self.width * 3]
    }

    /// A copy as an owned image.
    pub fn to_image(&self) -> RgbImage {
        let mut data = Vec::with_capacity(self.width * self.height * 3);
        for y in 0..self.height {
            data.extend_from_slice(self.row(y));
        }
        RgbImage::new(self.width, self.height, data)
    }
}

/// Why an image could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The bytes start with neither the PNG nor the JPEG signature.
    #[error("not a PNG or JPEG image")]
    UnknownFormat,
    /// The decoder rejected the bytes; its message.
    #[error("cannot decode the image: {0}")]
    Decode(String),
    /// A side is 0 or larger than the accepted maximum ([`MAX_IMAGE_SIDE`]).
    #[error("image is {width}x{height}; each side must be between 1 and {max} pixels")]
    BadSize {
        /// Decoded width in pixels.
        width: u32,
        /// Decoded height in pixels.
        height: u32,
        /// Largest accepted side.
        max: u32,
    },
}

/// Largest accepted side of a camera frame, in pixels (a 4K frame fits; a decompression bomb
/// does not).
pub const MAX_IMAGE_SIDE: u32 = 4096;

/// Decode a PNG or JPEG (sniffed from the magic bytes) to RGB8. Grey, grey-alpha and RGBA are
/// converted the way PIL's `convert("RGB")` does (alpha dropped).
pub fn decode_image(bytes: &[u8]) -> Result<RgbImage, ImageError> {
    // The common case, an 8-bit RGB PNG, without the generic decoder's copies and per-row
    // streaming; `None` for anything else and on any error, so the generic path decides.
    if let Some(img) = png_rgb8::decode_png_rgb8(bytes, MAX_IMAGE_SIDE as usize) {
        return Ok(img);
    }
    decode_image_generic(bytes)
}

fn decode_image_generic(bytes: &[u8]) -> Result<RgbImage, ImageError> {
    use image::ImageDecoder;
    let format = match bytes {
        [0x89, b'P', b'N', b'G', ..] => image::ImageFormat::Png,
        [0xFF, 0xD8, 0xFF, ..] => image::ImageFormat::Jpeg,
        _ => return Err(ImageError::UnknownFormat),
    };
    let cursor = std::io::Cursor::new(bytes);
    let reader = image::ImageReader::with_format(cursor, format);
    let mut decoder = reader
        .into_decoder()
        .map_err(|e| ImageError::Decode(e.to_string()))?;
    let (w, h) = decoder.dimensions();
    if w == 0 || h == 0 || w > MAX_IMAGE_SIDE || h > MAX_IMAGE_SIDE {
        return Err(ImageError::BadSize {
            width: w,
            height: h,
            max: MAX_IMAGE_SIDE,
        });
    }
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(256 << 20);
    decoder
        .set_limits(limits)
        .map_err(|e| ImageError::Decode(e.to_string()))?;
    let img = image::DynamicImage::from_decoder(decoder)
        .map_err(|e| ImageError::Decode(e.to_string()))?;
    let rgb = match img {
        image::DynamicImage::ImageRgb8(b) => b,
        other => other.to_rgb8(),
    };
    Ok(RgbImage::new(w as usize, h as usize, rgb.into_raw()))
}

/// The processor's image settings (`processor_config.json`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImageChainConfig {
    /// `shortest_image_edge` (256).
    pub shortest_edge: usize,
    /// `crop_fraction` (0.95).
    pub crop_fraction: f64,
}

impl Default for ImageChainConfig {
    fn default() -> Self {
        Self {
            shortest_edge: 256,
            crop_fraction: 0.95,
        }
    }
}

/// Every stage of the chain for one frame.
#[derive(Clone, Debug)]
pub struct Preprocessed {
    /// Step 1: zero-padded to a square (`LetterBoxPad`).
    pub letterboxed: RgbImage,
    /// Step 2: after the first `SmallestMaxSize(shortest_edge, INTER_AREA)`.
    pub resized1: RgbImage,
    /// Step 3: after `FractionalCenterCrop(crop_fraction)`.
    pub cropped: RgbImage,
    /// Step 4: after the second `SmallestMaxSize(shortest_edge, INTER_AREA)`.
    pub augmented: RgbImage,
    /// Step 5: after `smart_resize` and Pillow BICUBIC; the model image.
    pub smart_resized: RgbImage,
    /// `[3, h, w]` f32, CHW.
    pub pixel_values: Vec<f32>,
}

/// `LetterBoxPad`: zero-pad to a square.
pub fn letterbox(img: &RgbImage) -> RgbImage {
    let m = img.width.max(img.height);
    if m == img.width && m == img.height {
        return img.clone();
    }
    let top = (m - img.height) / 2;
    let left = (m - img.width) / 2;
    let mut out = vec![0u8; m * m * 3];
    for y in 0..img.height {
        let src = &img.data[y * img.width * 3..(y + 1) * img.width * 3];
        let off = ((y + top) * m + left) * 3;
        out[off..off + src.len()].copy_from_slice(src);
    }
    RgbImage::new(m, m, out)
}

/// albumentations `SmallestMaxSize(max_size, INTER_AREA)`.
pub fn smallest_max_size(img: &RgbImage, max_size: usize) -> RgbImage {
    match smallest_max_size_dims(img.width, img.height, max_size) {
        None => img.clone(),
        Some((nw, nh)) => cv_area::resize_area(img, nw, nh),
    }
}

/// The `(width, height)` `SmallestMaxSize` resizes to, `None` when it keeps the image.
fn smallest_max_size_dims(width: usize, height: usize, max_size: usize) -> Option<(usize, usize)> {
    let scale = max_size as f64 / width.min(height) as f64;
    if scale == 1.0 {
        return None;
    }
    let nh = (height as f64 * scale).round_ties_even().max(1.0) as usize;
    let nw = (width as f64 * scale).round_ties_even().max(1.0) as usize;
    Some((nw, nh))
}

/// `FractionalCenterCrop(fraction)`.
pub fn center_crop(img: &RgbImage, fraction: f64) -> RgbImage {
    center_crop_view(img, fraction).to_image()
}

/// [`center_crop`] as a borrowed view.
fn center_crop_view(img: &RgbImage, fraction: f64) -> RgbView<'_> {
    let (x0, y0, cw, ch) = center_crop_rect(img.width, img.height, fraction);
    RgbView::crop(img, x0, y0, cw, ch)
}

/// `(x0, y0, width, height)` of the centre crop of a `width x height` image.
fn center_crop_rect(width: usize, height: usize, fraction: f64) -> (usize, usize, usize, usize) {
    let ch = ((height as f64 * fraction) as usize).max(1);
    let cw = ((width as f64 * fraction) as usize).max(1);
    ((width - cw) / 2, (height - ch) / 2, cw, ch)
}

/// Qwen2-VL `smart_resize` as bundled with Eagle: (height, width) rounded to multiples of
/// `factor`, kept within the pixel budget.
pub fn smart_resize(height: usize, width: usize) -> (usize, usize) {
    const FACTOR: f64 = 28.0;
    const MIN_PIXELS: f64 = 4.0 * 28.0 * 28.0;
    const MAX_PIXELS: f64 = 4096.0 * 28.0 * 28.0;
    let (h, w) = (height as f64, width as f64);
    let mut hb = FACTOR.max((h / FACTOR).round_ties_even() * FACTOR);
    let mut wb = FACTOR.max((w / FACTOR).round_ties_even() * FACTOR);
    if hb * wb > MAX_PIXELS {
        let beta = (h * w / MAX_PIXELS).sqrt();
        hb = FACTOR.max((h / beta / FACTOR).floor() * FACTOR);
        wb = FACTOR.max((w / beta / FACTOR).floor() * FACTOR);
    } else if hb * wb < MIN_PIXELS {
        let beta = (MIN_PIXELS / (h * w)).sqrt();
        hb = (h * beta / FACTOR).ceil() * FACTOR;
        wb = (w * beta / FACTOR).ceil() * FACTOR;
    }
    (hb as usize, wb as usize)
}

/// `(v - 127.5) / 127.5` in f32, HWC u8 -> CHW f32.
pub fn normalize_chw(img: &RgbImage) -> Vec<f32> {
    let plane = img.width * img.height;
    let mut out: Vec<f32> = Vec::with_capacity(3 * plane);
    let dst = &mut out.spare_capacity_mut()[..3 * plane];
    let w3 = img.width * 3;
    for y in 0..img.height {
        normalize::normalize_row(&img.data[y * w3..(y + 1) * w3], y, plane, dst);
    }
    // SAFETY: `normalize_row` wrote all three planes' values of every row.
    unsafe { out.set_len(3 * plane) };
    out
}

/// The chain's output only (`(height, width)` of the model image and its CHW `pixel_values`),
/// computed exactly as [`preprocess`] does but without keeping (or copying) the intermediates:
/// the letterbox and the first resize are skipped when they keep the image, and the centre
/// crop is a view the second resize reads directly.
pub fn preprocess_pixels(img: &RgbImage, cfg: &ImageChainConfig) -> ((usize, usize), Vec<f32>) {
    use std::borrow::Cow;
    let letterboxed = if img.width == img.height {
        Cow::Borrowed(img)
    } else {
        Cow::Owned(letterbox(img))
    };
    let resized1 =
        match smallest_max_size_dims(letterboxed.width, letterboxed.height, cfg.shortest_edge) {
            None => letterboxed,
            Some((nw, nh)) => Cow::Owned(cv_area::resize_area(&letterboxed, nw, nh)),
        };
    let cropped = center_crop_view(&resized1, cfg.crop_fraction);
    let augmented = match smallest_max_size_dims(cropped.width, cropped.height, cfg.shortest_edge) {
        None => cropped.to_image(),
        Some((nw, nh)) => cv_area::resize_area_view(cropped, nw, nh),
    };
    let (h, w) = smart_resize(augmented.height, augmented.width);
    let pixel_values = if (h, w) == (augmented.height, augmented.width) {
        normalize_chw(&augmented)
    } else {
        pil_bicubic::resize_bicubic_normalized(&augmented, w, h)
    };
    ((h, w), pixel_values)
}

/// Run the whole chain on one frame.
pub fn preprocess(img: &RgbImage, cfg: &ImageChainConfig) -> Preprocessed {
    let letterboxed = letterbox(img);
    let resized1 = smallest_max_size(&letterboxed, cfg.shortest_edge);
    let cropped = center_crop(&resized1, cfg.crop_fraction);
    let augmented = smallest_max_size(&cropped, cfg.shortest_edge);
    let (h, w) = smart_resize(augmented.height, augmented.width);
    let smart_resized = pil_bicubic::resize_bicubic(&augmented, w, h);
    let pixel_values = normalize_chw(&smart_resized);
    Preprocessed {
        letterboxed,
        resized1,
        cropped,
        augmented,
        smart_resized,
        pixel_values,
    }
}

/// Deterministic test data shared by the scalar-vs-SIMD tests of the stages.
#[cfg(test)]
pub(crate) mod test_data {
    use super::RgbImage;

    /// The next byte of a 64-bit LCG stream (its top byte).
    pub fn byte(seed: &mut u64) -> u8 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 56) as u8
    }

    /// `n` bytes of the stream.
    pub fn bytes(n: usize, seed: &mut u64) -> Vec<u8> {
        (0..n).map(|_| byte(seed)).collect()
    }

    /// An 8-bit PNG of `data` with the `png` crate's encoder.
    pub fn encode_png(
        w: u32,
        h: u32,
        color: png::ColorType,
        data: &[u8],
        filter: png::Filter,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(color);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_filter(filter);
        let mut wr = enc.write_header().unwrap();
        wr.write_image_data(data).unwrap();
        wr.finish().unwrap();
        out
    }

    /// A `w`×`h` RGB image of stream bytes.
    pub fn random_image(w: usize, h: usize, mut seed: u64) -> RgbImage {
        RgbImage::new(w, h, bytes(w * h * 3, &mut seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preprocess_pixels_matches_preprocess() {
        for (w, h) in [
            (256, 256),
            (320, 240),
            (240, 320),
            (640, 480),
            (100, 37),
            (252, 252),
        ] {
            let data: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7919) % 251) as u8).collect();
            let img = RgbImage::new(w, h, data);
            let cfg = ImageChainConfig::default();
            let full = preprocess(&img, &cfg);
            let (hw, px) = preprocess_pixels(&img, &cfg);
            assert_eq!(hw, (full.smart_resized.height, full.smart_resized.width));
            assert_eq!(px, full.pixel_values, "{w}x{h}");
        }
    }
}
