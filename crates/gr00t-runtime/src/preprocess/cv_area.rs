//! OpenCV `cv2.resize(..., interpolation=cv2.INTER_AREA)` for 3-channel `uint8` images, bit-exact.
//!
//! OpenCV (4.x, `imgproc/src/resize.cpp`) takes three different routes for `INTER_AREA`:
//! - both axes shrink by the same *integer* factor: `resizeAreaFast` (a box average; the factor-2
//!   case uses the SIMD `(a + b + c + d + 2) >> 2`, other factors `cvRound(sum * (1/area))`);
//! - both axes shrink (non-integer): `resizeArea`, an exact area filter accumulated in `f32`;
//! - any axis enlarges: the generic *linear* resizer with area-mode coefficients
//!   (`sx = floor(dx*scale)`, `fx = (dx+1) - (sx+1)/scale`, fractional part), in the
//!   `uint8` fixed-point path (11-bit coefficients) whose vertical SIMD pass rounds as
//!   `(((c0*(h0>>4))>>16) + ((c1*(h1>>4))>>16) + 2) >> 2`.
//!
//! The enlarge route is what the GR00T image chain hits on every frame (243 -> 256 after the
//! 95 % crop) and is checked bit-for-bit against the reference taps.

use super::{RgbImage, RgbView};

const CN: usize = 3;
/// `INTER_RESIZE_COEF_BITS` / `INTER_RESIZE_COEF_SCALE` of OpenCV's fixed-point linear path.
const COEF_SCALE: f32 = 2048.0;

/// `cv2.resize(src, (dst_w, dst_h), interpolation=cv2.INTER_AREA)`.
pub fn resize_area(src: &RgbImage, dst_w: usize, dst_h: usize) -> RgbImage {
    if dst_w == src.width && dst_h == src.height {
        return src.clone();
    }
    resize_area_view(RgbView::full(src), dst_w, dst_h)
}

/// [`resize_area`] of a borrowed rectangle (the centre crop, without copying it first).
pub fn resize_area_view(src: RgbView<'_>, dst_w: usize, dst_h: usize) -> RgbImage {
    assert!(dst_w > 0 && dst_h > 0 && src.width > 0 && src.height > 0);
    if dst_w == src.width && dst_h == src.height {
        return src.to_image();
    }
    // OpenCV: inv_scale = dsize/ssize, scale = 1/inv_scale (not ssize/dsize: the rounding differs).
    let inv_sx = dst_w as f64 / src.width as f64;
    let inv_sy = dst_h as f64 / src.height as f64;
    let sx = 1.0 / inv_sx;
    let sy = 1.0 / inv_sy;
    if sx >= 1.0 && sy >= 1.0 {
        let isx = sx.round_ties_even() as i64;
        let isy = sy.round_ties_even() as i64;
        if (sx - isx as f64).abs() < f64::EPSILON && (sy - isy as f64).abs() < f64::EPSILON {
            return area_fast(src, dst_w, dst_h, isx as usize, isy as usize);
        }
        return area_generic(src, dst_w, dst_h, sx, sy);
    }
    linear_area_mode(src, dst_w, dst_h)
}

/// `resizeAreaFast_Invoker` for integer factors.
fn area_fast(src: RgbView<'_>, dst_w: usize, dst_h: usize, kx: usize, ky: usize) -> RgbImage {
    let mut out = vec![0u8; dst_w * dst_h * CN];
    let fast2 = kx == 2 && ky == 2;
    let scale = 1.0f32 / (kx * ky) as f32;
    for dy in 0..dst_h {
        let sy0 = dy * ky;
        if sy0 + ky > src.height {
            // Cannot happen for exact integer ratios; OpenCV's border branch is not needed.
            continue;
        }
        for dx in 0..dst_w {
            for c in 0..CN {
                let mut sum: i32 = 0;
                for yy in 0..ky {
                    let row = src.row(sy0 + yy);
                    for xx in 0..kx {
                        sum += row[(dx * kx + xx) * CN + c] as i32;
                    }
                }
                out[(dy * dst_w + dx) * CN + c] = if fast2 {
                    ((sum + 2) >> 2) as u8
                } else {
                    sat_u8_f32(sum as f32 * scale)
                };
            }
        }
    }
    RgbImage::new(dst_w, dst_h, out)
}

