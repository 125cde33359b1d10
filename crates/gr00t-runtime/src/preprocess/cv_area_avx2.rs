//! AVX2 passes of OpenCV's fixed-point linear resizer (the `INTER_AREA` enlarge route), giving
//! the same integers as the scalar loops in [`super::cv_area`].
//!
//! Horizontal: each 128-bit lane computes four output elements `src[i0]*c0 + src[i1]*c1` as
//! one `pmaddwd` on (pixel, pixel) / (c0, c1) i16 pairs, the pixels gathered by one `pshufb`
//! from a 16-byte window of the source row (an enlarge moves at most ~2 pixels per 4 outputs,
//! so the window always suffices; [`HBlocks::new`] says `None` otherwise). Vertical: OpenCV's
//! own SIMD formula `(mulhi(h0 >> 4, b0) + mulhi(h1 >> 4, b1) + 2) >> 2` on i16 lanes.

use std::arch::x86_64::*;

/// Four output elements per block: where their 16-byte source window starts, the `pshufb`
/// mask that picks (src[i0], src[i1]) as zero-extended i16 pairs, and the (c0, c1) pairs.
pub(super) struct HBlocks {
    base: Vec<u32>,
    shuf: Vec<[u8; 16]>,
    coef: Vec<[i16; 8]>,
}

impl HBlocks {
    /// Blocks for the first `i0.len() / 4 * 4` elements; `None` when a block's pixels do not
    /// fit one 16-byte window inside a `row_len`-byte row.
    pub(super) fn new(
        i0: &[u32],
        i1: &[u32],
        c0: &[i32],
        c1: &[i32],
        row_len: usize,
    ) -> Option<Self> {
        let nb = i0.len() / 4;
        let mut t = HBlocks {
            base: Vec::with_capacity(nb),
            shuf: Vec::with_capacity(nb),
            coef: Vec::with_capacity(nb),
        };
        if row_len < 16 {
            return None;
        }
        for b in 0..nb {
            let r = b * 4..b * 4 + 4;
            let lo = i0[r.clone()].iter().chain(&i1[r.clone()]).min().copied()? as usize;
            let hi = i0[r.clone()].iter().chain(&i1[r.clone()]).max().copied()? as usize;
            let base = lo.min(row_len - 16);
            if hi >= base + 16 {
                return None;
            }
            let mut shuf = [0x80u8; 16];
            let mut coef = [0i16; 8];
            for (e, j) in r.enumerate() {
                shuf[4 * e] = (i0[j] as usize - base) as u8;
                shuf[4 * e + 2] = (i1[j] as usize - base) as u8;
                coef[2 * e] = i16::try_from(c0[j]).ok()?;
                coef[2 * e + 1] = i16::try_from(c1[j]).ok()?;
            }
            t.base.push(base as u32);
            t.shuf.push(shuf);
            t.coef.push(coef);
        }
        Some(t)
    }

    /// Elements covered (a multiple of 4).
    pub(super) fn len(&self) -> usize {
        self.base.len() * 4
    }
}

/// `out[j] = row[i0[j]] * c0[j] + row[i1[j]] * c1[j]` for the elements the blocks cover.
///
/// # Safety
/// AVX2 must be available; `row` must be the `row_len` bytes the blocks were built for.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn hrow(row: &[u8], t: &HBlocks, out: &mut [i32]) {
    let nb = t.base.len();
    assert!(out.len() >= nb * 4);
    let p = row.as_ptr();
    let mut b = 0;
    // SAFETY: every window `base..base + 16` lies inside `row` (checked by `HBlocks::new`
    // against the same row length) and `out` holds `nb * 4` elements.
    unsafe {
        while b + 2 <= nb {
            let w = _mm256_loadu2_m128i(
                p.add(t.base[b + 1] as usize) as *const __m128i,
                p.add(t.base[b] as usize) as *const __m128i,
            );
            let m = _mm256_loadu2_m128i(
                t.shuf[b + 1].as_ptr() as *const __m128i,
                t.shuf[b].as_ptr() as *const __m128i,
            );
            let c = _mm256_loadu2_m128i(
                t.coef[b + 1].as_ptr() as *const __m128i,
                t.coef[b].as_ptr() as *const __m128i,
            );
            let v = _mm256_madd_epi16(_mm256_shuffle_epi8(w, m), c);
            _mm256_storeu_si256(out.as_mut_ptr().add(b * 4) as *mut __m256i, v);
            b += 2;
        }
        if b < nb {
            let w = _mm_loadu_si128(p.add(t.base[b] as usize) as *const __m128i);
            let m = _mm_loadu_si128(t.shuf[b].as_ptr() as *const __m128i);
            let c = _mm_loadu_si128(t.coef[b].as_ptr() as *const __m128i);
            let v = _mm_madd_epi16(_mm_shuffle_epi8(w, m), c);
            _mm_storeu_si128(out.as_mut_ptr().add(b * 4) as *mut __m128i, v);
        }
    }
}

/// OpenCV's vector formula for `out[..n]` (`n` a multiple of 8):
/// `(((b0 * (h0 >> 4)) >> 16) + ((b1 * (h1 >> 4)) >> 16) + 2) >> 2`, saturated to u8.
///
/// # Safety
/// AVX2 must be available.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn vrow(h0: &[i32], h1: &[i32], b0: i32, b1: i32, out: &mut [u8], n: usize) {
    assert!(n.is_multiple_of(8) && h0.len() >= n && h1.len() >= n && out.len() >= n);
    let vb0 = _mm256_set1_epi16(b0 as i16);
    let vb1 = _mm256_set1_epi16(b1 as i16);
    let two = _mm256_set1_epi16(2);
    // i32 x 16 -> i16 x 16 in order (`packs` works per 128-bit lane, the permute restores it).
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load16(h: *const i32) -> __m256i {
        // SAFETY: the caller keeps `h..h + 16` in bounds.
        unsafe {
            let a = _mm256_srai_epi32(_mm256_loadu_si256(h as *const __m256i), 4);
            let b = _mm256_srai_epi32(_mm256_loadu_si256(h.add(8) as *const __m256i), 4);
            _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8)
        }
    }
    let mut x = 0;
    // SAFETY: `x + 16 <= n` inside the loop, and every slice holds `n` elements.
    unsafe {
        while x + 16 <= n {
            let s0 = _mm256_mulhi_epi16(load16(h0.as_ptr().add(x)), vb0);
            let s1 = _mm256_mulhi_epi16(load16(h1.as_ptr().add(x)), vb1);
            let r = _mm256_srai_epi16(_mm256_add_epi16(_mm256_add_epi16(s0, s1), two), 2);
            let bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(r, r), 0x08);
            _mm_storeu_si128(
                out.as_mut_ptr().add(x) as *mut __m128i,
                _mm256_castsi256_si128(bytes),
            );
            x += 16;
        }
    }
    for j in x..n {
        let a = (b0 * (h0[j] >> 4)) >> 16;
        let b = (b1 * (h1[j] >> 4)) >> 16;
        out[j] = ((a + b + 2) >> 2).clamp(0, 255) as u8;
    }
}
