//! AVX2 form of Pillow's 8-bit bicubic resample ([`super::pil_bicubic`]), same integers.
//!
//! Pillow's sums are `int`: `(1 << 21) + sum(pixel * k)` with 22-bit coefficients, then `>> 22`
//! and clamp. Here each coefficient is split as `k = hi * 2^15 + lo` (`lo` in `0..2^15`, both
//! fit i16) so two taps at a time go through `pmaddwd` on (pixel, pixel) i16 pairs:
//! `sum = (sum_hi << 15) + sum_lo`, exact because integer addition does not depend on order and
//! nothing overflows (|sum| < 2^31, as in Pillow).
//!
//! - Horizontal: output element `j = 3x + c` reads source element `j + 3 * (xmin(x) - x + k)`.
//!   Over a block of 16 elements `xmin(x) - x` varies by at most a few pixels, so with a
//!   per-block shift every tap becomes a *contiguous* 16-element load of the (i16-widened,
//!   zero-padded) source row, with per-element coefficients from a table (0 where an element
//!   has no such tap).
//! - Vertical: one output row is a weighted sum of whole intermediate rows, coefficients
//!   broadcast.
//!
//! The horizontal pass keeps its clamped 8-bit results as i16 rows, which the vertical pass
//! reads directly.
//!
//! Where the CPU has AVX-512BW the same scheme runs on 32-element blocks (`HPlan::width` 32,
//! [`hrow`]/[`vrow`] dispatch on it): the same integers, half the instructions.

use std::arch::x86_64::*;

use super::pil_bicubic::Coeffs;

const PRECISION_BITS: i32 = 22;
/// Most tap pairs per block handled here (a 5-pixel kernel needs 3); larger downscales are
/// left to the portable code.
const MAX_PAIRS: usize = 8;
/// Most vertical taps [`vrow`] takes.
pub(super) const MAX_TAPS: usize = 2 * MAX_PAIRS;
/// i16 elements of zero padding before a widened source row (a block's shifted reads start at
/// most 5 pixels = 15 elements before its first output element).
const PAD_L: usize = 16;

/// `k` as (lo, hi) with `k = hi * 2^15 + lo`, `lo` in `0..2^15`.
fn split(k: i32) -> (i16, i16) {
    ((k & 0x7FFF) as i16, (k >> 15) as i16)
}

/// Horizontal pass tables for one (in_w, out_w): per block of `width` elements its source
/// shift (`base`, in pixels, may be negative), tap-pair count and coefficient vectors.
pub(super) struct HPlan {
    /// Elements per block: 16 (AVX2) or 32 (AVX-512BW).
    width: usize,
    src_len: usize,
    /// i16 elements a widened, padded source row needs.
    padded_len: usize,
    blocks: Vec<(isize, usize, usize)>, // (base, pairs, first coefficient vector)
    /// Per block and pair, four vectors of `width` i16: lo/hi halves for the `unpacklo`
    /// element order (0-3, 8-11, ... per 128-bit lane) and for the `unpackhi` order (4-7,
    /// 12-15, ...).
    coef: Vec<i16>,
}

/// Whether the 32-element (AVX-512BW) kernels are used: detected once; tests switch it off to
/// cover the AVX2 ones on the same machine.
pub(super) fn wide() -> bool {
    use std::sync::atomic::Ordering;
    !NARROW_ONLY.load(Ordering::Relaxed)
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
}

/// Forces the AVX2 kernels (tests).
pub(super) static NARROW_ONLY: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

