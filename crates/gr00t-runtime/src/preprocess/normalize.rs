//! `(v - 127.5) / 127.5` in f32, HWC u8 rows -> CHW planes, with an AVX2+FMA row routine that
//! gives the same floats.
//!
//! The vector form divides without `vdivps`: `q = x * (1/127.5)`, then one Newton step
//! `q + fma(-q, 127.5, x) * (1/127.5)`. For the 256 possible inputs that equals the correctly
//! rounded quotient (checked exhaustively by a test), which is what the scalar division gives.

use std::mem::MaybeUninit;

/// The reference formula for one byte.
pub fn normalize_value(v: u8) -> f32 {
    (v as f32 - 127.5f32) / 127.5f32
}

/// Normalise row `y` (`row`: `w` RGB pixels) into `out`, three planes of `plane` values each
/// (CHW), at offset `y * w` of every plane.
pub fn normalize_row(row: &[u8], y: usize, plane: usize, out: &mut [MaybeUninit<f32>]) {
    let w = row.len() / 3;
    assert!(row.len() == w * 3 && out.len() >= 3 * plane && (y + 1) * w <= plane);
    let (r, rest) = out.split_at_mut(plane);
    let (g, b) = rest.split_at_mut(plane);
    let at = y * w..(y + 1) * w;
    normalize_row_planes(row, [&mut r[at.clone()], &mut g[at.clone()], &mut b[at]]);
}

/// Normalise one row of `w` RGB pixels into its `w` values in each of the three planes (for a
/// caller whose threads each own different rows of the planes).
pub fn normalize_row_planes(row: &[u8], planes: [&mut [MaybeUninit<f32>]; 3]) {
    let w = row.len() / 3;
    assert!(row.len() == w * 3 && planes.iter().all(|p| p.len() == w));
    let mut from = 0;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        let ptrs = [0, 1, 2].map(|c| planes[c].as_ptr() as *mut f32);
        // SAFETY: AVX2 and FMA were detected at run time; each pointer has `w` values (checked
        // above) and comes from a unique borrow.
        from = unsafe { x86::normalize_row_avx2(row, ptrs) };
    }
    let [r, g, b] = planes;
    for x in from..w {
        r[x].write(normalize_value(row[x * 3]));
        g[x].write(normalize_value(row[x * 3 + 1]));
        b[x].write(normalize_value(row[x * 3 + 2]));
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `pshufb` masks picking channel `c` of 16 pixels from the three 16-byte thirds of 48
    /// bytes (0x80 = zero).
    const fn masks() -> [[[u8; 16]; 3]; 3] {
        let mut m = [[[0x80u8; 16]; 3]; 3];
        let mut c = 0;
        while c < 3 {
            let mut i = 0;
            while i < 16 {
                let src = 3 * i + c;
                m[c][src / 16][i] = (src % 16) as u8;
                i += 1;
            }
            c += 1;
        }
        m
    }
    const MASKS: [[[u8; 16]; 3]; 3] = masks();

    /// Whole groups of 16 pixels; returns how many pixels were done.
    ///
    /// # Safety
    /// AVX2 and FMA must be available; each of `planes` must be writable for `row.len() / 3`
    /// values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn normalize_row_avx2(row: &[u8], planes: [*mut f32; 3]) -> usize {
        let w = row.len() / 3;
        let groups = w / 16;
        let half = _mm256_set1_ps(127.5);
        let inv = _mm256_set1_ps(1.0 / 127.5);
        let m: [[__m128i; 3]; 3] = std::array::from_fn(|c| {
            // SAFETY: each mask is 16 bytes.
            std::array::from_fn(|k| unsafe {
                _mm_loadu_si128(MASKS[c][k].as_ptr() as *const __m128i)
            })
        });
        let norm = |v: __m128i| {
            let x = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), half);
            let q = _mm256_mul_ps(x, inv);
            let r = _mm256_fnmadd_ps(q, half, x);
            _mm256_fmadd_ps(r, inv, q)
        };
        for g in 0..groups {
            // SAFETY: pixels 16g..16g+16 are inside the row, and their plane slots inside `out`.
            unsafe {
                let p = row.as_ptr().add(48 * g);
                let v = [
                    _mm_loadu_si128(p as *const __m128i),
                    _mm_loadu_si128(p.add(16) as *const __m128i),
                    _mm_loadu_si128(p.add(32) as *const __m128i),
                ];
                for (c, mc) in m.iter().enumerate() {
                    let ch = _mm_or_si128(
                        _mm_or_si128(_mm_shuffle_epi8(v[0], mc[0]), _mm_shuffle_epi8(v[1], mc[1])),
                        _mm_shuffle_epi8(v[2], mc[2]),
                    );
                    let dst = planes[c].add(16 * g);
                    _mm256_storeu_ps(dst, norm(ch));
                    _mm256_storeu_ps(dst.add(8), norm(_mm_srli_si128(ch, 8)));
                }
            }
        }
        groups * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_routine_equals_the_formula_for_every_byte_and_width() {
        for w in [1usize, 15, 16, 17, 85, 252, 256] {
            let h = 2;
            let data: Vec<u8> = (0..w * h * 3)
                .map(|i| ((i * 37 + i / 5) % 256) as u8)
                .collect();
            let mut out = vec![MaybeUninit::new(f32::NAN); 3 * w * h];
            for y in 0..h {
                normalize_row(&data[y * w * 3..(y + 1) * w * 3], y, w * h, &mut out);
            }
            for y in 0..h {
                for x in 0..w {
                    for c in 0..3 {
                        // SAFETY: every slot was written (or holds the NaN filler, which fails).
                        let got = unsafe { out[c * w * h + y * w + x].assume_init() };
                        let want = normalize_value(data[(y * w + x) * 3 + c]);
                        assert_eq!(got.to_bits(), want.to_bits(), "w {w} ({x},{y}) c {c}");
                    }
                }
            }
        }
        // Every byte value through the vector path (16 pixels x 3 channels = 48 per group).
        let all: Vec<u8> = (0..=255u8).cycle().take(48 * 16).collect();
        let w = all.len() / 3;
        let mut out = vec![MaybeUninit::new(f32::NAN); all.len()];
        normalize_row(&all, 0, w, &mut out);
        for (x, px) in all.chunks(3).enumerate() {
            for c in 0..3 {
                // SAFETY: written above.
                let got = unsafe { out[c * w + x].assume_init() };
                assert_eq!(got.to_bits(), normalize_value(px[c]).to_bits());
            }
        }
    }
}
