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
struct Coeffs {
    bounds: Vec<(usize, usize)>,
    ksize: usize,
    kk: Vec<i32>,
}

fn coeffs(in_size: usize, out_size: usize) -> Coeffs {
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
            kk[xx * ksize + x] = if k[x] < 0.0 { (-0.5 + v) as i32 } else { (0.5 + v) as i32 };
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
    let half = 1i32 << (PRECISION_BITS - 1);
    // Horizontal pass (Pillow skips a pass whose size does not change).
    let tmp = if out_w != src.width {
        let c = coeffs(src.width, out_w);
        let mut t = vec![0u8; out_w * src.height * 3];
        for y in 0..src.height {
            let row = &src.data[y * src.width * 3..(y + 1) * src.width * 3];
            for (xx, &(xmin, xmax)) in c.bounds.iter().enumerate() {
                let k = &c.kk[xx * c.ksize..xx * c.ksize + xmax];
                let mut ss = [half; 3];
                for (x, &kx) in k.iter().enumerate() {
                    let p = &row[(x + xmin) * 3..(x + xmin) * 3 + 3];
                    for ch in 0..3 {
                        ss[ch] = ss[ch].wrapping_add(p[ch] as i32 * kx);
                    }
                }
                for ch in 0..3 {
                    t[(y * out_w + xx) * 3 + ch] = clip8(ss[ch]);
                }
            }
        }
        RgbImage::new(out_w, src.height, t)
    } else {
        src.clone()
    };
    if out_h == tmp.height {
        return tmp;
    }
    let c = coeffs(tmp.height, out_h);
    let w3 = out_w * 3;
    let mut out = vec![0u8; w3 * out_h];
    for (yy, &(ymin, ymax)) in c.bounds.iter().enumerate() {
        let k = &c.kk[yy * c.ksize..yy * c.ksize + ymax];
        let drow = &mut out[yy * w3..(yy + 1) * w3];
        for (x, d) in drow.iter_mut().enumerate() {
            let mut ss = half;
            for (y, &ky) in k.iter().enumerate() {
                ss = ss.wrapping_add(tmp.data[(y + ymin) * w3 + x] as i32 * ky);
            }
            *d = clip8(ss);
        }
    }
    RgbImage::new(out_w, out_h, out)
}
