//! Decode and preprocess one frame, optionally with the PNG inflate and the image chain
//! overlapped on two threads.
//!
//! Inflate is serial and the largest single cost, so for the common frame (a square 8-bit RGB
//! PNG already at the chain's size, on a CPU with AVX2) [`decode_preprocess_overlapped`] lets
//! the helper thread ([`crate::beside`]) only inflate, publishing bands of filtered rows into
//! one shared buffer, while the calling thread does everything else: first the request's
//! other host work it was given ([`decode_preprocess_beside`]: state, prompt, noise) and the
//! chunk CRCs, then, row by row as they arrive, the unfilter and the chain. Each INTER_AREA
//! output row needs only two source rows and each bicubic output row only a few INTER_AREA
//! rows. The last step, normalising a finished row into the CHW planes, is shared
//! ([`Deferred`]): the caller does it while it waits for rows, and the helper, once its inflate
//! is done, takes the rows the caller has made by then. Which of the two is the longer half
//! changes with the machine (on the CI VM the inflate ranges 210–300 µs within minutes), so
//! the work that can move goes to whichever has time.
//!
//! When the helper is busy the caller runs the producer and then the consumer itself (the
//! producer never waits on the consumer). Every step is the same code as
//! [`super::preprocess_pixels`] runs, so the floats are identical (checked by a test).
//!
//! It only pays when a second core is free, so it is off unless [`set_overlap_decode`] turns
//! it on (the server does when it has two or more cores).

use std::sync::atomic::{AtomicBool, Ordering};

use super::{ImageChainConfig, ImageError, MAX_IMAGE_SIDE};

/// Rows per band the producer hands over: small, so the consumer's tail after the last band
/// is short. Interleaved runs on the CI VM (median of 1500, 256×256 frame): 8 rows beat 16 by
/// ~5 µs; 4 rows were no better. Unfiltering the top rows on the producer as well (3/8 or 1/4
/// of them) was 20–30 µs slower than leaving all of the unfilter to the consumer.
#[cfg(target_arch = "x86_64")]
const BAND_ROWS: usize = 8;

/// Horizontally resampled rows the consumer keeps (a sliding window, not the whole 390 KB
/// image: the decode's working set then fits the core's L2 with room to spare). An output
/// row is made as soon as its last source row is in, so the rows it reads are at most
/// `MAX_TAPS` back from the newest.
#[cfg(target_arch = "x86_64")]
const RING: usize = 32;
#[cfg(target_arch = "x86_64")]
const _: () = assert!(super::pil_bicubic_avx2::MAX_TAPS + 2 <= RING);

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

/// The producer's filtered rows, published to the consumer as they are inflated: the
/// producer copies each finished band into `buf` past the published prefix, then raises
/// `rows` (release); the consumer reads only rows below `rows` (acquire). So no byte is ever
/// written while it can be read, and nothing is allocated or sent per band.
#[cfg(target_arch = "x86_64")]
struct RawRows {
    buf: *mut u8,
    len: usize,
    row_in: usize,
    /// Rows published.
    rows: std::sync::atomic::AtomicUsize,
    /// The producer has stopped (finished or failed).
    stopped: AtomicBool,
}

// SAFETY: see the type's notes; the raw pointer is only written past the published prefix.
#[cfg(target_arch = "x86_64")]
unsafe impl Sync for RawRows {}

#[cfg(target_arch = "x86_64")]
impl RawRows {
    /// Producer: append rows after the published ones and publish them.
    fn publish(&self, band: &[u8]) {
        let at = self.rows.load(Ordering::Relaxed) * self.row_in;
        assert!(at + band.len() <= self.len, "more rows than the image has");
        // SAFETY: in bounds (asserted) and past the published prefix, which is all the
        // consumer reads.
        unsafe { std::ptr::copy_nonoverlapping(band.as_ptr(), self.buf.add(at), band.len()) };
        self.rows
            .store((at + band.len()) / self.row_in, Ordering::Release);
    }

