//! y[M, N] (+)= x[M, K] · W (+ bias): f32 activations, f32 or bf16 weights.
//!
//! Structure (one output panel of `NR` = 32 columns at a time, panels split across threads):
//! 1. the weight panel `[K][32]` is widened to f32 into a per-thread buffer (bf16 weights stay
//!    bf16 in memory; the widening is amortized over all M rows);
//! 2. an `MR`×32 register-tile microkernel (AVX-512: 24 accumulators, one broadcast of x per
//!    row and k) sweeps the M rows against the panel.
//!
//! Weights of `nn.Linear` layers are pre-packed once at load into panels `[⌈N/32⌉][K][32]`
//! ([`PackedMat`]) so that step 1 is a contiguous copy; `[K, N]` (category-specific layers,
//! attention values) and `[N, K]` (attention keys) matrices are read in place.

use crate::weights::Data;
use half::bf16;
use rayon::prelude::*;
use std::cell::RefCell;

/// Output columns per panel (two AVX-512 vectors).
pub const NR: usize = 32;
/// Rows per microkernel tile.
const MR: usize = 12;

/// Weight storage of a [`PackedMat`].
#[derive(Debug, Clone)]
pub enum Packed {
    /// f32 weights, as stored.
    F32(Vec<f32>),
    /// bf16 weights, widened to f32 panel by panel inside the GEMM.
    Bf16(Vec<bf16>),
}

/// An `nn.Linear` weight `[N, K]` re-laid as panels `[⌈N/32⌉][K][32]` (zero padded), in its
/// stored dtype.
#[derive(Debug, Clone)]
pub struct PackedMat {
    /// The panels, `⌈n/32⌉ * k * 32` elements.
    pub data: Packed,
    /// Input width (`in_features`).
    pub k: usize,
    /// Output width (`out_features`); the last panel is zero padded past it.
    pub n: usize,
}

impl PackedMat {
    /// Packs a row-major `[n, k]` matrix.
    pub fn from_out_in(src: Data<'_>, n: usize, k: usize) -> Self {
        assert_eq!(src.len(), n * k);
        let panels = n.div_ceil(NR);
        fn pack<T: Copy + Default + Send + Sync>(
            src: &[T],
            n: usize,
            k: usize,
            panels: usize,
        ) -> Vec<T> {
            let mut out = vec![T::default(); panels * k * NR];
            out.par_chunks_mut(k * NR).enumerate().for_each(|(p, dst)| {
                for jj in 0..NR.min(n - p * NR) {
                    let row = &src[(p * NR + jj) * k..][..k];
                    for (kk, &v) in row.iter().enumerate() {
                        dst[kk * NR + jj] = v;
                    }
                }
            });
            out
        }
        let data = match src {
            Data::F32(d) => Packed::F32(pack(d, n, k, panels)),
            Data::Bf16(d) => Packed::Bf16(pack(d, n, k, panels)),
        };
        Self { data, k, n }
    }
    /// Borrows the panels as a [`WeightMat::Packed`] for [`gemm`].
    pub fn view(&self) -> WeightMat<'_> {
        let data = match &self.data {
            Packed::F32(v) => Data::F32(v),
            Packed::Bf16(v) => Data::Bf16(v),
        };
        WeightMat::Packed {
            data,
            k: self.k,
            n: self.n,
        }
    }
    /// Heap size of the packed panels in bytes (padding included).
    pub fn bytes(&self) -> usize {
        match &self.data {
            Packed::F32(v) => v.len() * 4,
            Packed::Bf16(v) => v.len() * 2,
        }
    }
}

/// A borrowed weight matrix in one of the layouts the GEMM reads.
#[derive(Debug, Clone, Copy)]
pub enum WeightMat<'a> {
    /// Panels `[⌈n/32⌉][k][32]` ([`PackedMat`]).
    Packed {
        /// The panels, `⌈n/32⌉ * k * 32` elements.
        data: Data<'a>,
        /// Input width.
        k: usize,
        /// Output width; the last panel is zero padded past it.
        n: usize,
    },
    /// Row-major `[k, n]` with row stride `stride` (category-specific `W[e]`, attention V).
    KMajor {
        /// The matrix elements.
        data: Data<'a>,
        /// Input width (rows).
        k: usize,
        /// Output width (columns).
        n: usize,
        /// Elements between consecutive rows (`>= n`).
        stride: usize,
    },
    /// Row-major `[n, k]` with row stride `stride` (unpacked `nn.Linear`, attention K).
    NMajor {
        /// The matrix elements.
        data: Data<'a>,
        /// Input width (columns).
        k: usize,
        /// Output width (rows).
        n: usize,
        /// Elements between consecutive rows (`>= k`).
        stride: usize,
    },
}