impl HPlan {
    /// A plan for blocks of `width` (16 or 32) elements; the caller has checked the CPU.
    pub(super) fn new(c: &Coeffs, in_w: usize, out_w: usize, width: usize) -> Option<Self> {
        assert!(width == 16 || width == 32);
        let out_len = out_w * 3;
        let src_len = in_w * 3;
        let nblocks = out_len.div_ceil(width);
        let mut blocks = Vec::with_capacity(nblocks);
        let mut coef = Vec::new();
        let mut max_read = 0isize;
        let orders: [Vec<usize>; 2] = [0, 4].map(|h| {
            (0..width / 8)
                .flat_map(|lane| (0..4).map(move |e| 8 * lane + h + e))
                .collect()
        });
        for b in 0..nblocks {
            let j0 = b * width;
            let elems: Vec<usize> = (j0..(j0 + width).min(out_len)).collect();
            let d = |j: usize| c.bounds[j / 3].0 as isize - (j / 3) as isize;
            let base = elems.iter().map(|&j| d(j)).min()?;
            let taps = elems
                .iter()
                .map(|&j| (d(j) - base) as usize + c.bounds[j / 3].1)
                .max()?;
            let pairs = taps.div_ceil(2);
            if pairs > MAX_PAIRS {
                return None;
            }
            // Reads span elements j0 + 3 * (base + t) .. + width for t < 2 * pairs.
            if (j0 as isize) + 3 * base < -(PAD_L as isize) {
                return None;
            }
            max_read =
                max_read.max(j0 as isize + 3 * (base + 2 * pairs as isize - 1) + width as isize);
            blocks.push((base, pairs, coef.len() / width));
            // Coefficient of element slot `e` (0..16) at block tap `t`.
            let k = |e: usize, t: usize| -> i32 {
                let j = j0 + e;
                if j >= out_len {
                    return 0;
                }
                let x = j / 3;
                let (_, n) = c.bounds[x];
                let delta = (d(j) - base) as usize;
                if t < delta || t - delta >= n {
                    0
                } else {
                    c.kk[x * c.ksize + t - delta]
                }
            };
            for p in 0..pairs {
                for order in &orders {
                    let (mut lo, mut hi) = (vec![0i16; width], vec![0i16; width]);
                    for (s, &e) in order.iter().enumerate() {
                        let (l0, h0) = split(k(e, 2 * p));
                        let (l1, h1) = split(k(e, 2 * p + 1));
                        lo[2 * s] = l0;
                        lo[2 * s + 1] = l1;
                        hi[2 * s] = h0;
                        hi[2 * s + 1] = h1;
                    }
                    coef.extend_from_slice(&lo);
                    coef.extend_from_slice(&hi);
                }
            }
        }
        Some(HPlan {
            width,
            src_len,
            padded_len: PAD_L + (max_read.max(src_len as isize) as usize) + width,
            blocks,
            coef,
        })
    }

    /// Elements of one output row, rounded up to whole blocks (the row buffers' stride).
    pub(super) fn stride(&self) -> usize {
        self.blocks.len() * self.width
    }
}

/// `(hi << 15) + lo + (1 << 21) >> 22`, as i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn finish(lo: __m256i, hi: __m256i) -> __m256i {
    let half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    let s = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 15), lo), half);
    _mm256_srai_epi32(s, PRECISION_BITS)
}

/// Two finished i32 vectors (unpacklo / unpackhi orders) -> 16 clamped values in element order.
#[inline]
#[target_feature(enable = "avx2")]
fn clamp16(a: __m256i, b: __m256i) -> __m256i {
    let v = _mm256_packs_epi32(a, b);
    _mm256_min_epi16(
        _mm256_max_epi16(v, _mm256_setzero_si256()),
        _mm256_set1_epi16(255),
    )
}

/// Horizontal pass of one u8 source row into `out` (`plan.stride()` i16 values; elements past
/// the row are garbage-free zeros or clamped sums of zero taps). `buf` is scratch of
/// `plan.padded_len` i16.
///
/// # Safety
/// AVX2 must be available, and AVX-512BW for a plan of width 32.
pub(super) unsafe fn hrow(plan: &HPlan, row: &[u8], buf: &mut Vec<i16>, out: &mut [i16]) {
    assert_eq!(row.len(), plan.src_len);
    assert!(out.len() >= plan.stride());
    buf.clear();
    buf.resize(plan.padded_len, 0);
    for (d, &s) in buf[PAD_L..].iter_mut().zip(row) {
        *d = s as i16;
    }
    // SAFETY: the caller checked the CPU for the plan's width.
    unsafe {
        if plan.width == 32 {
            hrow32(plan, buf, out)
        } else {
            hrow16(plan, buf, out)
        }
    }
}

/// [`hrow`] on 16-element blocks, from the widened row in `buf`.
#[target_feature(enable = "avx2")]
fn hrow16(plan: &HPlan, buf: &[i16], out: &mut [i16]) {
    assert_eq!(plan.width, 16);
    let src = buf.as_ptr();
    for (b, &(base, pairs, ci)) in plan.blocks.iter().enumerate() {
        let mut acc = [_mm256_setzero_si256(); 4];
        for p in 0..pairs {
            let off = (PAD_L as isize + (b * 16) as isize + 3 * (base + 2 * p as isize)) as usize;
            // SAFETY: `HPlan::new` bounded every read by `padded_len`, and the coefficient
            // table holds 4 vectors per (block, pair).
            unsafe {
                let a = _mm256_loadu_si256(src.add(off) as *const __m256i);
                let bb = _mm256_loadu_si256(src.add(off + 3) as *const __m256i);
                let lo_pairs = _mm256_unpacklo_epi16(a, bb);
                let hi_pairs = _mm256_unpackhi_epi16(a, bb);
                let cv = plan.coef.as_ptr().add((ci + 4 * p) * 16) as *const __m256i;
                acc[0] =
                    _mm256_add_epi32(acc[0], _mm256_madd_epi16(lo_pairs, _mm256_loadu_si256(cv)));
                acc[1] = _mm256_add_epi32(
                    acc[1],
                    _mm256_madd_epi16(lo_pairs, _mm256_loadu_si256(cv.add(1))),
                );
                acc[2] = _mm256_add_epi32(
                    acc[2],
                    _mm256_madd_epi16(hi_pairs, _mm256_loadu_si256(cv.add(2))),
                );
                acc[3] = _mm256_add_epi32(
                    acc[3],
                    _mm256_madd_epi16(hi_pairs, _mm256_loadu_si256(cv.add(3))),
                );
            }
        }
        let v = clamp16(finish(acc[0], acc[1]), finish(acc[2], acc[3]));
        // SAFETY: `out` holds `stride()` = 16 per block.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(b * 16) as *mut __m256i, v) };
    }
}

