//! Decode and preprocess one frame, optionally with the PNG inflate and the image chain
//! overlapped on two threads.
//!
//! Inflate is serial and the largest single cost, so for the common frame (a square 8-bit RGB
//! PNG already at the chain's size, on a CPU with AVX2) [`decode_preprocess_overlapped`] lets
//! the helper thread ([`crate::beside`]) inflate and unfilter bands of rows while the calling
//! thread runs the chain on the rows received so far: each INTER_AREA output row needs only
//! two source rows, each bicubic output row only a few INTER_AREA rows, and each finished row
//! is normalised straight into the CHW planes. The chain is the shorter half, so the caller
//! first runs the request's other host work it was given ([`decode_preprocess_beside`]:
//! tokenizer, state, noise) while the first rows are inflated. When the helper is busy the
//! caller runs the producer and then the consumer itself (the producer never waits on the
//! consumer). Every step is the same code as [`super::preprocess_pixels`] runs, so the floats
//! are identical (checked by a test).
//!
//! It only pays when a second core is free, so it is off unless [`set_overlap_decode`] turns
//! it on (the server does when it has two or more cores).

use std::sync::atomic::{AtomicBool, Ordering};

use super::{ImageChainConfig, ImageError, MAX_IMAGE_SIDE};

/// Rows per band the producer hands over.
#[cfg(target_arch = "x86_64")]
const BAND_ROWS: usize = 16;

static OVERLAP: AtomicBool = AtomicBool::new(false);

/// Make [`decode_preprocess`] use [`decode_preprocess_overlapped`] (process-wide; for hosts
/// with a core to spare per request).
pub fn set_overlap_decode(on: bool) {
    OVERLAP.store(on, Ordering::Relaxed);
}

/// A request has arrived and will decode a frame soon: with overlapped decodes on, start the
/// helper thread spinning now, so its wake-up overlaps the request's JSON parse
/// ([`crate::beside::wake`]).
pub fn expect_decode() {
    if OVERLAP.load(Ordering::Relaxed) {
        crate::beside::wake();
    }
}

/// Decoded pixels: `(height, width)` of the model image and its CHW `pixel_values`.
pub type Pixels = ((usize, usize), Vec<f32>);

/// [`super::decode_image`] then [`super::preprocess_pixels`] (overlapped if
/// [`set_overlap_decode`] said so).
pub fn decode_preprocess(bytes: &[u8], cfg: &ImageChainConfig) -> Result<Pixels, ImageError> {
    decode_preprocess_beside(bytes, cfg, || ()).0
}

/// [`decode_preprocess`], also running `side` (other work of the same request, independent of
/// the image) on this thread; where the decode is overlapped, `side` runs while the helper
/// inflates the first rows. `side` runs exactly once.
pub fn decode_preprocess_beside<R>(
    bytes: &[u8],
    cfg: &ImageChainConfig,
    side: impl FnOnce() -> R,
) -> (Result<Pixels, ImageError>, R) {
    if OVERLAP.load(Ordering::Relaxed) {
        return overlapped_beside(bytes, cfg, side);
    }
    let r = super::decode_image(bytes).map(|img| super::preprocess_pixels(&img, cfg));
    (r, side())
}

/// [`decode_preprocess`] with the decode and the chain overlapped where the frame allows it
/// (see the module notes); otherwise the plain sequence.
pub fn decode_preprocess_overlapped(
    bytes: &[u8],
    cfg: &ImageChainConfig,
) -> Result<Pixels, ImageError> {
    overlapped_beside(bytes, cfg, || ()).0
}

fn overlapped_beside<R>(
    bytes: &[u8],
    cfg: &ImageChainConfig,
    side: impl FnOnce() -> R,
) -> (Result<Pixels, ImageError>, R) {
    let mut side = Some(side);
    let mut side_out = None;
    #[cfg(target_arch = "x86_64")]
    if let Some(r) = streamed(bytes, cfg, || side_out = side.take().map(|f| f())) {
        let side_out = side_out.or_else(|| side.take().map(|f| f()));
        return (Ok(r), side_out.expect("side ran"));
    }
    let side_out = side_out.or_else(|| side.take().map(|f| f()));
    let r = super::decode_image(bytes).map(|img| super::preprocess_pixels(&img, cfg));
    (r, side_out.expect("side ran"))
}

/// Decoded rows as they arrive from the producer.
#[cfg(target_arch = "x86_64")]
struct Rows {
    data: Vec<u8>,
    stride: usize,
    have: usize,
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
}

#[cfg(target_arch = "x86_64")]
impl Rows {
    /// Wait until `n` rows are in; `false` if the producer stopped first (a broken stream).
    fn ensure(&mut self, n: usize) -> bool {
        while self.have < n {
            // Bands come every few microseconds: poll (yielding the core) rather than park,
            // which costs a futex wake-up per band.
            let band = loop {
                match self.rx.try_recv() {
                    Ok(b) => break b,
                    Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::yield_now(),
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => return false,
                }
            };
            let at = self.have * self.stride;
            self.data[at..at + band.len()].copy_from_slice(&band);
            self.have += band.len() / self.stride;
        }
        true
    }
}