    /// Consumer: wait until more than `have` rows are published, running `idle` (other work,
    /// `true` if it did some) meanwhile; the published rows, or `None` if the producer stopped
    /// first.
    fn wait_beyond(&self, have: usize, idle: &mut impl FnMut() -> bool) -> Option<&[u8]> {
        // A band arrives every ~15 µs: spin, and give the core away only when the producer is
        // clearly not running.
        let mut backoff = crate::beside::Backoff::new(1 << 14);
        loop {
            let n = self.rows.load(Ordering::Acquire);
            if n > have {
                // SAFETY: rows below `n` are written and never written again.
                return Some(unsafe { std::slice::from_raw_parts(self.buf, n * self.row_in) });
            }
            if self.stopped.load(Ordering::Acquire) && self.rows.load(Ordering::Acquire) <= have {
                return None;
            }
            if !idle() {
                backoff.pause();
            }
        }
    }
}

/// The consumer's unfiltered rows.
#[cfg(target_arch = "x86_64")]
struct Rows<'a> {
    raw: &'a RawRows,
    data: &'a mut [u8],
    stride: usize,
    have: usize,
}

#[cfg(target_arch = "x86_64")]
impl Rows<'_> {
    /// Unfilter until `n` rows are in, running `idle` while rows are not there yet; `false` if
    /// the stream broke first.
    fn ensure(&mut self, n: usize, idle: &mut impl FnMut() -> bool) -> bool {
        while self.have < n {
            let Some(raw) = self.raw.wait_beyond(self.have, idle) else {
                return false;
            };
            let upto = raw.len() / self.raw.row_in;
            let (done, todo) = self.data.split_at_mut(self.have * self.stride);
            let above = self.have.checked_sub(1).map(|r| &done[r * self.stride..]);
            let band = &mut todo[..(upto - self.have) * self.stride];
            let raw = &raw[self.have * self.raw.row_in..];
            if super::unfilter::unfilter_rgb8(raw, above, band, self.stride).is_err() {
                return false;
            }
            self.have = upto;
        }
        true
    }
}

/// Resampled rows waiting to be normalised, and the CHW planes they go to, shared by the two
/// threads: the consumer appends rows (`made`, release); either thread claims the next one
/// (`claimed`, compare-and-swap), writes its values into its own rows of the three planes and
/// counts it (`finished`, release). So the producer, once its inflate is done, takes the
/// normalising of the rows already made off the consumer, and the consumer normalises while
/// it waits for rows instead of spinning. Neither ever waits for the other here: a thread
/// that finds no unclaimed row goes on with its own work.
#[cfg(target_arch = "x86_64")]
struct Deferred {
    /// `total` rows of `row_len` bytes (the resampled pixels are the first `3 * width`).
    rows: *mut u8,
    row_len: usize,
    width: usize,
    total: usize,
    /// Three planes of `total * width` values.
    planes: *mut f32,
    made: std::sync::atomic::AtomicUsize,
    claimed: std::sync::atomic::AtomicUsize,
    finished: std::sync::atomic::AtomicUsize,
}

// SAFETY: see the type's notes: a row of `rows` is written only by the consumer before it is
// made and read only after; each row of the planes is written by the one thread that claimed
// it.
#[cfg(target_arch = "x86_64")]
unsafe impl Sync for Deferred {}

#[cfg(target_arch = "x86_64")]
impl Deferred {
    /// Consumer: `write` the next row (`row_len` bytes), then make it claimable.
    fn make_next(&self, write: impl FnOnce(&mut [u8])) {
        let y = self.made.load(Ordering::Relaxed);
        assert!(y < self.total, "more rows than the image has");
        // SAFETY: in bounds (asserted); a row not yet made is touched only by the consumer,
        // and only here.
        let row = unsafe {
            std::slice::from_raw_parts_mut(self.rows.add(y * self.row_len), self.row_len)
        };
        write(row);
        self.made.store(y + 1, Ordering::Release);
    }

