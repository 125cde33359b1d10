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

use super::RgbImage;

const CN: usize = 3;
/// `INTER_RESIZE_COEF_BITS` / `INTER_RESIZE_COEF_SCALE` of OpenCV's fixed-point linear path.
const COEF_SCALE: f32 = 2048.0;

/// `cv2.resize(src, (dst_w, dst_h), interpolation=cv2.INTER_AREA)`.
pub fn resize_area(src: &RgbImage, dst_w: usize, dst_h: usize) -> RgbImage {
    assert!(dst_w > 0 && dst_h > 0 && src.width > 0 && src.height > 0);
    if dst_w == src.width && dst_h == src.height {
        return src.clone();
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
    linear_area_mode(src, dst_w, dst_h, inv_sx, sx, inv_sy, sy)
}

/// `resizeAreaFast_Invoker` for integer factors.
fn area_fast(src: &RgbImage, dst_w: usize, dst_h: usize, kx: usize, ky: usize) -> RgbImage {
    let mut out = vec![0u8; dst_w * dst_h * CN];
    let sstride = src.width * CN;
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
                    let row = (sy0 + yy) * sstride;
                    for xx in 0..kx {
                        sum += src.data[row + (dx * kx + xx) * CN + c] as i32;
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
fn area_generic(src: &RgbImage, dst_w: usize, dst_h: usize, sx: f64, sy: f64) -> RgbImage {
    let xtab = area_tab(src.width, dst_w, CN, sx);
    let ytab = area_tab(src.height, dst_h, 1, sy);
    let w = dst_w * CN;
    let mut out = vec![0u8; w * dst_h];
    let mut buf = vec![0f32; w];
    let mut sum = vec![0f32; w];
    let sstride = src.width * CN;
    let mut prev_dy = ytab[0].di;
    for yt in &ytab {
        let beta = yt.alpha;
        let dy = yt.di;
        let srow = &src.data[yt.si * sstride..(yt.si + 1) * sstride];
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
fn linear_area_mode(
    src: &RgbImage,
    dst_w: usize,
    dst_h: usize,
    inv_sx: f64,
    sx: f64,
    inv_sy: f64,
    sy: f64,
) -> RgbImage {
    let xc = area_mode_coeffs(src.width, dst_w, inv_sx, sx, true);
    let yc = area_mode_coeffs(src.height, dst_h, inv_sy, sy, false);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected at run time.
        return unsafe { linear_area_mode_avx2(src, dst_w, dst_h, &xc, &yc) };
    }
    linear_area_mode_body(src, dst_w, dst_h, &xc, &yc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn linear_area_mode_avx2(
    src: &RgbImage,
    dst_w: usize,
    dst_h: usize,
    xc: &[(usize, i32, i32)],
    yc: &[(usize, i32, i32)],
) -> RgbImage {
    linear_area_mode_body(src, dst_w, dst_h, xc, yc)
}

/// Per output element (`dx * CN + c`): byte offsets of pixels `s` and `s + 1` in the source row
/// (the latter with weight 0 past the edge) and their weights, as parallel arrays.
struct HTab {
    i0: Vec<u32>,
    i1: Vec<u32>,
    c0: Vec<i32>,
    c1: Vec<i32>,
}

/// Horizontal pass of one source row (int32 sums, as HResizeLinear keeps them).
///
/// # Safety
/// Every offset in `t` must be below `rowi.len()`.
#[inline(always)]
unsafe fn hrow(row: &[u8], rowi: &mut [i32], t: &HTab, h: &mut [i32]) {
    for (d, &p) in rowi.iter_mut().zip(row) {
        *d = p as i32;
    }
    let n = h.len();
    let (i0, i1, c0, c1) = (&t.i0[..n], &t.i1[..n], &t.c0[..n], &t.c1[..n]);
    for j in 0..n {
        // SAFETY: the caller guarantees the offsets are in bounds.
        h[j] = unsafe {
            *rowi.get_unchecked(i0[j] as usize) * c0[j]
                + *rowi.get_unchecked(i1[j] as usize) * c1[j]
        };
    }
}

#[inline(always)]
fn linear_area_mode_body(
    src: &RgbImage,
    dst_w: usize,
    dst_h: usize,
    xc: &[(usize, i32, i32)],
    yc: &[(usize, i32, i32)],
) -> RgbImage {
    let w = dst_w * CN;
    let sstride = src.width * CN;
    let mut t = HTab {
        i0: Vec::with_capacity(w),
        i1: Vec::with_capacity(w),
        c0: Vec::with_capacity(w),
        c1: Vec::with_capacity(w),
    };
    for &(s, c0, c1) in xc {
        assert!(s < src.width);
        for c in 0..CN {
            let (i1, c1) = if s + 1 < src.width && c1 != 0 {
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
    let mut rowi = vec![0i32; sstride];
    // Two cached horizontal rows (source rows `s` and `s + 1` have different parities).
    let mut slots = [vec![0i32; w], vec![0i32; w]];
    let mut tags = [usize::MAX; 2];
    let mut out = vec![0u8; w * dst_h];
    // Which elements of a row OpenCV computes with the SIMD formula (16 u8 lanes, then 8 lanes);
    // the rest use the scalar `(b0*S0 + b1*S1 + (1 << 21)) >> 22`.
    let mut vec_end = (w / 16) * 16;
    while w >= 8 && vec_end < w - 8 {
        vec_end += 8;
    }
    if w < 8 {
        vec_end = 0;
    }
    for (dy, &(s, b0, b1)) in yc.iter().enumerate() {
        let r0 = s.min(src.height - 1);
        let r1 = (s + 1).min(src.height - 1);
        for r in [r0, r1] {
            let k = r & 1;
            if tags[k] != r {
                // SAFETY: every offset in `t` is below `(s + 1) * CN <= sstride = rowi.len()`.
                unsafe {
                    hrow(
                        &src.data[r * sstride..(r + 1) * sstride],
                        &mut rowi,
                        &t,
                        &mut slots[k],
                    )
                };
                tags[k] = r;
            }
        }
        let s0 = &slots[r0 & 1];
        let s1 = &slots[r1 & 1];
        let drow = &mut out[dy * w..(dy + 1) * w];
        let (dv, ds) = drow.split_at_mut(vec_end);
        for ((d, &h0), &h1) in dv.iter_mut().zip(&s0[..vec_end]).zip(&s1[..vec_end]) {
            let a = (b0 * (h0 >> 4)) >> 16;
            let b = (b1 * (h1 >> 4)) >> 16;
            *d = ((a + b + 2) >> 2).clamp(0, 255) as u8;
        }
        for ((d, &h0), &h1) in ds.iter_mut().zip(&s0[vec_end..]).zip(&s1[vec_end..]) {
            *d = ((b0 as i64 * h0 as i64 + b1 as i64 * h1 as i64 + (1 << 21)) >> 22).clamp(0, 255)
                as u8;
        }
    }
    RgbImage::new(dst_w, dst_h, out)
}