impl WeightMat<'_> {
    /// Input width `K` (the reduction dimension).
    pub fn k(&self) -> usize {
        match *self {
            WeightMat::Packed { k, .. }
            | WeightMat::KMajor { k, .. }
            | WeightMat::NMajor { k, .. } => k,
        }
    }
    /// Output width `N`.
    pub fn n(&self) -> usize {
        match *self {
            WeightMat::Packed { n, .. }
            | WeightMat::KMajor { n, .. }
            | WeightMat::NMajor { n, .. } => n,
        }
    }

    /// Widens panel `p` into `buf` `[k][32]` (zero padded past n).
    fn load_panel(&self, p: usize, buf: &mut [f32]) {
        let (k, n) = (self.k(), self.n());
        let j0 = p * NR;
        let nb = NR.min(n - j0);
        let buf = &mut buf[..k * NR];
        match *self {
            WeightMat::Packed { data, .. } => match data {
                Data::F32(d) => buf.copy_from_slice(&d[p * k * NR..][..k * NR]),
                Data::Bf16(d) => widen(&d[p * k * NR..][..k * NR], buf),
            },
            WeightMat::KMajor { data, stride, .. } => {
                if nb < NR {
                    buf.fill(0.0);
                }
                for kk in 0..k {
                    let dst = &mut buf[kk * NR..kk * NR + nb];
                    match data {
                        Data::F32(d) => dst.copy_from_slice(&d[kk * stride + j0..][..nb]),
                        Data::Bf16(d) => widen(&d[kk * stride + j0..][..nb], dst),
                    }
                }
            }
            WeightMat::NMajor { data, stride, .. } => {
                if nb < NR {
                    buf.fill(0.0);
                }
                for jj in 0..nb {
                    match data {
                        Data::F32(d) => {
                            for (kk, &v) in d[(j0 + jj) * stride..][..k].iter().enumerate() {
                                buf[kk * NR + jj] = v;
                            }
                        }
                        Data::Bf16(d) => {
                            for (kk, &v) in d[(j0 + jj) * stride..][..k].iter().enumerate() {
                                buf[kk * NR + jj] = v.to_f32();
                            }
                        }
                    }
                }
            }
        }
    }
}

/// bf16 → f32 is a 16-bit left shift of the bit pattern (vectorized where AVX-512 exists).
fn widen(src: &[bf16], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        // SAFETY: AVX-512F is present.
        unsafe { avx512::widen(src, dst) };
        return;
    }
    for (o, i) in dst.iter_mut().zip(src) {
        *o = f32::from_bits((i.to_bits() as u32) << 16);
    }
}

thread_local! {
    static PANEL: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: the pointer is the output matrix; the parallel column blocks that share it write
// disjoint columns (each task gets its own `nb`-wide panel), and the matrix outlives the scope.
unsafe impl Send for SendPtr {}
// SAFETY: as for Send: shared only by tasks that write disjoint regions.
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// A method (not a field access) so closures capture the Send wrapper, not the pointer.
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// Operands of one GEMM call beyond the weight.
#[derive(Debug, Clone, Copy)]
pub struct GemmArgs<'a> {
    /// `x` rows, stride `ldx`.
    pub x: &'a [f32],
    /// Elements between consecutive rows of `x` (`>= k`).
    pub ldx: usize,
    /// Rows `M` of `x` and `y`.
    pub m: usize,
    /// Bias added to every output row (`>= n` elements); `None` = no bias.
    pub bias: Option<&'a [f32]>,
    /// `y` row stride.
    pub ldy: usize,
    /// y += x·W instead of y = x·W.
    pub accumulate: bool,
    /// Split panels across the rayon pool.
    pub parallel: bool,
}