    /// Either thread: normalise one made, unclaimed row; `false` if there is none right now.
    fn normalize_one(&self) -> bool {
        let made = self.made.load(Ordering::Acquire);
        let mut y = self.claimed.load(Ordering::Relaxed);
        loop {
            if y >= made {
                return false;
            }
            match self
                .claimed
                .compare_exchange_weak(y, y + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => y = now,
            }
        }
        let w = self.width;
        let plane = self.total * w;
        // SAFETY: row `y` was made (acquire above) and is never written again; this thread
        // alone claimed it, so the three `w`-value runs of the planes are its alone.
        unsafe {
            let row = std::slice::from_raw_parts(self.rows.add(y * self.row_len), 3 * w);
            let run = |c: usize| {
                std::slice::from_raw_parts_mut(
                    self.planes.add(c * plane + y * w) as *mut std::mem::MaybeUninit<f32>,
                    w,
                )
            };
            super::normalize::normalize_row_planes(row, [run(0), run(1), run(2)]);
        }
        self.finished.fetch_add(1, Ordering::Release);
        true
    }

    /// Consumer, after making every row: normalise what is left and wait for rows the other
    /// thread is still writing.
    fn finish(&self) {
        while self.normalize_one() {}
        // The other thread is inside one row (~0.1 µs) unless it was preempted.
        let mut backoff = crate::beside::Backoff::new(1 << 12);
        while self.finished.load(Ordering::Acquire) < self.made.load(Ordering::Relaxed) {
            backoff.pause();
        }
    }
}

/// Where the streamed chain reads and writes, for one frame size.
#[cfg(target_arch = "x86_64")]
struct Geometry {
    /// Source side (square).
    side: usize,
    /// The centre crop: origin and size.
    crop: (usize, usize, usize, usize),
    /// INTER_AREA output (width, height).
    area: (usize, usize),
    /// Model image (height, width).
    out: (usize, usize),
}

#[cfg(target_arch = "x86_64")]
fn streamed(bytes: &[u8], cfg: &ImageChainConfig, side: impl FnOnce()) -> Option<Pixels> {
    use super::pil_bicubic::with_fast_plan;
    use super::{center_crop_rect, cv_area, png_rgb8, smallest_max_size_dims};

    // The chunk CRCs (~10 µs for a 100 KB file) are checked by the consumer while it waits for
    // the first rows, not before the producer can start.
    let png = png_rgb8::parse_png_rgb8_unchecked(bytes, MAX_IMAGE_SIDE as usize)?;
    let (w, h) = (png.width, png.height);
    // The common shape only: square (no letterbox) and already at the chain's size.
    if w != h || smallest_max_size_dims(w, h, cfg.shortest_edge).is_some() {
        return None;
    }
    let crop = center_crop_rect(w, h, cfg.crop_fraction);
    let (aw, ah) = smallest_max_size_dims(crop.2, crop.3, cfg.shortest_edge)?;
    let (oh, ow) = super::smart_resize(ah, aw);
    let geo = Geometry {
        side: w,
        crop,
        area: (aw, ah),
        out: (oh, ow),
    };
    cv_area::LinearArea::with_enlarge(crop.2, crop.3, aw, ah, |area| {
        with_fast_plan(aw, ah, ow, oh, |plan, cy, s| {
            overlap(bytes, &png, &geo, area, (plan, cy, s), side)
        })
    })
    .flatten()
    .flatten()
}

