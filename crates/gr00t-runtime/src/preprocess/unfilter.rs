//! PNG row unfiltering for 8-bit RGB (3 bytes per pixel), the step after inflate.
//!
//! [`unfilter_rgb8_scalar`] is the PNG specification written out; [`unfilter_rgb8`] picks an
//! SSE4.1 version on x86-64 that gives the same bytes. The SIMD version keeps a pixel's three
//! channels in one register, and for two consecutive Paeth rows runs both rows in the same
//! register, the lower row two pixels behind the upper one, so two independent dependency
//! chains overlap: Paeth is serial along a row (each pixel needs its left neighbour), and a
//! single row spends most of its time waiting on that chain. Where the CPU has AVX2, four
//! consecutive Paeth rows run in one 256-bit register the same way (one row per 64-bit lane),
//! which halves the time of those rows again.

/// A filter-type byte outside 0..=4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("PNG row {row} has filter type {filter}")]
pub struct BadFilter {
    /// 0-based row with the bad filter byte.
    pub row: usize,
    /// The filter-type byte found.
    pub filter: u8,
}

const BPP: usize = 3;

/// Undo the per-row filters: `raw` holds `rows` rows of one filter byte and `stride` bytes;
/// `out` receives `rows * stride` bytes; `above` is the (unfiltered) row before the first one,
/// `None` at the top of the image. `stride` must be a multiple of 3.
pub fn unfilter_rgb8_scalar(
    raw: &[u8],
    above: Option<&[u8]>,
    out: &mut [u8],
    stride: usize,
) -> Result<(), BadFilter> {
    assert_eq!(stride % BPP, 0);
    if stride == 0 {
        return Ok(());
    }
    let rows = out.len() / stride;
    assert_eq!(raw.len(), rows * (stride + 1));
    assert_eq!(out.len(), rows * stride);
    let zero = match above {
        Some(a) => a[..stride].to_vec(),
        None => vec![0u8; stride],
    };
    for r in 0..rows {
        let filter = raw[r * (stride + 1)];
        let x = &raw[r * (stride + 1) + 1..(r + 1) * (stride + 1)];
        let (done, rest) = out.split_at_mut(r * stride);
        let prev = if r == 0 {
            &zero[..]
        } else {
            &done[(r - 1) * stride..]
        };
        let cur = &mut rest[..stride];
        match filter {
            0 => cur.copy_from_slice(x),
            1 => {
                for i in 0..stride {
                    let a = if i >= BPP { cur[i - BPP] } else { 0 };
                    cur[i] = x[i].wrapping_add(a);
                }
            }
            2 => {
                for i in 0..stride {
                    cur[i] = x[i].wrapping_add(prev[i]);
                }
            }
            3 => {
                for i in 0..stride {
                    let a = if i >= BPP { cur[i - BPP] } else { 0 };
                    let avg = ((a as u16 + prev[i] as u16) / 2) as u8;
                    cur[i] = x[i].wrapping_add(avg);
                }
            }
            4 => {
                for i in 0..stride {
                    let (a, c) = if i >= BPP {
                        (cur[i - BPP], prev[i - BPP])
                    } else {
                        (0, 0)
                    };
                    cur[i] = x[i].wrapping_add(paeth(a, prev[i], c));
                }
            }
            f => return Err(BadFilter { row: r, filter: f }),
        }
    }
    Ok(())
}

/// The Paeth predictor as the PNG specification states it.
fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = a as i16 + b as i16 - c as i16;
    let pa = (p - a as i16).abs();
    let pb = (p - b as i16).abs();
    let pc = (p - c as i16).abs();
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}

