//! Pillow's `Image.resize(size)` with the default `BICUBIC` filter for RGB images, bit-exact.
//!
//! Mirrors `libImaging/Resample.c`: separable convolution with the a = -0.5 cubic kernel,
//! widened by the downscale factor (antialiasing), double-precision coefficients normalised per
//! output pixel and quantised to 22 fractional bits (rounded half away from zero), `int`
//! accumulation from `1 << 21`, `>> 22` and clamp. Horizontal pass first into an 8-bit
//! intermediate, then vertical.

use super::RgbImage;

const PRECISION_BITS: u32 = 32 - 8 - 2;
const SUPPORT: f64 = 2.0;

fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Per output pixel: first source index and the fixed-point weights (`precompute_coeffs` +
/// `normalize_coeffs_8bpc`).
pub(super) struct Coeffs {
    pub(super) bounds: Vec<(usize, usize)>,
    pub(super) ksize: usize,
    pub(super) kk: Vec<i32>,
}

pub(super) fn coeffs(in_size: usize, out_size: usize) -> Coeffs {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = SUPPORT * filterscale;
    let ksize = support.ceil() as usize * 2 + 1;
    let mut bounds = Vec::with_capacity(out_size);
    let mut kk = vec![0i32; out_size * ksize];
    let mut k = vec![0f64; ksize];
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C `(int)` truncates toward zero.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize - xmin;
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(xmax) {
            let w = bicubic((x as f64 + xmin as f64 - center + 0.5) * ss);
            *kx = w;
            ww += w;
        }
        for x in 0..xmax {
            if ww != 0.0 {
                k[x] /= ww;
            }
            let v = k[x] * (1u32 << PRECISION_BITS) as f64;
            kk[xx * ksize + x] = if k[x] < 0.0 {
                (-0.5 + v) as i32
            } else {
                (0.5 + v) as i32
            };
        }
        bounds.push((xmin, xmax));
    }
    Coeffs { bounds, ksize, kk }
}

#[inline]
fn clip8(v: i32) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// `img.resize((out_w, out_h))` (BICUBIC) as Pillow computes it for an RGB image.
pub fn resize_bicubic(src: &RgbImage, out_w: usize, out_h: usize) -> RgbImage {
    if out_w == src.width && out_h == src.height {
        return src.clone();
    }
    let mut out = vec![0u8; out_w * out_h * 3];
    let w3 = out_w * 3;
    let fast = resize_rows_fast(src, out_w, out_h, |y, row| {
        out[y * w3..(y + 1) * w3].copy_from_slice(row)
    });
    if fast {
        return RgbImage::new(out_w, out_h, out);
    }
    resize_bicubic_portable(src, out_w, out_h)
}

/// [`resize_bicubic`] then [`super::normalize_chw`], without the intermediate image where the
/// vector path applies (each finished row is normalised straight into the planes).
pub fn resize_bicubic_normalized(src: &RgbImage, out_w: usize, out_h: usize) -> Vec<f32> {
    let plane = out_w * out_h;
    let mut out: Vec<f32> = Vec::with_capacity(3 * plane);
    let fast = {
        let dst = &mut out.spare_capacity_mut()[..3 * plane];
        resize_rows_fast(src, out_w, out_h, |y, row| {
            super::normalize::normalize_row(row, y, plane, dst)
        })
    };
    if fast {
        // SAFETY: the fast path emitted every row 0..out_h, and `normalize_row` wrote all three
        // planes' `out_w` values of each.
        unsafe { out.set_len(3 * plane) };
        return out;
    }
    super::normalize_chw(&resize_bicubic(src, out_w, out_h))
}

/// The AVX2 resample, each output row handed to `emit(y, row)` in order; `false` (nothing
/// emitted) where it does not apply: no AVX2, a pass Pillow would skip, or a kernel too wide.
fn resize_rows_fast(
    src: &RgbImage,
    out_w: usize,
    out_h: usize,
    #[allow(unused_mut)] mut emit: impl FnMut(usize, &[u8]),
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use super::pil_bicubic_avx2 as v;
        let done = with_fast_plan(src.width, src.height, out_w, out_h, |plan, cy, s| {
            let stride = plan.stride();
            // Every element is written by `hrow` before it is read.
            s.tmp.resize(src.height * stride, 0);
            let w3 = src.width * 3;
            for (r, dst) in s.tmp.chunks_exact_mut(stride).enumerate() {
                // SAFETY: plans exist only when AVX2 was detected.
                unsafe { v::hrow(plan, &src.data[r * w3..(r + 1) * w3], &mut s.buf, dst) };
            }
            for y in 0..out_h {
                v_row(plan, cy, s, y, src.height);
                emit(y, &s.row[..out_w * 3]);
            }
        });
        done.is_some()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src, out_w, out_h, &mut emit);
        false
    }
}

