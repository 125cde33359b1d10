//! Attention heads as the device lays them out for Qwen3: each head in whole tiles. The
//! per-head RMSNorm reads `[rows, heads·hp]` page for page as `[rows·heads, hp]` and RoPE
//! pairs a head's tiles, so a head must start on a tile: heads narrower than a tile (the tiny
//! checkpoint's 16) are padded with zero columns to one tile, wider ones must be whole tiles
//! (Qwen3-1.7B's 128). The padding is done once, when the weights are packed: Q, K and V get
//! zero columns after each head, O zero rows, so every kernel sees tile-aligned heads and the
//! padding stays zero through the norm (γ is zero there), RoPE and attention.

use crate::packed::KnMatrix;

/// The columns a head of width `hd` takes on the device: one tile when it is narrower, its
/// own width when that is whole tiles; `None` for widths that are neither (no layout of ours).
pub fn padded_head(hd: usize) -> Option<usize> {
    match hd {
        0 => None,
        1..=32 => Some(32),
        _ if hd.is_multiple_of(32) => Some(hd),
        _ => None,
    }
}

/// `[K, heads·hd]` → `[K, heads·hp]`: head h's columns moved to `h·hp..h·hp + hd`, zeros after
/// (Q, K and V, and their biases).
pub(crate) fn spread_head_columns(m: KnMatrix, heads: usize, hd: usize, hp: usize) -> KnMatrix {
    if hp == hd {
        return m;
    }
    let [k, n] = m.kn_shape;
    debug_assert_eq!(n, heads * hd);
    let wide = heads * hp;
    let spread = |row: &[f32]| -> Vec<f32> {
        let mut out = vec![0f32; wide];
        for (h, head) in row.chunks_exact(hd).enumerate() {
            out[h * hp..h * hp + hd].copy_from_slice(head);
        }
        out
    };
    KnMatrix {
        kn_shape: [k, wide],
        kn: m.kn.chunks_exact(n).flat_map(spread).collect(),
        bias: spread(&m.bias),
    }
}

/// `[heads·hd, N]` → `[heads·hp, N]`: head h's rows moved to `h·hp..h·hp + hd`, zero rows after
/// (O, which reads the attention's padded heads).
pub(crate) fn spread_head_rows(m: KnMatrix, heads: usize, hd: usize, hp: usize) -> KnMatrix {
    if hp == hd {
        return m;
    }
    let [k, n] = m.kn_shape;
    debug_assert_eq!(k, heads * hd);
    let mut kn = vec![0f32; heads * hp * n];
    for (h, rows) in m.kn.chunks_exact(hd * n).enumerate() {
        kn[h * hp * n..(h * hp + hd) * n].copy_from_slice(rows);
    }
    KnMatrix {
        kn_shape: [heads * hp, n],
        kn,
        bias: m.bias,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32 + 1.0).collect()
    }

    #[test]
    fn heads_take_whole_tiles() {
        assert_eq!(padded_head(16), Some(32));
        assert_eq!(padded_head(32), Some(32));
        assert_eq!(padded_head(128), Some(128));
        assert_eq!(padded_head(72), None);
        assert_eq!(padded_head(0), None);
    }

    /// x·Q then dropping the padding is x·Q of the checkpoint; padded O after padded heads is
    /// the checkpoint's O after its heads.
    #[test]
    fn spread_heads_multiply_as_the_checkpoint_s() {
        let (k, heads, hd, hp) = (3, 2, 4, 32);
        let q = KnMatrix {
            kn_shape: [k, heads * hd],
            kn: ramp(k * heads * hd),
            bias: ramp(heads * hd),
        };
        let wide = spread_head_columns(q, heads, hd, hp);
        assert_eq!(wide.kn_shape, [k, heads * hp]);
        for r in 0..k {
            for h in 0..heads {
                for c in 0..hp {
                    let got = wide.kn[r * heads * hp + h * hp + c];
                    let want = if c < hd {
                        (r * heads * hd + h * hd + c) as f32 + 1.0
                    } else {
                        0.0
                    };
                    assert_eq!(got, want, "row {r} head {h} col {c}");
                }
            }
        }
        assert_eq!(wide.bias[hp..hp + hd], [5.0, 6.0, 7.0, 8.0]);
        assert!(wide.bias[hd..hp].iter().all(|b| *b == 0.0));

        let n = 3;
        let o = KnMatrix {
            kn_shape: [heads * hd, n],
            kn: ramp(heads * hd * n),
            bias: vec![0.0; n],
        };
        let tall = spread_head_rows(o, heads, hd, hp);
        assert_eq!(tall.kn_shape, [heads * hp, n]);
        assert_eq!(tall.kn[hp * n..hp * n + n], [13.0, 14.0, 15.0]);
        assert!(tall.kn[hd * n..hp * n].iter().all(|v| *v == 0.0));
    }
}
