//! Parameterized building blocks shared by the towers: Linear, CategorySpecificLinear.

use crate::cpu::attention::{AttnShape, KeyMask, attention};
use crate::cpu::gemm::{PackedMat, WeightMat, matmul};
use crate::weights::{Tensor, WeightError, WeightSource};

/// `nn.Linear`: weight `[n, k]` packed for the GEMM in its stored dtype, bias widened to f32.
#[derive(Debug, Clone)]
pub struct Linear {
    /// The weight, packed into GEMM panels.
    pub w: PackedMat,
    /// The bias `[n]` in f32; `None` for a bias-free layer.
    pub b: Option<Vec<f32>>,
    /// Input width (`in_features`).
    pub k: usize,
    /// Output width (`out_features`).
    pub n: usize,
}

impl Linear {
    /// Loads `{prefix}.weight` `[n, k]` and, if `bias`, `{prefix}.bias` `[n]`.
    pub fn load(
        ws: &dyn WeightSource,
        prefix: &str,
        k: usize,
        n: usize,
        bias: bool,
    ) -> Result<Self, WeightError> {
        let t = ws.tensor(&format!("{prefix}.weight"), &[n, k])?;
        let w = PackedMat::from_out_in(t.data(), n, k);
        t.release();
        let b = if bias {
            Some(ws.f32(&format!("{prefix}.bias"), &[n])?)
        } else {
            None
        };
        Ok(Self { w, b, k, n })
    }
    /// Borrows the packed weight for the GEMM kernels.
    pub fn mat(&self) -> WeightMat<'_> {
        self.w.view()
    }
    /// y `[m, n]` = x `[m, k]` · Wᵀ + b.
    pub fn forward_into(&self, x: &[f32], m: usize, y: &mut [f32]) {
        matmul(x, m, &self.mat(), self.b.as_deref(), y);
    }
    /// y `[m, n]` = x `[m, k]` · Wᵀ + b, into a new buffer.
    pub fn forward(&self, x: &[f32], m: usize) -> Vec<f32> {
        let mut y = vec![0.0; m * self.n];
        self.forward_into(x, m, &mut y);
        y
    }
}

/// The attention half of a pre-norm transformer block, shared by the vision tower, the LLM and
/// the DiT: `x += o(attention(q, k, v))` with scale `head_dim^-0.5`. `a` (`[q_len, heads ×
/// head_dim]`) and `h` (`[q_len, D]`) are the caller's scratch buffers.
#[allow(clippy::too_many_arguments)]
pub fn attend_residual(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    shape: AttnShape,
    mask: KeyMask,
    o: &Linear,
    a: &mut [f32],
    h: &mut [f32],
    x: &mut [f32],
) {
    let scale = (shape.head_dim as f32).powf(-0.5);
    attention(q, k, v, shape, scale, mask, a);
    o.forward_into(a, shape.q_len, h);
    add_assign(x, h);
}

/// `x += y`, element-wise.
pub fn add_assign(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// `CategorySpecificLinear`: `W` `[E, k, n]` (in × out), `b` `[E, n]`; y = x·W[e] + b[e].
#[derive(Debug, Clone)]
pub struct CatLinear {
    /// `{prefix}.W` `[E, k, n]`, in its stored dtype.
    pub w: Tensor,
    /// `{prefix}.b` `[E, n]`, in its stored dtype.
    pub b: Tensor,
    /// Embodiment slots `E` (`max_num_embodiments`).
    pub e: usize,
    /// Input width.
    pub k: usize,
    /// Output width.
    pub n: usize,
}

impl CatLinear {
    /// Loads `{prefix}.W` `[e, k, n]` and `{prefix}.b` `[e, n]`.
    pub fn load(
        ws: &dyn WeightSource,
        prefix: &str,
        e: usize,
        k: usize,
        n: usize,
    ) -> Result<Self, WeightError> {
        Ok(Self {
            w: ws.tensor(&format!("{prefix}.W"), &[e, k, n])?,
            b: ws.tensor(&format!("{prefix}.b"), &[e, n])?,
            e,
            k,
            n,
        })
    }
    /// y `[m, n]` = x `[m, k]` · W[emb] + b[emb]; panics if `emb >= e` (callers validate the embodiment id).
    pub fn forward(&self, x: &[f32], m: usize, emb: usize) -> Vec<f32> {
        assert!(emb < self.e, "embodiment id checked by the caller");
        let w = WeightMat::KMajor {
            data: self.w.data().slice(emb * self.k * self.n, self.k * self.n),
            k: self.k,
            n: self.n,
            stride: self.n,
        };
        let b = self.b.data().slice(emb * self.n, self.n).to_f32_vec();
        let mut y = vec![0.0; m * self.n];
        matmul(x, m, &w, Some(&b), &mut y);
        y
    }
}

/// LayerNorm parameters (weight, bias), widened to f32.
#[derive(Debug, Clone)]
pub struct NormParams {
    /// Scale (gamma) `[d]`.
    pub w: Vec<f32>,
    /// Shift (beta) `[d]`; `None` for an RMSNorm.
    pub b: Option<Vec<f32>>,
}

impl NormParams {
    /// Loads a LayerNorm's `{prefix}.weight` and `{prefix}.bias`, both `[d]`.
    pub fn layer_norm(ws: &dyn WeightSource, prefix: &str, d: usize) -> Result<Self, WeightError> {
        Ok(Self {
            w: ws.f32(&format!("{prefix}.weight"), &[d])?,
            b: Some(ws.f32(&format!("{prefix}.bias"), &[d])?),
        })
    }
    /// Loads an RMSNorm's `{prefix}.weight` `[d]` (no bias).
    pub fn rms_norm(ws: &dyn WeightSource, prefix: &str, d: usize) -> Result<Self, WeightError> {
        Ok(Self {
            w: ws.f32(&format!("{prefix}.weight"), &[d])?,
            b: None,
        })
    }
}