/// Scratch of the vector resample: horizontal-pass rows (`stride` i16 each, indexed by source
/// row), a widened source row, and one output row.
#[cfg(target_arch = "x86_64")]
#[derive(Default)]
pub(super) struct FastScratch {
    pub(super) tmp: Vec<i16>,
    pub(super) buf: Vec<i16>,
    pub(super) row: Vec<u8>,
}

/// Run `f` with the vector plan for `(in_w, in_h) -> (out_w, out_h)`; `None` where the vector
/// path does not apply (see [`resize_rows_fast`]). The plan depends only on the sizes and every
/// frame of a camera has the same ones, so the last plan and the scratch stay with the thread
/// (taken out while in use).
#[cfg(target_arch = "x86_64")]
pub(super) fn with_fast_plan<R>(
    in_w: usize,
    in_h: usize,
    out_w: usize,
    out_h: usize,
    f: impl FnOnce(&super::pil_bicubic_avx2::HPlan, &Coeffs, &mut FastScratch) -> R,
) -> Option<R> {
    use super::pil_bicubic_avx2 as v;
    /// Sizes and block width, the plan for them (`None`: not applicable), scratch.
    type State = (
        (usize, usize, usize, usize, usize),
        Option<(v::HPlan, Coeffs)>,
        FastScratch,
    );
    thread_local! {
        static LAST: std::cell::Cell<Option<Box<State>>> = const { std::cell::Cell::new(None) };
    }
    if !std::arch::is_x86_feature_detected!("avx2") || out_w == in_w || out_h == in_h {
        return None;
    }
    let width = if v::wide() { 32 } else { 16 };
    let key = (in_w, in_h, out_w, out_h, width);
    let mut st = LAST
        .take()
        .unwrap_or_else(|| Box::new(((0, 0, 0, 0, 0), None, FastScratch::default())));
    if st.0 != key {
        let cx = coeffs(in_w, out_w);
        let cy = coeffs(in_h, out_h);
        st.1 = v::HPlan::new(&cx, in_w, out_w, width)
            .filter(|_| cy.bounds.iter().all(|&(_, n)| n <= v::MAX_TAPS))
            .map(|p| (p, cy));
        st.0 = key;
    }
    let (_, plan, scratch) = &mut *st;
    let r = plan.as_ref().map(|(p, cy)| {
        scratch.row.resize(p.stride(), 0);
        f(p, cy, scratch)
    });
    LAST.set(Some(st));
    r
}

/// Vertical pass for output row `y` into `s.row`, from the horizontal rows in `s.tmp`, where
/// horizontal row `r` sits at slot `r % ring` (`ring` = all rows for a whole-image buffer, or
/// a few for a sliding window).
#[cfg(target_arch = "x86_64")]
pub(super) fn v_row(
    plan: &super::pil_bicubic_avx2::HPlan,
    cy: &Coeffs,
    s: &mut FastScratch,
    y: usize,
    ring: usize,
) {
    v_row_into(plan, cy, &s.tmp, y, ring, &mut s.row);
}

/// [`v_row`] from horizontal rows `tmp` into `out` (at least `plan.stride()` bytes; the row's
/// pixels are its first `3 * out_w`).
#[cfg(target_arch = "x86_64")]
pub(super) fn v_row_into(
    plan: &super::pil_bicubic_avx2::HPlan,
    cy: &Coeffs,
    tmp: &[i16],
    y: usize,
    ring: usize,
    out: &mut [u8],
) {
    let stride = plan.stride();
    let (ymin, n) = cy.bounds[y];
    let mut rows = [&[][..]; super::pil_bicubic_avx2::MAX_TAPS];
    for (t, r) in rows.iter_mut().zip(ymin..ymin + n) {
        let slot = r % ring;
        *t = &tmp[slot * stride..(slot + 1) * stride];
    }
    let k = &cy.kk[y * cy.ksize..y * cy.ksize + n];
    // SAFETY: plans exist only when AVX2 was detected.
    unsafe { super::pil_bicubic_avx2::vrow(plan, &rows[..n], k, out, stride) };
}

/// The portable resample (also the reference the vector path is tested against).
fn resize_bicubic_portable(src: &RgbImage, out_w: usize, out_h: usize) -> RgbImage {
    // Horizontal pass (Pillow skips a pass whose size does not change). It is run as the
    // vertical kernel on the transposed image: integer sums do not depend on the order of the
    // additions, so the bytes are identical and the inner loop vectorises.
    let tmp = if out_w != src.width {
        let t = transpose(&src.data, src.width, src.height);
        let r = vertical(&t, src.height, src.width, out_w);
        RgbImage::new(out_w, src.height, transpose(&r, src.height, out_w))
    } else {
        src.clone()
    };
    if out_h == tmp.height {
        return tmp;
    }
    RgbImage::new(out_w, out_h, vertical(&tmp.data, out_w, tmp.height, out_h))
}

