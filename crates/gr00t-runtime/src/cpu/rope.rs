//! Rotary position embedding as the Hugging Face models apply it (`rotate_half`, NEOX layout):
//! the same rotation for Qwen3's 1-D RoPE, Qwen3-VL's interleaved M-RoPE and its 2-D vision
//! RoPE; they differ only in their cos/sin tables.

/// In place, for `heads` heads of width `hd` starting at column `offset` of each of `rows` rows
/// of stride `stride`: `x·cos + rotate_half(x)·sin`, rotate_half = `[−x₂, x₁]`; `cos`/`sin` are
/// `[rows, hd]`.
#[allow(clippy::too_many_arguments)]
pub fn apply_rotate_half(
    x: &mut [f32],
    rows: usize,
    stride: usize,
    offset: usize,
    heads: usize,
    hd: usize,
    cos: &[f32],
    sin: &[f32],
) {
    let half = hd / 2;
    for r in 0..rows {
        let (c, sn) = (&cos[r * hd..][..hd], &sin[r * hd..][..hd]);
        let row = &mut x[r * stride + offset..][..heads * hd];
        for v in row.chunks_exact_mut(hd) {
            for i in 0..half {
                let (a, b) = (v[i], v[i + half]);
                v[i] = a * c[i] - b * sn[i];
                v[i + half] = b * c[i + half] + a * sn[i + half];
            }
        }
    }
}
