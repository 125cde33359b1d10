//! `torch.randn` on the CPU, bit-for-bit, so a seed means what it means in the Python policy.
//!
//! PyTorch's CPU generator is a 32-bit mt19937 seeded with the low 32 bits of the seed
//! (`at::mt19937::init_with_uint32`). For a contiguous float tensor of 16 or more elements,
//! `normal_kernel` fills it with uniform floats (`(u32 & 0xFFFFFF) * 2^-24`) and then applies a
//! Box–Muller transform 16 values at a time (`normal_fill_16_AVX2`: `log256_ps` / `sincos256_ps`
//! from `avx_mathfun.h`, Cephes single-precision polynomials), recomputing the last 16 values
//! from fresh uniforms when the size is not a multiple of 16. Smaller tensors use the scalar
//! `at::normal_distribution<double>` (53-bit uniforms, `log1p`, cached second sample) and round
//! to float. This module reproduces both paths; the x86 AVX2 kernel is the one PyTorch
//! dispatches to on any machine with AVX2 (all the goldens were produced that way). PyTorch's
//! x86 wheels are built by GCC with `-mfma` and the default `-ffp-contract=fast`, so each
//! `mul` feeding an `add` in those kernels is fused into an FMA; the `mul_add` calls below sit
//! exactly where GCC fuses (the first single-use product of each sum, in program order).

// The polynomial constants are copied digit for digit from `avx_mathfun.h`: the f32 values
// they round to are what matters, and keeping the source spelling makes them checkable.
#![allow(clippy::excessive_precision, clippy::approx_constant)]

/// PyTorch's `at::mt19937`.
pub struct Mt19937 {
    state: [u32; 624],
    index: usize,
}

impl Mt19937 {
    /// `torch.Generator().manual_seed(seed)`: only the low 32 bits are used.
    pub fn new(seed: u64) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed as u32;
        for j in 1..624 {
            state[j] = 1812433253u32
                .wrapping_mul(state[j - 1] ^ (state[j - 1] >> 30))
                .wrapping_add(j as u32);
        }
        Self { state, index: 624 }
    }

    fn twist(&mut self) {
        for i in 0..624 {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
            let mut v = self.state[(i + 397) % 624] ^ (y >> 1);
            if y & 1 != 0 {
                v ^= 0x9908_b0df;
            }
            self.state[i] = v;
        }
        self.index = 0;
    }

    /// Next 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    fn uniform_f32(&mut self) -> f32 {
        (self.next_u32() & 0x00FF_FFFF) as f32 * (1.0 / 16_777_216.0)
    }

    fn uniform_f64(&mut self) -> f64 {
        let hi = self.next_u32() as u64;
        let lo = self.next_u32() as u64;
        (((hi << 32) | lo) & ((1u64 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }
}

/// `torch.randn(n, generator=torch.Generator().manual_seed(seed))` as f32 values (row-major for
/// any shape with `n` elements).
pub fn randn(seed: u64, n: usize) -> Vec<f32> {
    let mut g = Mt19937::new(seed);
    if n >= 16 {
        let mut data: Vec<f32> = (0..n).map(|_| g.uniform_f32()).collect();
        let mut i = 0;
        while i + 16 <= n {
            normal_fill_16(&mut data[i..i + 16]);
            i += 16;
        }
        if !n.is_multiple_of(16) {
            let tail = &mut data[n - 16..];
            for v in tail.iter_mut() {
                *v = g.uniform_f32();
            }
            normal_fill_16(tail);
        }
        data
    } else {
        let mut out = Vec::with_capacity(n);
        let mut cached: Option<f64> = None;
        for _ in 0..n {
            if let Some(c) = cached.take() {
                out.push(c as f32);
                continue;
            }
            let u1 = g.uniform_f64();
            let u2 = g.uniform_f64();
            let r = (-2.0 * (-u2).ln_1p()).sqrt();
            let theta = 2.0 * std::f64::consts::PI * u1;
            cached = Some(r * theta.sin());
            out.push((r * theta.cos()) as f32);
        }
        out
    }
}

/// [`randn`], remembering the last few `(seed, n)` results: a robot client usually sends the
/// same seed (or none, the default 42) with every request, and the values are a pure function
/// of the two, so each is computed once (~100 µs for the 3B model's 50×128 on the CI box).
pub fn randn_cached(seed: u64, n: usize) -> Vec<f32> {
    use std::sync::Mutex;
    /// Distinct seeds kept; the oldest goes first.
    const KEEP: usize = 8;
    static CACHE: Mutex<Vec<(u64, usize, Vec<f32>)>> = Mutex::new(Vec::new());
    let lock = || CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, _, v)) = lock().iter().find(|(s, m, _)| (*s, *m) == (seed, n)) {
        return v.clone();
    }
    let v = randn(seed, n);
    let mut cache = lock();
    if !cache.iter().any(|(s, m, _)| (*s, *m) == (seed, n)) {
        if cache.len() == KEEP {
            cache.remove(0);
        }
        cache.push((seed, n, v.clone()));
    }
    v
}