/// `saturate_cast<uchar>(float)`: `cvRound` (round half to even), then clamp.
fn sat_u8_f32(v: f32) -> u8 {
    let r = v.round_ties_even();
    r.clamp(0.0, 255.0) as u8
}

/// One entry of OpenCV's `DecimateAlpha` table.
struct Decimate {
    di: usize,
    si: usize,
    alpha: f32,
}

/// `computeResizeAreaTab`.
fn area_tab(ssize: usize, dsize: usize, cn: usize, scale: f64) -> Vec<Decimate> {
    let mut tab = Vec::with_capacity(ssize * 2);
    for dx in 0..dsize {
        let fsx1 = dx as f64 * scale;
        let fsx2 = fsx1 + scale;
        let cell = scale.min(ssize as f64 - fsx1);
        let mut sx1 = fsx1.ceil() as i64;
        let mut sx2 = fsx2.floor() as i64;
        sx2 = sx2.min(ssize as i64 - 1);
        sx1 = sx1.min(sx2);
        if sx1 as f64 - fsx1 > 1e-3 {
            tab.push(Decimate {
                di: dx * cn,
                si: (sx1 - 1) as usize * cn,
                alpha: ((sx1 as f64 - fsx1) / cell) as f32,
            });
        }
        for sx in sx1..sx2 {
            tab.push(Decimate {
                di: dx * cn,
                si: sx as usize * cn,
                alpha: (1.0 / cell) as f32,
            });
        }
        if fsx2 - sx2 as f64 > 1e-3 {
            tab.push(Decimate {
                di: dx * cn,
                si: sx2 as usize * cn,
                alpha: ((fsx2 - sx2 as f64).min(1.0).min(cell) / cell) as f32,
            });
        }
    }
    tab
}

/// `ResizeArea_Invoker` (non-integer shrink), `f32` accumulation as OpenCV does for `uint8`.
fn area_generic(src: RgbView<'_>, dst_w: usize, dst_h: usize, sx: f64, sy: f64) -> RgbImage {
    let xtab = area_tab(src.width, dst_w, CN, sx);
    let ytab = area_tab(src.height, dst_h, 1, sy);
    let w = dst_w * CN;
    let mut out = vec![0u8; w * dst_h];
    let mut buf = vec![0f32; w];
    let mut sum = vec![0f32; w];
    let mut prev_dy = ytab[0].di;
    for yt in &ytab {
        let beta = yt.alpha;
        let dy = yt.di;
        let srow = src.row(yt.si);
        buf.iter_mut().for_each(|b| *b = 0.0);
        for xt in &xtab {
            for c in 0..CN {
                buf[xt.di + c] += srow[xt.si + c] as f32 * xt.alpha;
            }
        }
        if dy != prev_dy {
            let drow = &mut out[prev_dy * w..(prev_dy + 1) * w];
            for dx in 0..w {
                drow[dx] = sat_u8_f32(sum[dx]);
                sum[dx] = beta * buf[dx];
            }
            prev_dy = dy;
        } else {
            for dx in 0..w {
                sum[dx] += beta * buf[dx];
            }
        }
    }
    let drow = &mut out[prev_dy * w..(prev_dy + 1) * w];
    for dx in 0..w {
        drow[dx] = sat_u8_f32(sum[dx]);
    }
    RgbImage::new(dst_w, dst_h, out)
}