/// The producer (inflate, on the helper) and the consumer (everything else, here), see the
/// module notes.
#[cfg(target_arch = "x86_64")]
fn overlap(
    bytes: &[u8],
    png: &super::png_rgb8::PngRgb8<'_>,
    geo: &Geometry,
    area: &mut super::cv_area::LinearArea,
    (plan, cy, s): (
        &super::pil_bicubic_avx2::HPlan,
        &super::pil_bicubic::Coeffs,
        &mut super::pil_bicubic::FastScratch,
    ),
    side: impl FnOnce(),
) -> Option<Pixels> {
    use super::pil_bicubic::v_row_into;
    use super::pil_bicubic_avx2 as v;
    use super::png_rgb8;

    let (h, stride) = (geo.side, geo.side * 3);
    let (cx0, cy0, cw, _) = geo.crop;
    let (aw, ah) = geo.area;
    let (oh, ow) = geo.out;
    let plane = ow * oh;
    let row_in = png.raw_row_len();
    let mut raw_buf = Vec::<u8>::with_capacity(h * row_in);
    let raw = RawRows {
        buf: raw_buf.as_mut_ptr(),
        len: h * row_in,
        row_in,
        rows: Default::default(),
        stopped: AtomicBool::new(false),
    };
    // Both outlive the join: the producer may still be normalising a row when the consumer
    // has given up on a broken frame.
    let mut out: Vec<f32> = Vec::with_capacity(3 * plane);
    let pstride = plan.stride();
    thread_local! {
        static RESAMPLED: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        static DATA: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    // Every row is written by the vertical pass before it is made (and read).
    let done = super::with_scratch(&RESAMPLED, oh * pstride, |resampled| {
        let deferred = Deferred {
            rows: resampled.as_mut_ptr(),
            row_len: pstride,
            width: ow,
            total: oh,
            planes: out.as_mut_ptr(),
            made: Default::default(),
            claimed: Default::default(),
            finished: Default::default(),
        };
        // Inflate, then normalise whatever rows the consumer has made by then (see
        // `BAND_ROWS` and `Deferred`).
        let producer = || {
            let ok = png
                .inflate_rows(BAND_ROWS, |band| raw.publish(band))
                .is_some();
            raw.stopped.store(true, Ordering::Release);
            if ok {
                while deferred.normalize_one() {}
            }
            ok
        };
        let consumer = || {
            side();
            if !png_rgb8::verify_crcs(bytes) {
                return None;
            }
            // Rows are unfiltered (every byte written) before the chain reads them.
            super::with_scratch(&DATA, h * stride, |data| {
                let mut rows = Rows {
                    raw: &raw,
                    data,
                    stride,
                    have: 0,
                };
                s.tmp.resize(RING * pstride, 0);
                let mut arow = vec![0u8; aw * 3];
                let mut idle = || deferred.normalize_one();
                let mut next_y = 0;
                for dy in 0..ah {
                    if !rows.ensure(cy0 + area.last_src_row(dy) + 1, &mut idle) {
                        return None;
                    }
                    let crop_row = |r: usize| &rows.data[(cy0 + r) * stride + cx0 * 3..][..cw * 3];
                    area.row(dy, crop_row, &mut arow);
                    let slot = dy % RING;
                    let hdst = &mut s.tmp[slot * pstride..(slot + 1) * pstride];
                    // SAFETY: plans exist only when AVX2 was detected.
                    unsafe { v::hrow(plan, &arow, &mut s.buf, hdst) };
                    while next_y < oh && cy.bounds[next_y].0 + cy.bounds[next_y].1 <= dy + 1 {
                        deferred.make_next(|row| v_row_into(plan, cy, &s.tmp, next_y, RING, row));
                        next_y += 1;
                    }
                }
                deferred.finish();
                (next_y == oh).then_some(())
            })
        };
        let (ok, made) = crate::beside::join(producer, consumer);
        ok && made.is_some()
    });
    if !done {
        return None;
    }
    // SAFETY: all `oh` rows were made and normalised (`Deferred::finish`, then the join), which
    // writes every value of the planes.
    unsafe { out.set_len(3 * plane) };
    Some((geo.out, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::{decode_image, preprocess_pixels};

    /// An RGB PNG.
    fn png(w: u32, h: u32, data: &[u8], filter: png::Filter) -> Vec<u8> {
        crate::preprocess::test_data::encode_png(w, h, png::ColorType::Rgb, data, filter)
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

    /// Several decodes at once: some find the helper busy and run both halves here, the
    /// others share the normalising with it; every result is the plain path's, to the bit.
    #[test]
    fn concurrent_overlapped_decodes_equal_sequential() {
        let cfg = ImageChainConfig::default();
        let data: Vec<u8> = (0..256 * 256 * 3)
            .map(|i| ((i * 31 + i / 777) % 256) as u8)
            .collect();
        let file = png(256, 256, &data, png::Filter::Paeth);
        let want = preprocess_pixels(&decode_image(&file).unwrap(), &cfg);
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for _ in 0..25 {
                        let got = decode_preprocess_overlapped(&file, &cfg).unwrap();
                        assert_eq!(got.0, want.0);
                        assert_eq!(got.1.len(), want.1.len());
                        assert!(
                            got.1
                                .iter()
                                .zip(&want.1)
                                .all(|(a, b)| a.to_bits() == b.to_bits())
                        );
                    }
                });
            }
        });
    }

    #[test]
    fn broken_stream_is_an_error_not_a_panic() {
        let data = vec![7u8; 256 * 256 * 3];
        let file = png(256, 256, &data, png::Filter::Sub);
        // Cut inside IDAT: the chunk walk fails, the generic decoder reports it.
        let cut = &file[..file.len() / 2];
        assert!(decode_preprocess_overlapped(cut, &ImageChainConfig::default()).is_err());
    }

    /// A 256×256 RGB PNG of the given filtered rows (filter byte + 768 bytes each).
    fn png_of_raw_rows(raw: &[u8]) -> Vec<u8> {
        let chunk = |out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]| {
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let start = out.len();
            out.extend_from_slice(kind);
            out.extend_from_slice(data);
            let crc = crc32fast::hash(&out[start..]);
            out.extend_from_slice(&crc.to_be_bytes());
        };
        let mut out = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&256u32.to_be_bytes());
        ihdr.extend_from_slice(&256u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &fdeflate::compress_to_vec(raw));
        chunk(&mut out, b"IEND", &[]);
        out
    }

    /// A bad filter byte anywhere (first row, band edges, last row) is an error, as in the
    /// plain decode; good rows decode as the plain path does.
    #[test]
    fn a_bad_filter_byte_on_either_side_is_an_error() {
        let cfg = ImageChainConfig::default();
        let row_in = 256 * 3 + 1;
        let mut raw = vec![0u8; 256 * row_in];
        for (r, row) in raw.chunks_exact_mut(row_in).enumerate() {
            row[0] = (r % 5) as u8;
            for (i, b) in row[1..].iter_mut().enumerate() {
                *b = (i * 7 + r * 13) as u8;
            }
        }
        let good = png_of_raw_rows(&raw);
        let want = preprocess_pixels(&decode_image(&good).unwrap(), &cfg);
        assert_eq!(decode_preprocess_overlapped(&good, &cfg).unwrap(), want);
        for bad_row in [0, 50, 95, 96, 97, 191, 192, 220, 255] {
            let mut raw = raw.clone();
            raw[bad_row * row_in] = 9;
            let file = png_of_raw_rows(&raw);
            assert!(decode_image(&file).is_err(), "row {bad_row}");
            assert!(
                decode_preprocess_overlapped(&file, &cfg).is_err(),
                "row {bad_row}"
            );
        }
    }

    /// The producer starts before the CRCs are checked; a corrupt chunk still fails the frame.
    #[test]
    fn a_bad_crc_fails_the_overlapped_decode() {
        let data: Vec<u8> = (0..256 * 256 * 3).map(|i| (i % 251) as u8).collect();
        let good = png(256, 256, &data, png::Filter::Paeth);
        let cfg = ImageChainConfig::default();
        assert!(decode_preprocess_overlapped(&good, &cfg).is_ok());
        // The last byte of the IDAT chunk's CRC (IEND is the final 12 bytes).
        let mut bad = good.clone();
        let at = bad.len() - 13;
        bad[at] ^= 0x40;
        assert!(decode_preprocess_overlapped(&bad, &cfg).is_err());
        assert!(decode_image(&bad).is_err());
    }
}