/// [`hrow`] on 32-element blocks.
#[target_feature(enable = "avx512f,avx512bw")]
fn hrow32(plan: &HPlan, buf: &[i16], out: &mut [i16]) {
    assert_eq!(plan.width, 32);
    let src = buf.as_ptr();
    for (b, &(base, pairs, ci)) in plan.blocks.iter().enumerate() {
        let mut acc = [_mm512_setzero_si512(); 4];
        for p in 0..pairs {
            let off = (PAD_L as isize + (b * 32) as isize + 3 * (base + 2 * p as isize)) as usize;
            // SAFETY: `HPlan::new` bounded every read by `padded_len`, and the coefficient
            // table holds 4 vectors of 32 per (block, pair).
            unsafe {
                let a = _mm512_loadu_si512(src.add(off) as *const __m512i);
                let bb = _mm512_loadu_si512(src.add(off + 3) as *const __m512i);
                let lo_pairs = _mm512_unpacklo_epi16(a, bb);
                let hi_pairs = _mm512_unpackhi_epi16(a, bb);
                let cv = plan.coef.as_ptr().add((ci + 4 * p) * 32) as *const __m512i;
                let c = |k: usize| _mm512_loadu_si512(cv.add(k));
                acc[0] = _mm512_add_epi32(acc[0], _mm512_madd_epi16(lo_pairs, c(0)));
                acc[1] = _mm512_add_epi32(acc[1], _mm512_madd_epi16(lo_pairs, c(1)));
                acc[2] = _mm512_add_epi32(acc[2], _mm512_madd_epi16(hi_pairs, c(2)));
                acc[3] = _mm512_add_epi32(acc[3], _mm512_madd_epi16(hi_pairs, c(3)));
            }
        }
        let v = clamp32(finish32(acc[0], acc[1]), finish32(acc[2], acc[3]));
        // SAFETY: `out` holds `stride()` = 32 per block.
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(b * 32) as *mut __m512i, v) };
    }
}

/// [`finish`] on 16 lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn finish32(lo: __m512i, hi: __m512i) -> __m512i {
    let half = _mm512_set1_epi32(1 << (PRECISION_BITS - 1));
    let s = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 15), lo), half);
    _mm512_srai_epi32(s, PRECISION_BITS as u32)
}

/// Two finished i32 vectors (unpacklo / unpackhi orders) -> 32 clamped values in element order.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn clamp32(a: __m512i, b: __m512i) -> __m512i {
    let v = _mm512_packs_epi32(a, b);
    _mm512_min_epi16(
        _mm512_max_epi16(v, _mm512_setzero_si512()),
        _mm512_set1_epi16(255),
    )
}

/// Vertical pass for one output row: `rows[t]` (i16 rows of `n` elements, `n` a multiple of
/// the plan's width) weighted by `k[t]`, clamped, written as u8 to `out[..n]`.
///
/// # Safety
/// As [`hrow`].
pub(super) unsafe fn vrow(plan: &HPlan, rows: &[&[i16]], k: &[i32], out: &mut [u8], n: usize) {
    // SAFETY: the caller checked the CPU for the plan's width.
    unsafe {
        if plan.width == 32 {
            vrow32(rows, k, out, n)
        } else {
            vrow16(rows, k, out, n)
        }
    }
}

/// The vertical taps of one output row as `pmaddwd` pairs: per pair its two rows and the
/// lo/hi halves of both coefficients packed as `k0 | k1 << 16` for a broadcast (an odd last
/// tap pairs with its own row at weight 0). Checks the shapes `vrow16`/`vrow32` rely on.
struct VTaps {
    pairs: usize,
    ptrs: [(*const i16, *const i16); MAX_PAIRS],
    lo_hi: [(i32, i32); MAX_PAIRS],
}