/// Area-mode linear coefficients for one axis: source index and the fixed-point weights of
/// pixels `s` and `s + 1`.
fn area_mode_coeffs(
    src: usize,
    dst: usize,
    inv_scale: f64,
    scale: f64,
    clamp_edge: bool,
) -> Vec<(usize, i32, i32)> {
    (0..dst)
        .map(|d| {
            let mut s = (d as f64 * scale).floor() as i64;
            let mut f = ((d + 1) as f64 - (s + 1) as f64 * inv_scale) as f32;
            f = if f <= 0.0 { 0.0 } else { f - f.floor() };
            if clamp_edge && s >= src as i64 - 1 {
                // OpenCV forces the last columns onto the edge pixel with weight 1.
                s = src as i64 - 1;
                f = 0.0;
            }
            let c0 = ((1.0f32 - f) * COEF_SCALE).round_ties_even() as i32;
            let c1 = (f * COEF_SCALE).round_ties_even() as i32;
            (s.max(0) as usize, c0, c1)
        })
        .collect()
}

/// The generic linear resizer in area mode (`INTER_AREA` with an enlarged axis), `uint8` path.
fn linear_area_mode(src: RgbView<'_>, dst_w: usize, dst_h: usize) -> RgbImage {
    LinearArea::with_enlarge(src.width, src.height, dst_w, dst_h, |plan| {
        plan_rows(plan, src, dst_w, dst_h)
    })
    .expect("an enlarging size pair has a plan")
}

/// Every output row of `plan` from `src`.
fn plan_rows(plan: &mut LinearArea, src: RgbView<'_>, dst_w: usize, dst_h: usize) -> RgbImage {
    let w = dst_w * CN;
    let mut out = vec![0u8; w * dst_h];
    for (dy, drow) in out.chunks_exact_mut(w).enumerate() {
        plan.row(dy, |r| src.row(r), drow);
    }
    RgbImage::new(dst_w, dst_h, out)
}

/// Per output element (`dx * CN + c`): byte offsets of pixels `s` and `s + 1` in the source row
/// (the latter with weight 0 past the edge) and their weights, as parallel arrays.
struct HTab {
    i0: Vec<u32>,
    i1: Vec<u32>,
    c0: Vec<i32>,
    c1: Vec<i32>,
}

/// Horizontal pass of one source row, elements `from..` (int32 sums, as HResizeLinear keeps
/// them).
fn hrow_scalar(row: &[u8], t: &HTab, h: &mut [i32], from: usize) {
    for j in from..h.len() {
        h[j] = row[t.i0[j] as usize] as i32 * t.c0[j] + row[t.i1[j] as usize] as i32 * t.c1[j];
    }
}

/// The vector formula of `VResizeLinearVec_32s8u` for elements `from..to`.
fn vrow_vec_formula(
    h0: &[i32],
    h1: &[i32],
    b0: i32,
    b1: i32,
    out: &mut [u8],
    from: usize,
    to: usize,
) {
    for j in from..to {
        let a = (b0 * (h0[j] >> 4)) >> 16;
        let b = (b1 * (h1[j] >> 4)) >> 16;
        out[j] = ((a + b + 2) >> 2).clamp(0, 255) as u8;
    }
}

/// OpenCV's area-mode linear resize of a `src_w x src_h` RGB image, one output row at a time
/// (so a caller can feed source rows as they arrive): tables, plus the two cached horizontal
/// rows (source rows `s` and `s + 1` have different parities).
pub(super) struct LinearArea {
    t: HTab,
    #[cfg(target_arch = "x86_64")]
    blocks: Option<super::cv_area_avx2::HBlocks>,
    avx2: bool,
    yc: Vec<(usize, i32, i32)>,
    src_h: usize,
    w: usize,
    vec_end: usize,
    slots: [Vec<i32>; 2],
    tags: [usize; 2],
}

