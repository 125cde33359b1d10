//! Row-wise normalizations and element-wise activations (f32 in and out; statistics in f64 so
//! the result is the correctly rounded value the f32 reference approximates).

/// LayerNorm over rows of width `dim`, in place. `gamma`/`beta` absent = no affine.
pub fn layer_norm(
    x: &mut [f32],
    dim: usize,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
) {
    for row in x.chunks_exact_mut(dim) {
        let mut s = 0.0f64;
        for &v in row.iter() {
            s += v as f64;
        }
        let mean = s / dim as f64;
        let mut ss = 0.0f64;
        for &v in row.iter() {
            let d = v as f64 - mean;
            ss += d * d;
        }
        let inv = 1.0 / (ss / dim as f64 + eps as f64).sqrt();
        for (j, v) in row.iter_mut().enumerate() {
            let mut y = ((*v as f64 - mean) * inv) as f32;
            if let Some(g) = gamma {
                y *= g[j];
            }
            if let Some(b) = beta {
                y += b[j];
            }
            *v = y;
        }
    }
}

/// RMSNorm over rows of width `dim`, in place: x / sqrt(mean(x²) + eps) · w.
pub fn rms_norm(x: &mut [f32], dim: usize, w: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(dim) {
        let mut ss = 0.0f64;
        for &v in row.iter() {
            ss += (v as f64) * (v as f64);
        }
        let inv = (1.0 / (ss / dim as f64 + eps as f64).sqrt()) as f32;
        for (v, &g) in row.iter_mut().zip(w) {
            *v = g * (*v * inv);
        }
    }
}

/// GELU with the tanh approximation (`gelu_pytorch_tanh`, diffusers `gelu-approximate`):
/// 0.5·x·(1 + tanh(z)) = x·sigmoid(2z), z = √(2/π)(x + 0.044715x³).
pub fn gelu_tanh(x: &mut [f32]) {
    #[inline(always)]
    fn body(x: &mut [f32]) {
        const K2: f32 = 2.0 * 0.797_884_6; // 2·sqrt(2/pi)
        for v in x.iter_mut() {
            let u = *v;
            *v = u / (1.0 + fast_exp(-K2 * (u + 0.044715 * u * u * u)));
        }
    }
    dispatch(x, body);
}

/// exp(x) for f32 within ~2 ulp, branch-free so loops over it vectorize: 2^n · p(r) with
/// n = round(x·log2 e), r = x − n·ln 2 (two-part ln 2), p a degree-6 Taylor polynomial.
#[inline(always)]
pub fn fast_exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round to nearest via the 1.5·2^23 trick (vectorizes, unlike f32::round).
    const MAGIC: f32 = 12_582_912.0;
    let n = (x * std::f32::consts::LOG2_E + MAGIC) - MAGIC;
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// Runs an element-wise loop compiled for AVX-512 when the CPU has it.
#[inline(always)]
fn dispatch(x: &mut [f32], body: fn(&mut [f32])) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn wide(x: &mut [f32], body: fn(&mut [f32])) {
            body(x)
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F is present.
            unsafe { wide(x, body) };
            return;
        }
    }
    body(x)
}

/// Exact GELU: x·Φ(x) = 0.5·x·(1 + erf(x/√2)).
pub fn gelu_erf(x: &mut [f32]) {
    for v in x.iter_mut() {
        let u = *v as f64;
        *v = (0.5 * u * (1.0 + erf(u / std::f64::consts::SQRT_2))) as f32;
    }
}

/// SiLU / swish: x·sigmoid(x).
pub fn silu(x: &mut [f32]) {
    #[inline(always)]
    fn body(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v /= 1.0 + fast_exp(-*v);
        }
    }
    dispatch(x, body);
}

/// ReLU: max(x, 0), in place.
pub fn relu(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = v.max(0.0);
    }
}

/// erf(x) in f64 (Numerical Recipes `erfc` Chebyshev fit, fractional error < 1.2e-7 of erfc,
/// far below the f32 output resolution around the GELU knee).
pub fn erf(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { 1.0 - r } else { r - 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn erf_matches_known_values() {
        for (x, e) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_8),
            (1.0, 0.842_700_792_9),
            (-2.0, -0.995_322_265),
        ] {
            assert!((erf(x) - e).abs() < 2e-7, "erf({x})");
        }
    }
    #[test]
    fn fast_exp_and_activations_are_accurate() {
        let mut x = -30.0f32;
        while x < 30.0 {
            let (a, b) = (fast_exp(x), (x as f64).exp());
            assert!(((a as f64 - b) / b).abs() < 5e-7, "exp({x}): {a} vs {b}");
            let mut g = [x];
            gelu_tanh(&mut g);
            let xd = x as f64;
            let want = 0.5 * xd * (1.0 + (0.7978845608 * (xd + 0.044715 * xd * xd * xd)).tanh());
            assert!(
                (g[0] as f64 - want).abs() < 1e-6 * (1.0 + want.abs()),
                "gelu({x})"
            );
            let mut s = [x];
            silu(&mut s);
            assert!(
                (s[0] as f64 - xd / (1.0 + (-xd).exp())).abs() < 1e-6 * (1.0 + xd.abs()),
                "silu({x})"
            );
            x += 0.0137;
        }
    }

    #[test]
    fn layer_norm_zero_mean_unit_var() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut x, 4, None, None, 0.0);
        let m: f32 = x.iter().sum::<f32>() / 4.0;
        let v: f32 = x.iter().map(|a| a * a).sum::<f32>() / 4.0;
        assert!(m.abs() < 1e-6 && (v - 1.0).abs() < 1e-5);
    }
}
