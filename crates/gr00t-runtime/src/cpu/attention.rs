//! Multi-head scaled-dot-product attention on the GEMM kernels: only one head's score block
//! `[q_len, kv_len]` is materialized per worker at a time.

use super::gemm::{GemmArgs, WeightMat, gemm};
use crate::weights::Data;
use rayon::prelude::*;

/// Which keys a query may attend to.
#[derive(Debug, Clone, Copy)]
pub enum KeyMask<'a> {
    /// Every key.
    All,
    /// Keys `0..=i` for query `i` (decoder LM).
    Causal,
    /// Only the listed key indices (boolean key mask).
    Only(&'a [usize]),
}

/// Shapes of one attention call. Rows are tokens; head `h` occupies columns
/// `h*head_dim..(h+1)*head_dim` of its row; row strides allow fused QKV buffers.
#[derive(Debug, Clone, Copy)]
pub struct AttnShape {
    /// Query rows (tokens).
    pub q_len: usize,
    /// Key/value rows (tokens).
    pub kv_len: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads; divides `heads` (grouped-query attention when smaller).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Row stride of `q` in elements (`>= heads * head_dim`); the output is contiguous.
    pub q_stride: usize,
    /// Row stride of `k` and `v`, in elements (`>= kv_heads * head_dim`).
    pub kv_stride: usize,
}

/// out[i, h] = softmax(q_i,h · K_g^T · scale) · V_g, g = h / (heads / kv_heads).
/// `out` is `[q_len, heads*head_dim]`. Per head: scores by GEMM, masked row softmax, then P·V
/// by GEMM.
pub fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    s: AttnShape,
    scale: f32,
    mask: KeyMask<'_>,
    out: &mut [f32],
) {
    let hd = s.head_dim;
    let width = s.heads * hd;
    assert!(out.len() >= s.q_len * width);
    assert!(s.kv_heads > 0 && s.heads.is_multiple_of(s.kv_heads));
    let group = s.heads / s.kv_heads;
    if s.q_len == 0 {
        return;
    }
    if s.kv_len == 0 {
        out[..s.q_len * width].fill(0.0);
        return;
    }
    let keep: Option<Vec<bool>> = match mask {
        KeyMask::Only(idx) => {
            let mut keep = vec![false; s.kv_len];
            for &j in idx {
                keep[j] = true;
            }
            Some(keep)
        }
        _ => None,
    };
    let per_head = |h: usize, scores: &mut Vec<f32>| -> Vec<f32> {
        let g = h / group;
        scores.resize(s.q_len * s.kv_len, 0.0);
        let mut oh = vec![0.0f32; s.q_len * hd];
        let kmat = WeightMat::NMajor {
            data: Data::F32(&k[g * hd..]),
            k: hd,
            n: s.kv_len,
            stride: s.kv_stride,
        };
        let qa = GemmArgs {
            x: &q[h * hd..],
            ldx: s.q_stride,
            m: s.q_len,
            bias: None,
            ldy: s.kv_len,
            accumulate: false,
            parallel: false,
        };
        gemm(qa, &kmat, scores);
        for (i, row) in scores.chunks_exact_mut(s.kv_len).enumerate() {
            match mask {
                KeyMask::All => {}
                KeyMask::Causal => row[(i + 1).min(s.kv_len)..].fill(f32::NEG_INFINITY),
                KeyMask::Only(_) => {
                    for (r, &kp) in row.iter_mut().zip(keep.as_deref().unwrap_or(&[])) {
                        if !kp {
                            *r = f32::NEG_INFINITY;
                        }
                    }
                }
            }
            softmax_scaled(row, scale);
        }
        let vmat = WeightMat::KMajor {
            data: Data::F32(&v[g * hd..]),
            k: s.kv_len,
            n: hd,
            stride: s.kv_stride,
        };
        let pa = GemmArgs {
            x: scores,
            ldx: s.kv_len,
            m: s.q_len,
            bias: None,
            ldy: hd,
            accumulate: false,
            parallel: false,
        };
        gemm(pa, &vmat, &mut oh);
        oh
    };
    let heads: Vec<Vec<f32>> = if s.heads > 1 && s.q_len * s.kv_len * hd > 1 << 14 {
        (0..s.heads)
            .into_par_iter()
            .map_init(Vec::new, |scores, h| per_head(h, scores))
            .collect()
    } else {
        let mut scores = Vec::new();
        (0..s.heads).map(|h| per_head(h, &mut scores)).collect()
    };
    for (h, oh) in heads.iter().enumerate() {
        for (i, row) in oh.chunks_exact(hd).enumerate() {
            out[i * width + h * hd..][..hd].copy_from_slice(row);
        }
    }
}

/// row = softmax(row · scale); −∞ entries get probability 0; an all-masked row becomes zeros.
fn softmax_scaled(row: &mut [f32], scale: f32) {
    let mut max = f32::NEG_INFINITY;
    for r in row.iter_mut() {
        *r *= scale;
        max = max.max(*r);
    }
    if max == f32::NEG_INFINITY {
        row.fill(0.0);
        return;
    }
    let mut sum = 0.0f32;
    for r in row.iter_mut() {
        *r = (*r - max).exp();
        sum += *r;
    }
    let inv = 1.0 / sum;
    for r in row.iter_mut() {
        *r *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn single_key_returns_its_value_and_gqa_maps_heads() {
        let s = AttnShape {
            q_len: 1,
            kv_len: 1,
            heads: 2,
            kv_heads: 1,
            head_dim: 2,
            q_stride: 4,
            kv_stride: 2,
        };
        let mut out = vec![0.0; 4];
        attention(
            &[1.0, 2.0, 3.0, 4.0],
            &[0.5, 0.5],
            &[7.0, 8.0],
            s,
            1.0,
            KeyMask::All,
            &mut out,
        );
        assert_eq!(out, vec![7.0, 8.0, 7.0, 8.0]);
    }
    #[test]
    fn causal_and_key_masks() {
        let s = AttnShape {
            q_len: 2,
            kv_len: 2,
            heads: 1,
            kv_heads: 1,
            head_dim: 1,
            q_stride: 1,
            kv_stride: 1,
        };
        let mut out = vec![0.0; 2];
        attention(
            &[1.0, 1.0],
            &[0.0, 0.0],
            &[2.0, 4.0],
            s,
            1.0,
            KeyMask::Causal,
            &mut out,
        );
        assert_eq!(out[0], 2.0);
        assert!((out[1] - 3.0).abs() < 1e-6);
        attention(
            &[1.0, 1.0],
            &[0.0, 0.0],
            &[2.0, 4.0],
            s,
            1.0,
            KeyMask::Only(&[1]),
            &mut out,
        );
        assert_eq!(out, vec![4.0, 4.0]);
    }
}