impl LinearArea {
    /// `allow_simd`: use the AVX2 passes where the CPU has them (tests turn it off to get
    /// the scalar reference).
    fn new(
        src_w: usize,
        src_h: usize,
        dst_w: usize,
        xc: &[(usize, i32, i32)],
        yc: Vec<(usize, i32, i32)>,
        allow_simd: bool,
    ) -> Self {
        let w = dst_w * CN;
        let mut t = HTab {
            i0: Vec::with_capacity(w),
            i1: Vec::with_capacity(w),
            c0: Vec::with_capacity(w),
            c1: Vec::with_capacity(w),
        };
        for &(s, c0, c1) in xc {
            assert!(s < src_w);
            for c in 0..CN {
                let (i1, c1) = if s + 1 < src_w && c1 != 0 {
                    ((s + 1) * CN + c, c1)
                } else {
                    (s * CN + c, 0)
                };
                t.i0.push((s * CN + c) as u32);
                t.i1.push(i1 as u32);
                t.c0.push(c0);
                t.c1.push(c1);
            }
        }
        #[cfg(target_arch = "x86_64")]
        let avx2 = allow_simd && std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = {
            let _ = allow_simd;
            false
        };
        #[cfg(target_arch = "x86_64")]
        let blocks = if avx2 {
            super::cv_area_avx2::HBlocks::new(&t.i0, &t.i1, &t.c0, &t.c1, src_w * CN)
        } else {
            None
        };
        // Which elements of a row OpenCV computes with the SIMD formula (16 u8 lanes, then 8
        // lanes); the rest use the scalar `(b0*S0 + b1*S1 + (1 << 21)) >> 22`.
        let mut vec_end = (w / 16) * 16;
        while w >= 8 && vec_end < w - 8 {
            vec_end += 8;
        }
        if w < 8 {
            vec_end = 0;
        }
        LinearArea {
            t,
            #[cfg(target_arch = "x86_64")]
            blocks,
            avx2,
            yc,
            src_h,
            w,
            vec_end,
            slots: [vec![0i32; w], vec![0i32; w]],
            tags: [usize::MAX; 2],
        }
    }

    /// The plan for an enlarging `INTER_AREA` resize, `None` when OpenCV takes another route.
    pub(super) fn for_enlarge(
        src_w: usize,
        src_h: usize,
        dst_w: usize,
        dst_h: usize,
    ) -> Option<Self> {
        let inv_sx = dst_w as f64 / src_w as f64;
        let inv_sy = dst_h as f64 / src_h as f64;
        let (sx, sy) = (1.0 / inv_sx, 1.0 / inv_sy);
        if sx >= 1.0 && sy >= 1.0 {
            return None;
        }
        let xc = area_mode_coeffs(src_w, dst_w, inv_sx, sx, true);
        let yc = area_mode_coeffs(src_h, dst_h, inv_sy, sy, false);
        Some(Self::new(src_w, src_h, dst_w, &xc, yc, true))
    }

    /// Run `f` with the plan of [`Self::for_enlarge`] (`None` where that has none). The plan
    /// depends only on the sizes, every frame of a camera has the same ones, and building it
    /// takes ~10 µs for 243 -> 256 (a twentieth of the resize itself), so the thread keeps
    /// its last plan (taken out while in use; the row cache is reset for each frame).
    pub(super) fn with_enlarge<R>(
        src_w: usize,
        src_h: usize,
        dst_w: usize,
        dst_h: usize,
        f: impl FnOnce(&mut LinearArea) -> R,
    ) -> Option<R> {
        type Kept = ((usize, usize, usize, usize), LinearArea);
        thread_local! {
            static LAST: std::cell::Cell<Option<Box<Kept>>> = const { std::cell::Cell::new(None) };
        }
        let key = (src_w, src_h, dst_w, dst_h);
        let mut kept = match LAST.take() {
            Some(k) if k.0 == key => k,
            _ => Box::new((key, Self::for_enlarge(src_w, src_h, dst_w, dst_h)?)),
        };
        kept.1.tags = [usize::MAX; 2];
        let r = f(&mut kept.1);
        LAST.set(Some(kept));
        Some(r)
    }