/// `normal_fill_16_AVX2` with mean 0 and std 1. `mul_add` is a true fused multiply-add either
/// way; with the `fma` CPU feature it is one instruction instead of a libm call.
fn normal_fill_16(d: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the `fma` feature was detected at run time.
        unsafe { normal_fill_16_fma(d) };
        return;
    }
    normal_fill_16_body(d);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn normal_fill_16_fma(d: &mut [f32]) {
    normal_fill_16_body(d);
}

#[inline(always)]
fn normal_fill_16_body(d: &mut [f32]) {
    let two_pi = (2.0 * std::f64::consts::PI) as f32;
    for j in 0..8 {
        let u1 = 1.0f32 - d[j];
        let u2 = d[j + 8];
        let radius = (-2.0f32 * log_ps(u1)).sqrt();
        let theta = two_pi * u2;
        let (s, c) = sincos_ps(theta);
        d[j] = radius * c;
        d[j + 8] = radius * s;
    }
}

/// `log256_ps` (Cephes `logf` polynomial), one lane.
#[inline(always)]
fn log_ps(x: f32) -> f32 {
    let invalid = x <= 0.0;
    let x = x.max(f32::from_bits(0x0080_0000));
    let bits = x.to_bits();
    let imm0 = (bits >> 23) as i32 - 0x7f;
    let mut x = f32::from_bits((bits & !0x7f80_0000) | 0.5f32.to_bits());
    let mut e = imm0 as f32 + 1.0;
    let mask = x < 0.707_106_781_186_547_524_f32;
    let tmp = if mask { x } else { 0.0 };
    x -= 1.0;
    e -= if mask { 1.0 } else { 0.0 };
    x += tmp;
    let z = x * x;
    let p = [
        7.037_683_629_2E-2_f32,
        -1.151_461_031_0E-1,
        1.167_699_874_0E-1,
        -1.242_014_084_6E-1,
        1.424_932_278_7E-1,
        -1.666_805_766_5E-1,
        2.000_071_476_5E-1,
        -2.499_999_399_3E-1,
        3.333_333_117_4E-1,
    ];
    let mut y = p[0];
    for &c in &p[1..] {
        y = y.mul_add(x, c);
    }
    y *= x;
    let t = e * -2.121_944_40e-4_f32;
    y = y.mul_add(z, t);
    y = (-z).mul_add(0.5, y);
    x = e.mul_add(0.693_359_375_f32, x + y);
    if invalid { f32::NAN } else { x }
}

/// `sincos256_ps` (Cephes `sinf`/`cosf`), one lane: returns (sin, cos).
#[inline(always)]
fn sincos_ps(x: f32) -> (f32, f32) {
    let sign_in = x.to_bits() & 0x8000_0000;
    let mut x = x.abs();
    let y = x * 1.273_239_544_735_16_f32;
    let mut j = y as i32; // cvttps: truncation
    j = (j + 1) & !1;
    let y = j as f32;
    let swap_sign_sin = ((j & 4) as u32) << 29;
    let poly_mask = (j & 2) == 0;
    x = y.mul_add(-0.785_156_25_f32, x);
    x = y.mul_add(-2.418_756_484_985_351_562_5e-4_f32, x);
    x = y.mul_add(-3.774_894_977_445_941_08e-8_f32, x);
    let sign_cos = ((!(j - 2) & 4) as u32) << 29;
    let sign_sin = sign_in ^ swap_sign_sin;
    let z = x * x;
    let mut yc = 2.443_315_711_809_948E-5_f32;
    yc = yc.mul_add(z, -1.388_731_625_493_765E-3_f32);
    yc = yc.mul_add(z, 4.166_664_568_298_827E-2_f32);
    yc *= z;
    let half_z = z * 0.5;
    yc = yc.mul_add(z, -half_z);
    yc += 1.0;
    let mut ys = -1.951_529_589_1E-4_f32;
    ys = ys.mul_add(z, 8.332_160_873_6E-3_f32);
    ys = ys.mul_add(z, -1.666_665_461_1E-1_f32);
    ys *= z;
    ys = ys.mul_add(x, x);
    let (s, c) = if poly_mask { (ys, yc) } else { (yc, ys) };
    (
        f32::from_bits(s.to_bits() ^ sign_sin),
        f32::from_bits(c.to_bits() ^ sign_cos),
    )
}