impl VTaps {
    fn new(rows: &[&[i16]], k: &[i32], out: &[u8], n: usize, width: usize) -> Self {
        assert!(n.is_multiple_of(width) && out.len() >= n);
        assert!(!rows.is_empty() && rows.len() == k.len());
        assert!(rows.iter().all(|r| r.len() >= n));
        let pairs = rows.len().div_ceil(2);
        assert!(pairs <= MAX_PAIRS);
        let mut t = VTaps {
            pairs,
            ptrs: [(std::ptr::null(), std::ptr::null()); MAX_PAIRS],
            lo_hi: [(0, 0); MAX_PAIRS],
        };
        for p in 0..pairs {
            let t0 = 2 * p;
            let (t1, k1) = if t0 + 1 < rows.len() {
                (t0 + 1, k[t0 + 1])
            } else {
                (t0, 0)
            };
            let (l0, h0) = split(k[t0]);
            let (l1, h1) = split(k1);
            let pack = |a: i16, b: i16| (a as u16 as i32) | ((b as i32) << 16);
            t.lo_hi[p] = (pack(l0, l1), pack(h0, h1));
            t.ptrs[p] = (rows[t0].as_ptr(), rows[t1].as_ptr());
        }
        t
    }
}

/// [`vrow`] with AVX2, `n` a multiple of 16.
#[target_feature(enable = "avx2")]
fn vrow16(rows: &[&[i16]], k: &[i32], out: &mut [u8], n: usize) {
    let t = VTaps::new(rows, k, out, n, 16);
    let coef = t
        .lo_hi
        .map(|(l, h)| (_mm256_set1_epi32(l), _mm256_set1_epi32(h)));
    let (pairs, ptrs) = (t.pairs, t.ptrs);
    let mut j = 0;
    while j < n {
        let mut acc = [_mm256_setzero_si256(); 4];
        for p in 0..pairs {
            // SAFETY: every row holds at least `n` elements and `j + 16 <= n`.
            unsafe {
                let a = _mm256_loadu_si256(ptrs[p].0.add(j) as *const __m256i);
                let b = _mm256_loadu_si256(ptrs[p].1.add(j) as *const __m256i);
                let lo_pairs = _mm256_unpacklo_epi16(a, b);
                let hi_pairs = _mm256_unpackhi_epi16(a, b);
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(lo_pairs, coef[p].0));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(lo_pairs, coef[p].1));
                acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(hi_pairs, coef[p].0));
                acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(hi_pairs, coef[p].1));
            }
        }
        let v = clamp16(finish(acc[0], acc[1]), finish(acc[2], acc[3]));
        let bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(v, v), 0x08);
        // SAFETY: `out` holds `n` bytes and `j + 16 <= n`.
        unsafe {
            _mm_storeu_si128(
                out.as_mut_ptr().add(j) as *mut __m128i,
                _mm256_castsi256_si128(bytes),
            )
        };
        j += 16;
    }
}

/// [`vrow`] with AVX-512BW, `n` a multiple of 32.
#[target_feature(enable = "avx512f,avx512bw")]
fn vrow32(rows: &[&[i16]], k: &[i32], out: &mut [u8], n: usize) {
    let t = VTaps::new(rows, k, out, n, 32);
    let coef = t
        .lo_hi
        .map(|(l, h)| (_mm512_set1_epi32(l), _mm512_set1_epi32(h)));
    let (pairs, ptrs) = (t.pairs, t.ptrs);
    let mut j = 0;
    while j < n {
        let mut acc = [_mm512_setzero_si512(); 4];
        for p in 0..pairs {
            // SAFETY: every row holds at least `n` elements and `j + 32 <= n`.
            unsafe {
                let a = _mm512_loadu_si512(ptrs[p].0.add(j) as *const __m512i);
                let b = _mm512_loadu_si512(ptrs[p].1.add(j) as *const __m512i);
                let lo_pairs = _mm512_unpacklo_epi16(a, b);
                let hi_pairs = _mm512_unpackhi_epi16(a, b);
                acc[0] = _mm512_add_epi32(acc[0], _mm512_madd_epi16(lo_pairs, coef[p].0));
                acc[1] = _mm512_add_epi32(acc[1], _mm512_madd_epi16(lo_pairs, coef[p].1));
                acc[2] = _mm512_add_epi32(acc[2], _mm512_madd_epi16(hi_pairs, coef[p].0));
                acc[3] = _mm512_add_epi32(acc[3], _mm512_madd_epi16(hi_pairs, coef[p].1));
            }
        }
        let v = clamp32(finish32(acc[0], acc[1]), finish32(acc[2], acc[3]));
        // Values are clamped to 0..=255, so truncating each i16 to its low byte is exact.
        let bytes = _mm512_cvtepi16_epi8(v);
        // SAFETY: `out` holds `n` bytes and `j + 32 <= n`.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(j) as *mut __m256i, bytes) };
        j += 32;
    }
}
