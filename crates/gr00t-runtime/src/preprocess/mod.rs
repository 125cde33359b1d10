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

pub mod cv_area;
pub mod pil_bicubic;

/// An 8-bit RGB image, HWC row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RgbImage {
    pub width: usize,
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

/// Why an image could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("not a PNG or JPEG image")]
    UnknownFormat,
    #[error("cannot decode the image: {0}")]
    Decode(String),
    #[error("image is {width}x{height}; each side must be between 1 and {max} pixels")]
    BadSize { width: u32, height: u32, max: u32 },
}

/// Largest accepted side of a camera frame, in pixels (a 4K frame fits; a decompression bomb
/// does not).
pub const MAX_IMAGE_SIDE: u32 = 4096;

/// Decode a PNG or JPEG (sniffed from the magic bytes) to RGB8. Grey, grey-alpha and RGBA are
/// converted the way PIL's `convert("RGB")` does (alpha dropped).
pub fn decode_image(bytes: &[u8]) -> Result<RgbImage, ImageError> {
    if let Some(img) = decode_png_rgb8_fast(bytes) {
        return Ok(img);
    }
    decode_image_generic(bytes)
}

/// The common case, an 8-bit RGB PNG, straight into the output buffer with the `png` crate
/// (the decoder `image` uses, minus its copies). `None` for anything else, and on any error,
/// so the generic path decides (and words the error).
fn decode_png_rgb8_fast(bytes: &[u8]) -> Option<RgbImage> {
    if !bytes.starts_with(&[0x89, b'P', b'N', b'G']) {
        return None;
    }
    let mut dec = png::Decoder::new_with_limits(
        std::io::Cursor::new(bytes),
        png::Limits { bytes: 256 << 20 },
    );
    dec.set_transformations(png::Transformations::IDENTITY);
    dec.set_ignore_text_chunk(true);
    dec.set_ignore_iccp_chunk(true);
    let mut reader = dec.read_info().ok()?;
    let info = reader.info();
    let (w, h) = (info.width as usize, info.height as usize);
    let max = MAX_IMAGE_SIDE as usize;
    if w == 0
        || h == 0
        || w > max
        || h > max
        || info.color_type != png::ColorType::Rgb
        || info.bit_depth != png::BitDepth::Eight
        || info.trns.is_some()
    {
        return None;
    }
    let mut data = vec![0u8; w * h * 3];
    if reader.output_buffer_size()? != data.len() {
        return None;
    }
    reader.next_frame(&mut data).ok()?;
    Some(RgbImage::new(w, h, data))
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
    pub letterboxed: RgbImage,
    pub resized1: RgbImage,
    pub cropped: RgbImage,
    pub augmented: RgbImage,
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
    let scale = max_size as f64 / img.width.min(img.height) as f64;
    if scale == 1.0 {
        return img.clone();
    }
    let nh = (img.height as f64 * scale).round_ties_even().max(1.0) as usize;
    let nw = (img.width as f64 * scale).round_ties_even().max(1.0) as usize;
    cv_area::resize_area(img, nw, nh)
}

/// `FractionalCenterCrop(fraction)`.
pub fn center_crop(img: &RgbImage, fraction: f64) -> RgbImage {
    let ch = ((img.height as f64 * fraction) as usize).max(1);
    let cw = ((img.width as f64 * fraction) as usize).max(1);
    let y0 = (img.height - ch) / 2;
    let x0 = (img.width - cw) / 2;
    let mut out = Vec::with_capacity(ch * cw * 3);
    for y in y0..y0 + ch {
        let row = (y * img.width + x0) * 3;
        out.extend_from_slice(&img.data[row..row + cw * 3]);
    }
    RgbImage::new(cw, ch, out)
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
    let n = img.width * img.height;
    // The same f32 expression for each of the 256 byte values, looked up per pixel.
    let mut lut = [0f32; 256];
    for (v, l) in lut.iter_mut().enumerate() {
        *l = (v as f32 - 127.5f32) / 127.5f32;
    }
    let mut out = Vec::with_capacity(3 * n);
    for c in 0..3 {
        out.extend(img.data.chunks_exact(3).map(|px| lut[px[c] as usize]));
    }
    out
}

/// [`smallest_max_size`] that borrows the input when it is already the right size.
fn smallest_max_size_cow(img: &RgbImage, max_size: usize) -> std::borrow::Cow<'_, RgbImage> {
    if max_size as f64 / img.width.min(img.height) as f64 == 1.0 {
        std::borrow::Cow::Borrowed(img)
    } else {
        std::borrow::Cow::Owned(smallest_max_size(img, max_size))
    }
}

/// The chain's output only (`(height, width)` of the model image and its CHW `pixel_values`),
/// computed exactly as [`preprocess`] does but without keeping (or copying) the intermediates.
pub fn preprocess_pixels(img: &RgbImage, cfg: &ImageChainConfig) -> ((usize, usize), Vec<f32>) {
    use std::borrow::Cow;
    let letterboxed = if img.width == img.height {
        Cow::Borrowed(img)
    } else {
        Cow::Owned(letterbox(img))
    };
    let resized1 = smallest_max_size_cow(&letterboxed, cfg.shortest_edge);
    let cropped = center_crop(&resized1, cfg.crop_fraction);
    let augmented = smallest_max_size_cow(&cropped, cfg.shortest_edge);
    let (h, w) = smart_resize(augmented.height, augmented.width);
    let pixel_values = if (h, w) == (augmented.height, augmented.width) {
        normalize_chw(&augmented)
    } else {
        normalize_chw(&pil_bicubic::resize_bicubic(&augmented, w, h))
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