/// y = x · W + bias with contiguous `x` `[m, k]` and `y` `[m, n]`, multi-threaded.
pub fn matmul(x: &[f32], m: usize, w: &WeightMat<'_>, bias: Option<&[f32]>, y: &mut [f32]) {
    let (k, n) = (w.k(), w.n());
    gemm(
        GemmArgs {
            x,
            ldx: k,
            m,
            bias,
            ldy: n,
            accumulate: false,
            parallel: true,
        },
        w,
        y,
    );
}

/// The general entry point.
pub fn gemm(a: GemmArgs<'_>, w: &WeightMat<'_>, y: &mut [f32]) {
    let (k, n, m) = (w.k(), w.n(), a.m);
    if m == 0 || n == 0 {
        return;
    }
    assert!(a.x.len() >= (m - 1) * a.ldx + k, "gemm: x too short");
    assert!(y.len() >= (m - 1) * a.ldy + n, "gemm: y too short");
    if let Some(b) = a.bias {
        assert!(b.len() >= n, "gemm: bias too short");
    }
    match *w {
        WeightMat::Packed { data, .. } => assert!(
            data.len() >= n.div_ceil(NR) * k * NR,
            "gemm: packed weight too short"
        ),
        WeightMat::KMajor { data, stride, .. } => assert!(
            k == 0 || data.len() >= (k - 1) * stride + n,
            "gemm: weight too short"
        ),
        WeightMat::NMajor { data, stride, .. } => {
            assert!(data.len() >= (n - 1) * stride + k, "gemm: weight too short")
        }
    }
    let panels = n.div_ceil(NR);
    let yp = SendPtr(y.as_mut_ptr());
    let run = |p: usize| {
        PANEL.with(|buf| {
            let mut buf = buf.borrow_mut();
            if buf.len() < k * NR {
                buf.resize(k * NR, 0.0);
            }
            w.load_panel(p, &mut buf);
            let j0 = p * NR;
            let nb = NR.min(n - j0);
            // SAFETY: panel p writes only columns j0..j0+nb of the rows of y (extents asserted).
            unsafe {
                panel_kernel(
                    &a,
                    &buf[..k * NR],
                    k,
                    yp.get().add(j0),
                    nb,
                    a.bias.map(|b| b[j0..].as_ptr()),
                )
            };
        });
    };
    let flops = 2 * m * n * k;
    if a.parallel && panels > 1 && flops > (1 << 20) {
        (0..panels).into_par_iter().for_each(run);
    } else {
        (0..panels).for_each(run);
    }
}

/// All M rows against one widened panel.
unsafe fn panel_kernel(
    a: &GemmArgs<'_>,
    panel: &[f32],
    k: usize,
    y: *mut f32,
    nb: usize,
    bias: Option<*const f32>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            let mut i = 0;
            while i < a.m {
                let r = MR.min(a.m - i);
                // SAFETY: AVX-512F is present; pointers cover rows i..i+r (asserted by gemm).
                unsafe {
                    let xp = a.x.as_ptr().add(i * a.ldx);
                    let yp = y.add(i * a.ldy);
                    avx512::tile_dispatch(
                        r,
                        xp,
                        a.ldx,
                        panel.as_ptr(),
                        k,
                        yp,
                        a.ldy,
                        nb,
                        bias,
                        a.accumulate,
                    );
                }
                i += r;
            }
            return;
        }
    }
    // SAFETY: `y` and `bias` cover the rows and the `nb` columns of this panel (asserted by gemm).
    unsafe { portable_panel(a, panel, k, y, nb, bias) };
}

#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx512f"))
}