#[cfg(target_arch = "x86_64")]
fn streamed(bytes: &[u8], cfg: &ImageChainConfig, side: impl FnOnce()) -> Option<Pixels> {
    use super::pil_bicubic::{v_row, with_fast_plan};
    use super::pil_bicubic_avx2 as v;
    use super::{center_crop_rect, cv_area, normalize, png_rgb8, smallest_max_size_dims};

    let png = png_rgb8::parse_png_rgb8(bytes, MAX_IMAGE_SIDE as usize)?;
    let (w, h) = (png.width, png.height);
    // The common shape only: square (no letterbox) and already at the chain's size.
    if w != h || smallest_max_size_dims(w, h, cfg.shortest_edge).is_some() {
        return None;
    }
    let (cx0, cy0, cw, ch) = center_crop_rect(w, h, cfg.crop_fraction);
    let (aw, ah) = smallest_max_size_dims(cw, ch, cfg.shortest_edge)?;
    let mut area = cv_area::LinearArea::for_enlarge(cw, ch, aw, ah)?;
    let (oh, ow) = super::smart_resize(ah, aw);
    let plane = ow * oh;
    with_fast_plan(aw, ah, ow, oh, |plan, cy, s| {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let stride = w * 3;
        let producer = move || {
            png.decode_rows(BAND_ROWS, |band| {
                // A closed channel means the consumer gave up; nothing to do about it here.
                let _ = tx.send(band.to_vec());
            })
            .is_some()
        };
        let consumer = || {
            side();
            let mut rows = Rows {
                data: vec![0u8; h * stride],
                stride,
                have: 0,
                rx,
            };
            let pstride = plan.stride();
            s.tmp.resize(ah * pstride, 0);
            let mut arow = vec![0u8; aw * 3];
            let mut out: Vec<f32> = Vec::with_capacity(3 * plane);
            let dst = &mut out.spare_capacity_mut()[..3 * plane];
            let mut next_y = 0;
            for dy in 0..ah {
                if !rows.ensure(cy0 + area.last_src_row(dy) + 1) {
                    return None;
                }
                let crop_row = |r: usize| &rows.data[(cy0 + r) * stride + cx0 * 3..][..cw * 3];
                area.row(dy, crop_row, &mut arow);
                let hdst = &mut s.tmp[dy * pstride..(dy + 1) * pstride];
                // SAFETY: plans exist only when AVX2 was detected.
                unsafe { v::hrow(plan, &arow, &mut s.buf, hdst) };
                while next_y < oh && cy.bounds[next_y].0 + cy.bounds[next_y].1 <= dy + 1 {
                    v_row(plan, cy, s, next_y);
                    normalize::normalize_row(&s.row[..ow * 3], next_y, plane, dst);
                    next_y += 1;
                }
            }
            if next_y != oh {
                return None;
            }
            // SAFETY: rows 0..oh were all normalised, which writes every value of the planes.
            unsafe { out.set_len(3 * plane) };
            Some(out)
        };
        let (ok, pixels) = crate::beside::join(producer, consumer);
        pixels.filter(|_| ok).map(|p| ((oh, ow), p))
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::{decode_image, preprocess_pixels};

    fn png(w: u32, h: u32, data: &[u8], filter: png::Filter) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_filter(filter);
        let mut wr = enc.write_header().unwrap();
        wr.write_image_data(data).unwrap();
        wr.finish().unwrap();
        out
    }

    /// The overlapped path gives the same floats as decode + `preprocess_pixels`, on the
    /// shape it takes and on shapes it leaves to the plain path.
    #[test]
    fn overlapped_equals_sequential() {
        let cfg = ImageChainConfig::default();
        let mut s = 3u32;
        for (w, h) in [(256, 256), (256, 256), (300, 300), (320, 240), (17, 17)] {
            let data: Vec<u8> = (0..w * h * 3)
                .map(|i| {
                    s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                    ((i / 5) as u32).wrapping_add(s >> 28) as u8
                })
                .collect();
            for filter in [png::Filter::Adaptive, png::Filter::Paeth] {
                let file = png(w as u32, h as u32, &data, filter);
                let want = preprocess_pixels(&decode_image(&file).unwrap(), &cfg);
                let got = decode_preprocess_overlapped(&file, &cfg).unwrap();
                assert_eq!(decode_preprocess(&file, &cfg).unwrap(), want);
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    assert_eq!(
                        streamed(&file, &cfg, || ()).is_some(),
                        (w, h) == (256, 256),
                        "{w}x{h}"
                    );
                }
                assert_eq!(got.0, want.0);
                assert!(
                    got.1
                        .iter()
                        .zip(&want.1)
                        .all(|(a, b)| a.to_bits() == b.to_bits())
                );
                assert_eq!(got.1.len(), want.1.len(), "{w}x{h}");
            }
        }
    }

    #[test]
    fn broken_stream_is_an_error_not_a_panic() {
        let data = vec![7u8; 256 * 256 * 3];
        let file = png(256, 256, &data, png::Filter::Sub);
        // Cut inside IDAT: the chunk walk fails, the generic decoder reports it.
        let cut = &file[..file.len() / 2];
        assert!(decode_preprocess_overlapped(cut, &ImageChainConfig::default()).is_err());
    }
}
