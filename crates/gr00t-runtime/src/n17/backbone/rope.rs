//! Rotary position embeddings of the Qwen3-VL backbone: the text model's 3-row M-RoPE
//! (`get_rope_index` positions, interleaved sections) and the rotate-half application shared
//! with the vision tower's 2-D RoPE.

use super::BackboneError;

/// `get_rope_index` output: the (t, h, w) position of every token and the delta
/// `max position + 1 − S` (what a generation loop would add to later positions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RopeIndex {
    /// Rows t, h, w; each `[S]`.
    pub positions: [Vec<i64>; 3],
    /// `max(positions) + 1 − S`.
    pub delta: i64,
}

/// The M-RoPE positions of a prompt (`Qwen3VLModel.get_rope_index` for images, batch 1, no
/// padding). Text tokens get their running index on all three rows; the `t·(h/m)·(w/m)` image
/// tokens of image `k` (merged grid, `m = spatial_merge_size`) get `start + (ti, row, col)`, where
/// `start` is the running index at the image; after an image the running index is `max + 1`.
///
/// As in the reference, an image is one `vision_start` token directly followed by an image
/// token, and images take the `grid_thw` rows in order; `grid_thw` must hold exactly one row per
/// such image and each image's tokens must be present in full.
pub fn rope_index(
    input_ids: &[u32],
    grid_thw: &[[usize; 3]],
    image_token_id: u32,
    vision_start_token_id: u32,
    spatial_merge_size: usize,
) -> Result<RopeIndex, BackboneError> {
    let n = input_ids.len();
    let images = input_ids
        .windows(2)
        .filter(|w| w[0] == vision_start_token_id && w[1] == image_token_id)
        .count();
    if images != grid_thw.len() {
        return Err(BackboneError::Input(format!(
            "{images} images in the prompt (vision_start + image token), {} grid_thw rows",
            grid_thw.len()
        )));
    }
    let m = spatial_merge_size.max(1);
    let mut rows: [Vec<i64>; 3] = std::array::from_fn(|_| Vec::with_capacity(n));
    // Next position for text (the reference's `max + 1` of everything placed so far).
    let mut next = 0i64;
    let mut st = 0usize;
    let push_text = |rows: &mut [Vec<i64>; 3], next: &mut i64, len: usize| {
        for i in 0..len as i64 {
            for r in rows.iter_mut() {
                r.push(*next + i);
            }
        }
        *next += len as i64;
    };
    for (k, &[t, h, w]) in grid_thw.iter().enumerate() {
        let ed = (st..n)
            .find(|&i| input_ids[i] == image_token_id)
            .ok_or_else(|| BackboneError::Input(format!("image {k}: no image token left")))?;
        if h % m != 0 || w % m != 0 {
            return Err(BackboneError::Input(format!(
                "image {k}: grid {h}x{w} is not a multiple of the merge size {m}"
            )));
        }
        let (lh, lw) = (h / m, w / m);
        let count = t * lh * lw;
        if ed + count > n {
            return Err(BackboneError::Input(format!(
                "image {k}: {count} image tokens from index {ed} run past the {n} ids"
            )));
        }
        push_text(&mut rows, &mut next, ed - st);
        let start = next;
        let mut max = start;
        for ti in 0..t {
            for r in 0..lh {
                for c in 0..lw {
                    let p = [start + ti as i64, start + r as i64, start + c as i64];
                    for (row, v) in rows.iter_mut().zip(p) {
                        row.push(v);
                        max = max.max(v);
                    }
                }
            }
        }
        next = if count > 0 { max + 1 } else { start };
        st = ed + count;
    }
    push_text(&mut rows, &mut next, n - st);
    let max = rows.iter().flatten().copied().max().unwrap_or(-1);
    Ok(RopeIndex {
        positions: rows,
        delta: max + 1 - n as i64,
    })
}

/// Which position row (0 = t, 1 = h, 2 = w) drives frequency `i` of `head_dim / 2` under the
/// interleaved layout: h for `i % 3 == 1, i < 3·sec[1]`, w for `i % 3 == 2, i < 3·sec[2]`, else t
/// (`Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope`: t, h, w, t, h, w, …, then t only).
pub fn mrope_axis(i: usize, section: [usize; 3]) -> usize {
    match i % 3 {
        1 if i < 3 * section[1] => 1,
        2 if i < 3 * section[2] => 2,
        _ => 0,
    }
}

/// RoPE inverse frequencies `1 / theta^(2i / dim)`, `i < dim / 2`, evaluated in f32 like the
/// reference (`base ** (arange(0, dim, 2).float() / dim)` on f32 tensors): a few ulp of
/// frequency turn into visible angle error at positions in the hundreds.
pub fn inv_freq(dim: usize, theta: f64) -> Vec<f32> {
    let base = theta as f32;
    (0..dim / 2)
        .map(|i| 1.0 / base.powf((2 * i) as f32 / dim as f32))
        .collect()
}