    /// The last source row output row `dy` reads.
    pub(super) fn last_src_row(&self, dy: usize) -> usize {
        (self.yc[dy].0 + 1).min(self.src_h - 1)
    }

    /// Output row `dy` (`dst_w * 3` bytes) from source rows given by `src`.
    pub(super) fn row<'s>(&mut self, dy: usize, src: impl Fn(usize) -> &'s [u8], drow: &mut [u8]) {
        let (s, b0, b1) = self.yc[dy];
        let r0 = s.min(self.src_h - 1);
        let r1 = (s + 1).min(self.src_h - 1);
        for r in [r0, r1] {
            let k = r & 1;
            if self.tags[k] != r {
                let row = src(r);
                #[allow(unused_mut)]
                let mut from = 0;
                #[cfg(target_arch = "x86_64")]
                if let Some(b) = &self.blocks {
                    // SAFETY: blocks exist only when AVX2 was detected; they were built for
                    // rows of `src_w * 3` bytes, which `hrow` asserts.
                    unsafe { super::cv_area_avx2::hrow(row, b, &mut self.slots[k]) };
                    from = b.len();
                }
                hrow_scalar(row, &self.t, &mut self.slots[k], from);
                self.tags[k] = r;
            }
        }
        let (w, vec_end) = (self.w, self.vec_end);
        let s0 = &self.slots[r0 & 1];
        let s1 = &self.slots[r1 & 1];
        let drow = &mut drow[..w];
        #[allow(unused_mut)]
        let mut from = 0;
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `avx2` is set only when AVX2 was detected.
            unsafe { super::cv_area_avx2::vrow(s0, s1, b0, b1, drow, vec_end) };
            from = vec_end;
        }
        vrow_vec_formula(s0, s1, b0, b1, drow, from, vec_end);
        for j in vec_end..w {
            drow[j] = ((b0 as i64 * s0[j] as i64 + b1 as i64 * s1[j] as i64 + (1 << 21)) >> 22)
                .clamp(0, 255) as u8;
        }
    }
}

#[cfg(test)]
fn linear_area_mode_body(
    src: RgbView<'_>,
    dst_w: usize,
    dst_h: usize,
    xc: &[(usize, i32, i32)],
    yc: Vec<(usize, i32, i32)>,
    allow_simd: bool,
) -> RgbImage {
    let mut plan = LinearArea::new(src.width, src.height, dst_w, xc, yc, allow_simd);
    plan_rows(&mut plan, src, dst_w, dst_h)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::preprocess::test_data::random_image;

    /// The dispatched (AVX2 where present) enlarge equals the scalar loops, on crops too.
    #[test]
    fn linear_area_mode_simd_equals_scalar() {
        let sizes = [
            (243, 243, 256, 256),
            (5, 7, 9, 11),
            (16, 16, 17, 17),
            (100, 37, 131, 50),
            (6, 6, 256, 256),
            (200, 3, 257, 4),
            (33, 90, 34, 300),
        ];
        for (i, &(sw, sh, dw, dh)) in sizes.iter().enumerate() {
            let big = random_image(sw + 13, sh + 13, i as u64);
            for view in [
                RgbView::full(&random_image(sw, sh, 99 + i as u64)),
                RgbView::crop(&big, 6, 7, sw, sh),
            ] {
                let (inv_sx, inv_sy) = (dw as f64 / sw as f64, dh as f64 / sh as f64);
                let xc = area_mode_coeffs(sw, dw, inv_sx, 1.0 / inv_sx, true);
                let yc = area_mode_coeffs(sh, dh, inv_sy, 1.0 / inv_sy, false);
                let want = linear_area_mode_body(view, dw, dh, &xc, yc, false);
                let got = resize_area_view(view, dw, dh);
                assert_eq!(got, want, "{sw}x{sh} -> {dw}x{dh}");
                assert_eq!(resize_area(&view.to_image(), dw, dh), want);
            }
        }
    }
}