/// HWC `[h][w][3]` -> `[w][h][3]` (in tiles, so reads and writes stay in cache).
fn transpose(data: &[u8], w: usize, h: usize) -> Vec<u8> {
    const T: usize = 16;
    assert_eq!(data.len(), w * h * 3);
    let mut out = vec![0u8; data.len()];
    for by in (0..h).step_by(T) {
        let ey = (by + T).min(h);
        for bx in (0..w).step_by(T) {
            let ex = (bx + T).min(w);
            for y in by..ey {
                for x in bx..ex {
                    let s = (y * w + x) * 3;
                    let d = (x * h + y) * 3;
                    // SAFETY: x < w and y < h, so both 3-byte ranges lie inside the
                    // `w * h * 3`-byte buffers (checked above).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            data.as_ptr().add(s),
                            out.as_mut_ptr().add(d),
                            3,
                        );
                    }
                }
            }
        }
    }
    out
}

/// Pillow's vertical 8-bit pass: `in_h` rows of `w` RGB pixels -> `out_h` rows. The i32
/// multiply only vectorises well with AVX2 (`vpmulld`), so that build is picked at run time;
/// both compile the same integer arithmetic.
fn vertical(data: &[u8], w: usize, in_h: usize, out_h: usize) -> Vec<u8> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected at run time.
        return unsafe { vertical_avx2(data, w, in_h, out_h) };
    }
    vertical_body(data, w, in_h, out_h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn vertical_avx2(data: &[u8], w: usize, in_h: usize, out_h: usize) -> Vec<u8> {
    vertical_body(data, w, in_h, out_h)
}

#[inline(always)]
fn vertical_body(data: &[u8], w: usize, in_h: usize, out_h: usize) -> Vec<u8> {
    let half = 1i32 << (PRECISION_BITS - 1);
    let w3 = w * 3;
    let c = coeffs(in_h, out_h);
    let mut out = vec![0u8; w3 * out_h];
    // Row-wise accumulation (same sums as Pillow per pixel; wrapping i32 adds do not depend on
    // the order) in register-sized blocks so the inner loop vectorises.
    const B: usize = 32;
    let mut acc = vec![0i32; w3];
    for (yy, &(ymin, ymax)) in c.bounds.iter().enumerate() {
        let k = &c.kk[yy * c.ksize..yy * c.ksize + ymax];
        let rows = &data[ymin * w3..(ymin + ymax) * w3];
        let orow = &mut out[yy * w3..(yy + 1) * w3];
        let full = w3 / B * B;
        for x0 in (0..full).step_by(B) {
            let mut a = [half; B];
            for (y, &ky) in k.iter().enumerate() {
                let r: &[u8; B] = rows[y * w3 + x0..y * w3 + x0 + B].try_into().unwrap();
                for i in 0..B {
                    a[i] = a[i].wrapping_add(r[i] as i32 * ky);
                }
            }
            let o: &mut [u8; B] = (&mut orow[x0..x0 + B]).try_into().unwrap();
            for i in 0..B {
                o[i] = clip8(a[i]);
            }
        }
        let acc = &mut acc[full..];
        acc.fill(half);
        for (y, &ky) in k.iter().enumerate() {
            let row = &rows[y * w3 + full..(y + 1) * w3];
            for (a, &p) in acc.iter_mut().zip(row) {
                *a = a.wrapping_add(p as i32 * ky);
            }
        }
        for (d, &a) in orow[full..].iter_mut().zip(acc.iter()) {
            *d = clip8(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::preprocess::test_data::random_image;

    /// The dispatched resample (AVX-512BW or AVX2 where present, both forced in turn) and
    /// the fused normalisation equal the portable code, for the chain's size and for odd
    /// up/down scales.
    #[test]
    fn vector_path_equals_portable() {
        let sizes = [
            (256, 256, 252, 252),
            (256, 256, 280, 224),
            (9, 5, 4, 3),
            (17, 33, 40, 11),
            (300, 200, 112, 168),
            (5, 5, 1, 1),
            (64, 64, 64, 48),
            (70, 70, 23, 69),
        ];
        for narrow in [false, true] {
            set_narrow_only(narrow);
            for (i, &(sw, sh, dw, dh)) in sizes.iter().enumerate() {
                let img = random_image(sw, sh, i as u64);
                let want = resize_bicubic_portable(&img, dw, dh);
                let what = format!("{sw}x{sh} -> {dw}x{dh}, narrow {narrow}");
                assert_eq!(resize_bicubic(&img, dw, dh), want, "{what}");
                let norm = resize_bicubic_normalized(&img, dw, dh);
                let want_norm = crate::preprocess::normalize_chw(&want);
                assert_eq!(norm.len(), want_norm.len());
                assert!(
                    norm.iter()
                        .zip(&want_norm)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{what}"
                );
            }
        }
        set_narrow_only(false);
    }

    /// Force the AVX2 kernels even where AVX-512BW exists (no-op elsewhere).
    fn set_narrow_only(on: bool) {
        #[cfg(target_arch = "x86_64")]
        super::super::pil_bicubic_avx2::NARROW_ONLY.store(on, std::sync::atomic::Ordering::Relaxed);
        let _ = on;
    }
}