/// [`unfilter_rgb8_scalar`], with SSE4.1 where the CPU has it.
pub fn unfilter_rgb8(
    raw: &[u8],
    above: Option<&[u8]>,
    out: &mut [u8],
    stride: usize,
) -> Result<(), BadFilter> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        // SAFETY: SSE4.1 was detected at run time, and AVX2 where `avx2` says so.
        return unsafe { x86::unfilter_rgb8_sse41(raw, above, out, stride, avx2) };
    }
    unfilter_rgb8_scalar(raw, above, out, stride)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BPP, BadFilter};
    use std::arch::x86_64::*;

    /// Four bytes at `p`, zero-extended to four i16 lanes (the fourth byte is never used for
    /// a result that is kept).
    #[inline]
    #[target_feature(enable = "sse4.1")]
    unsafe fn load_px(p: *const u8) -> __m128i {
        // SAFETY: the caller keeps `p..p + 4` inside its buffer.
        unsafe { _mm_cvtepu8_epi16(_mm_cvtsi32_si128((p as *const i32).read_unaligned())) }
    }

    /// Write the three bytes of lane-0 pixel `v` (bytes) to `p`; `full` allows a 4-byte store
    /// (the fourth byte belongs to the next pixel of the same row, written afterwards).
    #[inline]
    #[target_feature(enable = "sse4.1")]
    unsafe fn store_px(p: *mut u8, v: i32, full: bool) {
        // SAFETY: the caller keeps `p..p + 3` (`p..p + 4` when `full`) inside its buffer.
        unsafe {
            if full {
                (p as *mut i32).write_unaligned(v);
            } else {
                let b = v.to_le_bytes();
                std::ptr::copy_nonoverlapping(b.as_ptr(), p, 3);
            }
        }
    }

    /// Paeth predictor on i16 lanes (values 0..=255), in the stb_image form: the same choice
    /// as the specification's, with a shorter dependency chain on `a`.
    #[inline]
    #[target_feature(enable = "sse4.1")]
    fn paeth(a: __m128i, b: __m128i, c: __m128i, c3: __m128i) -> __m128i {
        // thresh = 3c - (a + b); lo/hi = min/max(a, b);
        // t0 = hi <= thresh ? lo : c; result = thresh <= lo ? hi : t0.
        let thresh = _mm_sub_epi16(c3, _mm_add_epi16(a, b));
        let lo = _mm_min_epi16(a, b);
        let hi = _mm_max_epi16(a, b);
        let t0 = _mm_blendv_epi8(lo, c, _mm_cmpgt_epi16(hi, thresh));
        _mm_blendv_epi8(hi, t0, _mm_cmpgt_epi16(thresh, lo))
    }

    #[inline]
    #[target_feature(enable = "sse4.1")]
    fn times3(c: __m128i) -> __m128i {
        _mm_add_epi16(c, _mm_add_epi16(c, c))
    }

    /// # Safety
    /// SSE4.1 must be available, and AVX2 if `avx2`.
    #[target_feature(enable = "sse4.1")]
    pub(super) unsafe fn unfilter_rgb8_sse41(
        raw: &[u8],
        above: Option<&[u8]>,
        out: &mut [u8],
        stride: usize,
        avx2: bool,
    ) -> Result<(), BadFilter> {
        assert_eq!(stride % BPP, 0);
        let rows = out.len() / stride;
        assert_eq!(raw.len(), rows * (stride + 1));
        assert_eq!(out.len(), rows * stride);
        if stride == 0 {
            return Ok(());
        }
        // 4-byte loads read one byte past a pixel: pad copies of the input and of the row
        // above the first one (zeros at the top of the image) so every load stays inside a
        // buffer. The copies live in per-thread buffers: a streamed decode calls this once
        // per band, and two allocations per call were measurable.
        thread_local! {
            static PADDED: std::cell::Cell<(Vec<u8>, Vec<u8>)> =
                const { std::cell::Cell::new((Vec::new(), Vec::new())) };
        }
        let (mut zero, mut tail) = PADDED.take();
        zero.clear();
        match above {
            Some(a) => zero.extend_from_slice(&a[..stride]),
            None => zero.resize(stride, 0),
        }
        zero.resize(stride + 16, 0);
        // SAFETY: the caller's features; `zero` is the padded row above.
        let r = unsafe { unfilter_padded(raw, &zero, &mut tail, out, stride, avx2) };
        if zero.capacity() <= super::super::SCRATCH_KEEP {
            PADDED.set((zero, tail));
        }
        r
    }

    /// [`unfilter_rgb8_sse41`] with the padded row above in `zero` and `tail` for the copy of
    /// the last rows.
    #[target_feature(enable = "sse4.1")]
    unsafe fn unfilter_padded(
        raw: &[u8],
        zero: &[u8],
        tail: &mut Vec<u8>,
        out: &mut [u8],
        stride: usize,
        avx2: bool,
    ) -> Result<(), BadFilter> {
        let rows = out.len() / stride;
        let mut r = 0;
        while r < rows {
            let filter = raw[r * (stride + 1)];
            if filter > 4 {
                return Err(BadFilter { row: r, filter });
            }
            // Four consecutive Paeth rows run together in a 256-bit register, else two in a
            // 128-bit one. (Four in two 128-bit registers, `paeth_group::<2>`, was measured
            // slower: that loop is bound by instruction throughput, not latency.)
            let max_group = if avx2 { 4 } else { 2 };
            let paeth_run = (r..rows.min(r + max_group))
                .take_while(|&q| raw[q * (stride + 1)] == 4)
                .count();
            let group = match paeth_run {
                4 => 4,
                2 | 3 => 2,
                _ => 1,
            };
            // The last row's 4-byte loads of `x` would read past `raw`: handle the group that
            // holds it from a padded copy.
            let x_ptr = if r + group == rows {
                let start = r * (stride + 1);
                tail.clear();
                tail.extend_from_slice(&raw[start..]);
                tail.resize(tail.len() + 16, 0);
                tail.as_ptr()
            } else {
                // SAFETY: row r starts inside `raw`.
                unsafe { raw.as_ptr().add(r * (stride + 1)) }
            };
            // The row above: out row r - 1, or the padded copy. Its 4-byte loads at the last
            // pixel read the first byte of row r (already allocated) or the copy's padding.
            let prev: *const u8 = if r == 0 {
                zero.as_ptr()
            } else {
                // SAFETY: row r - 1 is inside `out` (r < rows).
                unsafe { out.as_ptr().add((r - 1) * stride) }
            };
            // SAFETY: row r is inside `out` (r < rows).
            let cur = unsafe { out.as_mut_ptr().add(r * stride) };
            // SAFETY: `x_ptr` points at row r's filter byte with `group` rows of
            // `stride + 1` bytes plus one readable byte after; `prev` at `stride + 1` readable
            // bytes; `cur` at `group * stride` writable ones.
            unsafe {
                match group {
                    // `group` is 4 only when `avx2`.
                    4 => paeth4_avx2(x_ptr, prev, cur, stride),
                    2 => paeth_group::<1>(x_ptr, prev, cur, stride),
                    _ => single(filter, x_ptr.add(1), prev, cur, stride),
                }
            }
            r += group;
        }
        Ok(())
    }

    /// One row with filter `f`. `x`: the filtered bytes (+1 readable), `prev`: the row above
    /// (+1 readable), `cur`: the output row.
    #[target_feature(enable = "sse4.1")]
    unsafe fn single(f: u8, x: *const u8, prev: *const u8, cur: *mut u8, stride: usize) {
        let n = stride / BPP;
        // SAFETY: SSE4.1 is enabled for this function; the caller guarantees `x` and `prev`
        // hold `stride` (+1) readable bytes and `cur` `stride` writable ones, not overlapping.
        unsafe {
            match f {
                0 => std::ptr::copy_nonoverlapping(x, cur, stride),
                2 => {
                    let x = std::slice::from_raw_parts(x, stride);
                    let prev = std::slice::from_raw_parts(prev, stride);
                    let cur = std::slice::from_raw_parts_mut(cur, stride);
                    for ((o, &v), &b) in cur.iter_mut().zip(x).zip(prev) {
                        *o = v.wrapping_add(b);
                    }
                }
                1 => {
                    // Four pixels (12 bytes) a step: their running sum within the register by
                    // two shifted adds, plus the previous step's last pixel in all four, so
                    // the serial chain is one add and one shuffle per four pixels.
                    let last =
                        _mm_setr_epi8(9, 10, 11, 9, 10, 11, 9, 10, 11, 9, 10, 11, -1, -1, -1, -1);
                    let mut carry = _mm_setzero_si128();
                    let mut i = 0;
                    // 16-byte loads and stores stay inside the row; the bytes past the fourth
                    // pixel are overwritten by the next step or the tail below.
                    while 3 * i + 16 <= stride {
                        let mut v = _mm_loadu_si128(x.add(3 * i) as *const __m128i);
                        v = _mm_add_epi8(v, _mm_slli_si128(v, 3));
                        v = _mm_add_epi8(v, _mm_slli_si128(v, 6));
                        v = _mm_add_epi8(v, carry);
                        _mm_storeu_si128(cur.add(3 * i) as *mut __m128i, v);
                        carry = _mm_shuffle_epi8(v, last);
                        i += 4;
                    }
                    // The last pixel so far, in lane-0 pixel form, for the per-pixel tail.
                    let mut a = _mm_and_si128(carry, _mm_setr_epi32(0x00FF_FFFF, 0, 0, 0));
                    for i in i..n {
                        let xv = _mm_cvtsi32_si128((x.add(i * BPP) as *const i32).read_unaligned());
                        a = _mm_add_epi8(a, xv);
                        store_px(cur.add(i * BPP), _mm_cvtsi128_si32(a), i + 1 < n);
                    }
                }
                3 => {
                    let one = _mm_set1_epi8(1);
                    let mut a = _mm_setzero_si128();
                    for i in 0..n {
                        let p = i * BPP;
                        let xv = _mm_cvtsi32_si128((x.add(p) as *const i32).read_unaligned());
                        let b = _mm_cvtsi32_si128((prev.add(p) as *const i32).read_unaligned());
                        // floor((a + b) / 2) = round-up average minus the rounding bit.
                        let avg = _mm_sub_epi8(
                            _mm_avg_epu8(a, b),
                            _mm_and_si128(_mm_xor_si128(a, b), one),
                        );
                        a = _mm_add_epi8(avg, xv);
                        store_px(cur.add(p), _mm_cvtsi128_si32(a), i + 1 < n);
                    }
                }
                _ => {
                    let mask = _mm_set1_epi16(0xFF);
                    let mut a = _mm_setzero_si128();
                    let mut c = _mm_setzero_si128();
                    for i in 0..n {
                        let p = i * BPP;
                        let b = load_px(prev.add(p));
                        let xv = load_px(x.add(p));
                        let pred = paeth(a, b, c, times3(c));
                        a = _mm_and_si128(_mm_add_epi16(pred, xv), mask);
                        store_px(
                            cur.add(p),
                            _mm_cvtsi128_si32(_mm_packus_epi16(a, a)),
                            i + 1 < n,
                        );
                        c = b;
                    }
                }
            }
        }
    }

    /// `2 * K` consecutive Paeth rows at once, two per register (lane 0 = low 64 bits): row
    /// `i` of the group works on pixel `t - 2 * i` at step `t`, so the pixels above it (row
    /// `i - 1`, pixels `t - 2 * i` and one left) are that row's results of two and three steps
    /// before, and the `2 * K` dependency chains overlap. `x` points at the first row's filter
    /// byte; rows follow at `stride + 1` bytes (the last one with one readable byte after).
    #[target_feature(enable = "sse4.1")]
    pub(super) unsafe fn paeth_group<const K: usize>(
        x: *const u8,
        prev: *const u8,
        cur: *mut u8,
        stride: usize,
    ) {
        const LAG: usize = 2;
        let n = stride / BPP;
        let rows = 2 * K;
        let mask = _mm_set1_epi16(0xFF);
        let zero = _mm_setzero_si128();
        // Results of the last three steps per register, and the row above's pixel t - 1.
        let (mut r1, mut r2, mut r3) = ([zero; K], [zero; K], [zero; K]);
        let mut cm = zero;
        // Pixel row `i` works on at step `t`, if any (`None` before it starts).
        let px = |t: usize, i: usize| t.checked_sub(LAG * i);
        for t in 0..n + (rows - 1) * LAG {
            // SAFETY: SSE4.1 is enabled for this function; loads are clamped to the rows' last
            // pixel, whose 4-byte reads the caller keeps in bounds; stores only for pixels
            // inside a row.
            unsafe {
                // Pixels past a row's end (clamped loads) compute garbage no kept pixel reads.
                let bm = load_px(prev.add(t.min(n - 1) * BPP));
                let mut now = [zero; K];
                for p in 0..K {
                    let (b, c) = if p == 0 {
                        (_mm_unpacklo_epi64(bm, r2[0]), _mm_unpacklo_epi64(cm, r3[0]))
                    } else {
                        (
                            _mm_alignr_epi8(r2[p], r2[p - 1], 8),
                            _mm_alignr_epi8(r3[p], r3[p - 1], 8),
                        )
                    };
                    let (i0, i1) = (2 * p, 2 * p + 1);
                    let (u0, u1) = (px(t, i0), px(t, i1));
                    let xp = |i: usize, u: Option<usize>| {
                        let u = u.unwrap_or(0).min(n - 1);
                        (x.add(i * (stride + 1) + 1 + u * BPP) as *const i32).read_unaligned()
                    };
                    let xv = _mm_cvtepu8_epi16(_mm_insert_epi32(
                        _mm_cvtsi32_si128(xp(i0, u0)),
                        xp(i1, u1),
                        1,
                    ));
                    let pred = paeth(r1[p], b, c, times3(c));
                    let mut res = _mm_and_si128(_mm_add_epi16(pred, xv), mask);
                    if u1.is_none() {
                        // A row that has not started keeps zeros: its first pixel reads them
                        // as "left", the row below as "above left".
                        let keep0 = if u0.is_some() { -1 } else { 0 };
                        res = _mm_and_si128(res, _mm_set_epi64x(0, keep0));
                    }
                    let bytes = _mm_packus_epi16(res, res);
                    if let Some(u) = u0.filter(|&u| u < n) {
                        let dst = cur.add(i0 * stride + u * BPP);
                        store_px(dst, _mm_cvtsi128_si32(bytes), u + 1 < n);
                    }
                    if let Some(u) = u1.filter(|&u| u < n) {
                        let dst = cur.add(i1 * stride + u * BPP);
                        store_px(dst, _mm_extract_epi32(bytes, 1), u + 1 < n);
                    }
                    now[p] = res;
                }
                cm = bm;
                r3 = r2;
                r2 = r1;
                r1 = now;
            }
        }
    }

    /// Paeth on i16 lanes, 256-bit form of `paeth`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn paeth256(a: __m256i, b: __m256i, c: __m256i) -> __m256i {
        let c3 = _mm256_add_epi16(c, _mm256_add_epi16(c, c));
        let thresh = _mm256_sub_epi16(c3, _mm256_add_epi16(a, b));
        let lo = _mm256_min_epi16(a, b);
        let hi = _mm256_max_epi16(a, b);
        let t0 = _mm256_blendv_epi8(lo, c, _mm256_cmpgt_epi16(hi, thresh));
        _mm256_blendv_epi8(hi, t0, _mm256_cmpgt_epi16(thresh, lo))
    }

    /// Four consecutive Paeth rows at once, one per 64-bit lane of a 256-bit register: row `i`
    /// works on pixel `t - 2 * i` at step `t`, as in [`paeth_group`], so the pixel above is
    /// lane `i - 1` of the result two steps before and the one above-left three steps before
    /// (lane 0 reads the row above the group), and only the left neighbour is on the
    /// dependency chain. Four chains per step in about the instructions one 128-bit step of
    /// two takes. Arguments as for [`paeth_group`] with four rows.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn paeth4_avx2(x: *const u8, prev: *const u8, cur: *mut u8, stride: usize) {
        const LAG: usize = 2;
        const ROWS: usize = 4;
        let n = stride / BPP;
        let mask = _mm256_set1_epi16(0xFF);
        let zero = _mm256_setzero_si256();
        let (mut r1, mut r2, mut r3) = (zero, zero, zero);
        let mut cm = _mm_setzero_si128();
        // Row i's pixel at step t, if it has started.
        let px = |t: usize, i: usize| t.checked_sub(LAG * i);
        for t in 0..n + (ROWS - 1) * LAG {
            // SAFETY: AVX2 is enabled for this function; loads are clamped to the rows' last
            // pixel, whose 4-byte reads the caller keeps in bounds; stores only for pixels
            // inside a row.
            unsafe {
                let bm = load_px(prev.add(t.min(n - 1) * BPP));
                // Lanes shifted up by one row, lane 0 from the row above the group.
                let b = _mm256_blend_epi32::<0b0000_0011>(
                    _mm256_permute4x64_epi64::<0b10_01_00_00>(r2),
                    _mm256_castsi128_si256(bm),
                );
                let c = _mm256_blend_epi32::<0b0000_0011>(
                    _mm256_permute4x64_epi64::<0b10_01_00_00>(r3),
                    _mm256_castsi128_si256(cm),
                );
                let xp = |i: usize| {
                    let u = px(t, i).unwrap_or(0).min(n - 1);
                    (x.add(i * (stride + 1) + 1 + u * BPP) as *const i32).read_unaligned()
                };
                let xv = _mm256_cvtepu8_epi16(_mm_setr_epi32(xp(0), xp(1), xp(2), xp(3)));
                let mut res = _mm256_and_si256(_mm256_add_epi16(paeth256(r1, b, c), xv), mask);
                if t < (ROWS - 1) * LAG {
                    // Rows that have not started keep zeros: their first pixel reads them as
                    // "left", the row below as "above left".
                    let on = |i: usize| if px(t, i).is_some() { -1 } else { 0 };
                    res = _mm256_and_si256(res, _mm256_setr_epi64x(on(0), on(1), on(2), on(3)));
                }
                // Bytes: lane 0 of each 128-bit half holds rows 0/2, lane 1 rows 1/3.
                let bytes = _mm256_packus_epi16(res, res);
                let lo = _mm256_castsi256_si128(bytes);
                let hi = _mm256_extracti128_si256::<1>(bytes);
                let words = [
                    _mm_cvtsi128_si32(lo),
                    _mm_extract_epi32::<1>(lo),
                    _mm_cvtsi128_si32(hi),
                    _mm_extract_epi32::<1>(hi),
                ];
                for (i, &v) in words.iter().enumerate() {
                    if let Some(u) = px(t, i).filter(|&u| u < n) {
                        store_px(cur.add(i * stride + u * BPP), v, u + 1 < n);
                    }
                }
                cm = bm;
                r3 = r2;
                r2 = r1;
                r1 = res;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::preprocess::test_data::byte as lcg;

    fn random_raw(w: usize, h: usize, seed: &mut u64, filters: &[u8]) -> Vec<u8> {
        let stride = w * 3;
        let mut raw = vec![0u8; h * (stride + 1)];
        for r in 0..h {
            raw[r * (stride + 1)] = filters[lcg(seed) as usize % filters.len()];
            for b in &mut raw[r * (stride + 1) + 1..(r + 1) * (stride + 1)] {
                *b = lcg(seed);
            }
        }
        raw
    }

    #[test]
    fn stb_paeth_form_matches_the_spec_on_every_triple() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                for c in 0..=255u8 {
                    let (ai, bi, ci) = (a as i16, b as i16, c as i16);
                    let thresh = 3 * ci - (ai + bi);
                    let (lo, hi) = (ai.min(bi), ai.max(bi));
                    let t0 = if hi <= thresh { lo } else { ci };
                    let got = if thresh <= lo { hi } else { t0 };
                    assert_eq!(got as u8, paeth(a, b, c), "{a} {b} {c}");
                }
            }
        }
    }

    #[test]
    fn dispatched_unfilter_equals_scalar() {
        let mut seed = 7;
        let filter_sets: [&[u8]; 8] = [
            &[0],
            &[1],
            &[2],
            &[3],
            &[4],
            &[4, 4, 4, 1],
            &[4, 4, 4, 4, 4, 4, 2],
            &[0, 1, 2, 3, 4],
        ];
        for (w, h) in [
            (1, 1),
            (1, 5),
            (2, 3),
            (3, 2),
            (1, 4),
            (5, 7),
            (17, 9),
            (64, 33),
            (256, 256),
            (243, 11),
            (7, 4),
            (9, 8),
        ] {
            for filters in filter_sets {
                let raw = random_raw(w, h, &mut seed, filters);
                let mut want = vec![0u8; w * h * 3];
                let mut got = vec![0u8; w * h * 3];
                unfilter_rgb8_scalar(&raw, None, &mut want, w * 3).unwrap();
                unfilter_rgb8(&raw, None, &mut got, w * 3).unwrap();
                assert_eq!(got, want, "{w}x{h} filters {filters:?}");
                // Split in two calls, the second continuing from the first's last row.
                let k = h / 2;
                let (r0, r1) = raw.split_at(k * (w * 3 + 1));
                let mut split = vec![0u8; w * h * 3];
                let (o0, o1) = split.split_at_mut(k * w * 3);
                unfilter_rgb8(r0, None, o0, w * 3).unwrap();
                let above = if k == 0 {
                    None
                } else {
                    Some(&o0[(k - 1) * w * 3..])
                };
                unfilter_rgb8(r1, above, o1, w * 3).unwrap();
                assert_eq!(split, want, "{w}x{h} filters {filters:?} split");
            }
        }
    }

    /// Both four-row forms (two 128-bit registers, kept but measured slower; one 256-bit
    /// register, used) equal the scalar code.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn four_paeth_rows_at_once_equal_scalar() {
        if !std::arch::is_x86_feature_detected!("sse4.1") {
            return;
        }
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        let mut seed = 11;
        for w in [1, 2, 5, 64, 256] {
            let stride = w * 3;
            let mut raw = random_raw(w, 5, &mut seed, &[4]);
            raw.extend_from_slice(&[0; 16]);
            let above: Vec<u8> = (0..stride + 16).map(|_| lcg(&mut seed)).collect();
            let mut want = vec![0u8; 5 * stride];
            unfilter_rgb8_scalar(&raw[..5 * (stride + 1)], Some(&above), &mut want, stride)
                .unwrap();
            let mut got = vec![0u8; 4 * stride];
            // SAFETY: SSE4.1 is present; `raw` holds 4 rows plus padding, `above` one padded
            // row, `got` 4 rows.
            unsafe {
                x86::paeth_group::<2>(raw.as_ptr(), above.as_ptr(), got.as_mut_ptr(), stride)
            };
            assert_eq!(got, want[..4 * stride], "w {w}");
            if avx2 {
                let mut got = vec![0u8; 4 * stride];
                // SAFETY: as above, and AVX2 is present.
                unsafe { x86::paeth4_avx2(raw.as_ptr(), above.as_ptr(), got.as_mut_ptr(), stride) };
                assert_eq!(got, want[..4 * stride], "w {w} (256-bit)");
            }
        }
    }

    #[test]
    fn bad_filter_type_is_an_error() {
        let raw = [0u8, 1, 2, 3, 7, 4, 5, 6];
        let mut out = [0u8; 6];
        let want = Err(BadFilter { row: 1, filter: 7 });
        assert_eq!(unfilter_rgb8_scalar(&raw, None, &mut out, 3), want);
        assert_eq!(unfilter_rgb8(&raw, None, &mut out, 3), want);
    }
}