/// Fallback for CPUs without AVX-512: 4-row tiles, 32-wide accumulators the compiler vectorizes.
unsafe fn portable_panel(
    a: &GemmArgs<'_>,
    panel: &[f32],
    k: usize,
    y: *mut f32,
    nb: usize,
    bias: Option<*const f32>,
) {
    const R: usize = 4;
    let mut i = 0;
    while i < a.m {
        let r = R.min(a.m - i);
        let mut acc = [[0.0f32; NR]; R];
        for kk in 0..k {
            let wrow: &[f32; NR] = panel[kk * NR..(kk + 1) * NR].try_into().unwrap();
            for (rr, accr) in acc.iter_mut().enumerate().take(r) {
                let xv = a.x[(i + rr) * a.ldx + kk];
                for (c, wv) in accr.iter_mut().zip(wrow) {
                    *c += xv * wv;
                }
            }
        }
        for (rr, accr) in acc.iter().enumerate().take(r) {
            // SAFETY: row i+rr, columns 0..nb of this panel are inside y (asserted by gemm).
            let yrow = unsafe { std::slice::from_raw_parts_mut(y.add((i + rr) * a.ldy), nb) };
            for (j, out) in yrow.iter_mut().enumerate() {
                let mut v = accr[j];
                if let Some(b) = bias {
                    // SAFETY: the bias covers this panel's `nb` columns (asserted by gemm).
                    v += unsafe { *b.add(j) };
                }
                *out = if a.accumulate { *out + v } else { v };
            }
        }
        i += r;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use half::bf16;
    use std::arch::x86_64::*;

    /// 16 bf16 → 16 f32 per step: zero-extend to 32 bits, shift into the high half. A safe
    /// `#[target_feature]` function: its only contract is the CPU feature, which callers
    /// without AVX-512F must assert in an `unsafe` call.
    #[target_feature(enable = "avx512f")]
    pub fn widen(src: &[bf16], dst: &mut [f32]) {
        let n = src.len().min(dst.len());
        let mut i = 0;
        // SAFETY: AVX-512F is enabled for this function; each step reads 16 bf16 and writes
        // 16 f32 at `i`, with `i + 16 <= n` inside both slices.
        unsafe {
            while i + 16 <= n {
                let h = _mm256_loadu_si256(src.as_ptr().add(i) as *const __m256i);
                let w = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h));
                _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_castsi512_ps(w));
                i += 16;
            }
        }
        for j in i..n {
            dst[j] = f32::from_bits((src[j].to_bits() as u32) << 16);
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tile_dispatch(
        r: usize,
        x: *const f32,
        ldx: usize,
        w: *const f32,
        k: usize,
        y: *mut f32,
        ldy: usize,
        nb: usize,
        bias: Option<*const f32>,
        acc: bool,
    ) {
        let b = bias.unwrap_or(std::ptr::null());
        // SAFETY: the caller's contract (AVX-512F present, pointers covering `r` rows of `x`
        // and `y`, `k` panel rows, `nb` bias entries) is exactly `tile`'s.
        unsafe {
            match r {
                12 => tile::<12>(x, ldx, w, k, y, ldy, nb, b, acc),
                11 => tile::<11>(x, ldx, w, k, y, ldy, nb, b, acc),
                10 => tile::<10>(x, ldx, w, k, y, ldy, nb, b, acc),
                9 => tile::<9>(x, ldx, w, k, y, ldy, nb, b, acc),
                8 => tile::<8>(x, ldx, w, k, y, ldy, nb, b, acc),
                7 => tile::<7>(x, ldx, w, k, y, ldy, nb, b, acc),
                6 => tile::<6>(x, ldx, w, k, y, ldy, nb, b, acc),
                5 => tile::<5>(x, ldx, w, k, y, ldy, nb, b, acc),
                4 => tile::<4>(x, ldx, w, k, y, ldy, nb, b, acc),
                3 => tile::<3>(x, ldx, w, k, y, ldy, nb, b, acc),
                2 => tile::<2>(x, ldx, w, k, y, ldy, nb, b, acc),
                1 => tile::<1>(x, ldx, w, k, y, ldy, nb, b, acc),
                _ => unreachable!("tile rows"),
            }
        }
    }

    /// R rows × 32 columns: 2R accumulators, per k two panel loads and R broadcasts.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const R: usize>(
        x: *const f32,
        ldx: usize,
        w: *const f32,
        k: usize,
        y: *mut f32,
        ldy: usize,
        nb: usize,
        bias: *const f32,
        accumulate: bool,
    ) {
        // SAFETY: AVX-512F is enabled for this function; the caller guarantees `x` holds R rows
        // of `k` values at stride `ldx`, `w` a k×32 panel, `y` R rows of `nb` at stride `ldy`,
        // and `bias` `nb` values when it is not null.
        unsafe {
            let mut c0 = [_mm512_setzero_ps(); R];
            let mut c1 = [_mm512_setzero_ps(); R];
            for kk in 0..k {
                let w0 = _mm512_loadu_ps(w.add(kk * 32));
                let w1 = _mm512_loadu_ps(w.add(kk * 32 + 16));
                for r in 0..R {
                    let b = _mm512_set1_ps(*x.add(r * ldx + kk));
                    c0[r] = _mm512_fmadd_ps(b, w0, c0[r]);
                    c1[r] = _mm512_fmadd_ps(b, w1, c1[r]);
                }
            }
            let m0: __mmask16 = if nb >= 16 {
                0xffff
            } else {
                ((1u32 << nb) - 1) as u16
            };
            let m1: __mmask16 = if nb >= 32 {
                0xffff
            } else if nb > 16 {
                ((1u32 << (nb - 16)) - 1) as u16
            } else {
                0
            };
            let (b0, b1) = if bias.is_null() {
                (_mm512_setzero_ps(), _mm512_setzero_ps())
            } else {
                (
                    _mm512_maskz_loadu_ps(m0, bias),
                    _mm512_maskz_loadu_ps(m1, bias.add(16)),
                )
            };
            for r in 0..R {
                let yp = y.add(r * ldy);
                let mut v0 = _mm512_add_ps(c0[r], b0);
                let mut v1 = _mm512_add_ps(c1[r], b1);
                if accumulate {
                    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, yp));
                    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, yp.add(16)));
                }
                _mm512_mask_storeu_ps(yp, m0, v0);
                _mm512_mask_storeu_ps(yp.add(16), m1, v1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], m: usize, k: usize, n: usize, w_nk: &[f32]) -> Vec<f32> {
        let mut y = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                y[i * n + j] = (0..k)
                    .map(|kk| x[i * k + kk] as f64 * w_nk[j * k + kk] as f64)
                    .sum::<f64>() as f32;
            }
        }
        y
    }

    #[test]
    fn every_layout_and_dtype_matches_naive() {
        for (m, k, n) in [(7, 37, 131), (13, 64, 32), (1, 5, 3), (25, 40, 160)] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
                .collect();
            let w_nk: Vec<f32> = (0..k * n)
                .map(|i| bf16::from_f32(((i * 11 % 17) as f32 - 8.0) / 16.0).to_f32())
                .collect();
            let mut w_kn = vec![0.0; k * n];
            for j in 0..n {
                for kk in 0..k {
                    w_kn[kk * n + j] = w_nk[j * k + kk];
                }
            }
            let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.01).collect();
            let mut want = naive(&x, m, k, n, &w_nk);
            for row in want.chunks_mut(n) {
                for (v, b) in row.iter_mut().zip(&bias) {
                    *v += b;
                }
            }
            let nk_b: Vec<bf16> = w_nk.iter().map(|&v| bf16::from_f32(v)).collect();
            let kn_b: Vec<bf16> = w_kn.iter().map(|&v| bf16::from_f32(v)).collect();
            let packed = [
                PackedMat::from_out_in(Data::F32(&w_nk), n, k),
                PackedMat::from_out_in(Data::Bf16(&nk_b), n, k),
            ];
            let mats = [
                packed[0].view(),
                packed[1].view(),
                WeightMat::KMajor {
                    data: Data::F32(&w_kn),
                    k,
                    n,
                    stride: n,
                },
                WeightMat::KMajor {
                    data: Data::Bf16(&kn_b),
                    k,
                    n,
                    stride: n,
                },
                WeightMat::NMajor {
                    data: Data::F32(&w_nk),
                    k,
                    n,
                    stride: k,
                },
            ];
            for (t, w) in mats.iter().enumerate() {
                let mut y = vec![1.0; m * n];
                matmul(&x, m, w, Some(&bias), &mut y);
                for (a, b) in y.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-4, "case {t} ({m},{k},{n}): {a} vs {b}");
                }
                // accumulate mode adds onto y
                gemm(
                    GemmArgs {
                        x: &x,
                        ldx: k,
                        m,
                        bias: None,
                        ldy: n,
                        accumulate: true,
                        parallel: false,
                    },
                    w,
                    &mut y,
                );
                for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                    let extra = want[i] - bias[i % n];
                    assert!((a - (b + extra)).abs() < 1e-3, "accumulate case {t}");
                }
            }
        }
    }
}