/// cos/sin `[S, head_dim]` of the interleaved M-RoPE: angle of frequency `i` at token `s` =
/// `positions[mrope_axis(i)][s] · inv_freq[i]` (f32), duplicated as `cat(f, f)`.
pub fn mrope_cos_sin(
    positions: &[Vec<i64>; 3],
    head_dim: usize,
    theta: f64,
    section: [usize; 3],
) -> (Vec<f32>, Vec<f32>) {
    let inv = inv_freq(head_dim, theta);
    let s = positions[0].len();
    let angle = |tok: usize, i: usize| positions[mrope_axis(i, section)][tok] as f32 * inv[i];
    cos_sin_table(s, head_dim, angle)
}

/// cos/sin `[rows, dim]` of `cat(f, f)` for the angles `f(row, i)`, `i < dim / 2`; cos and sin
/// are taken in f64 of the f32 angle (correctly rounded, as the f32 reference approximates).
pub fn cos_sin_table(
    rows: usize,
    dim: usize,
    angle: impl Fn(usize, usize) -> f32,
) -> (Vec<f32>, Vec<f32>) {
    let half = dim / 2;
    let mut cos = vec![0.0f32; rows * dim];
    let mut sin = vec![0.0f32; rows * dim];
    for r in 0..rows {
        for i in 0..half {
            let (sn, cs) = (angle(r, i) as f64).sin_cos();
            cos[r * dim + i] = cs as f32;
            cos[r * dim + i + half] = cs as f32;
            sin[r * dim + i] = sn as f32;
            sin[r * dim + i + half] = sn as f32;
        }
    }
    (cos, sin)
}

pub use crate::cpu::rope::apply_rotate_half;

#[cfg(test)]
mod tests {
    use super::*;

    const IMG: u32 = 9;
    const VS: u32 = 7;
    const VE: u32 = 8;

    #[test]
    fn positions_of_text_image_text() {
        // 2 text, vision_start, a 4x6 patch grid merged 2x2 -> 2x3 = 6 tokens, vision_end, 1 text.
        let ids = [1, 2, VS, IMG, IMG, IMG, IMG, IMG, IMG, VE, 3];
        let r = rope_index(&ids, &[[1, 4, 6]], IMG, VS, 2).unwrap();
        // Text 0, 1, 2 (vision_start); image start 3: t = 3, h = 3 + row, w = 3 + col.
        assert_eq!(r.positions[0], vec![0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7]);
        assert_eq!(r.positions[1], vec![0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7]);
        assert_eq!(r.positions[2], vec![0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7]);
        // max 7 + 1 - 11 tokens.
        assert_eq!(r.delta, -3);
    }

    #[test]
    fn two_images_restart_after_max() {
        let ids = [VS, IMG, VE, VS, IMG, IMG, VE];
        let r = rope_index(&ids, &[[1, 2, 2], [1, 2, 4]], IMG, VS, 2).unwrap();
        assert_eq!(r.positions[0], vec![0, 1, 2, 3, 4, 4, 6]);
        assert_eq!(r.positions[1], vec![0, 1, 2, 3, 4, 4, 6]);
        assert_eq!(r.positions[2], vec![0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn image_count_must_match_grids() {
        let ids = [VS, IMG, VE];
        assert!(rope_index(&ids, &[], IMG, VS, 2).is_err());
        assert!(rope_index(&ids, &[[1, 4, 4]], IMG, VS, 2).is_err());
    }

    #[test]
    fn interleaved_sections() {
        // [8, 4, 4] over 16 freqs: T 0,3,6,9,12-15; H 1,4,7,10; W 2,5,8,11.
        let axes: Vec<usize> = (0..16).map(|i| mrope_axis(i, [8, 4, 4])).collect();
        assert_eq!(axes, vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 0, 0]);
        // [3, 2, 1] over 6: T 0,3,5; H 1,4; W 2.
        let axes: Vec<usize> = (0..6).map(|i| mrope_axis(i, [3, 2, 1])).collect();
        assert_eq!(axes, vec![0, 1, 2, 0, 1, 0]);
        // The tables pick the row per frequency and repeat the half.
        let pos = [vec![5i64], vec![7], vec![11]];
        let (cos, _) = mrope_cos_sin(&pos, 12, 1.0, [3, 2, 1]);
        let want: Vec<f32> = [5.0f64, 7.0, 11.0, 5.0, 7.0, 5.0]
            .iter()
            .map(|&p| (p as f32 as f64).cos() as f32)
            .collect();
        assert_eq!(&cos[..6], &want[..]);
        assert_eq!(&cos[6..], &want[..]);
    }
}
