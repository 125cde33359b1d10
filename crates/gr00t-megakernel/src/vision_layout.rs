//! The order the image's tokens take on the device, chosen so that the Eagle projector's 2×2
//! pixel-unshuffle is a copy of whole tile rows rather than a gather of single rows.
//!
//! The unshuffle gives the projector one row per 2×2 block of patches: the four patches'
//! features side by side. With the tokens in raster order those four sit in different tile
//! rows at different offsets. Here they come in four groups instead, one per position in the
//! block (`q = 2·dy + dx`), each group the blocks in raster order and padded to whole tiles:
//! group `q`'s tile rows are the projector input's tile rows for column block `q`. SigLIP2's
//! attention does not see the order (it has no positions: they were added to the embeddings,
//! which the host lays out in this same order), and the key mask drops the padding rows.
//!
//! The projector's input features follow: device feature `q·C + c` is torch's `4c + q` (its
//! `pixel_shuffle_back` interleaves the four patches' channels), so the projector's LayerNorm
//! γ/β and its first weight's rows are permuted to match ([`projector_feature`]).

/// The image's token layout on the device for a `nh × nw` patch grid (both even).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisionLayout {
    /// Patch rows.
    pub nh: usize,
    /// Patch columns.
    pub nw: usize,
}

impl VisionLayout {
    /// The layout of a `nh × nw` grid; `None` when either side is odd (the projector's 2×2
    /// unshuffle needs both even, as the processor's resize to a multiple of 28 px makes them).
    pub fn new(nh: usize, nw: usize) -> Option<Self> {
        (nh > 0 && nw > 0 && nh.is_multiple_of(2) && nw.is_multiple_of(2))
            .then_some(VisionLayout { nh, nw })
    }

    /// The image's tokens (patches).
    pub fn tokens(&self) -> usize {
        self.nh * self.nw
    }

    /// The projector's rows: one per 2×2 block.
    pub fn blocks(&self) -> usize {
        (self.nh / 2) * (self.nw / 2)
    }

    /// Tile rows of one group (a block position's patches, padded).
    pub fn group_tiles(&self) -> usize {
        self.blocks().div_ceil(32)
    }

    /// Tile rows of the whole token tensor: four groups.
    pub fn row_tiles(&self) -> usize {
        4 * self.group_tiles()
    }

    /// The device row of raster patch `(py, px)`.
    pub fn row(&self, py: usize, px: usize) -> usize {
        let q = 2 * (py % 2) + px % 2;
        q * 32 * self.group_tiles() + (py / 2) * (self.nw / 2) + px / 2
    }

    /// Whether device row `r` holds a patch (the others are padding).
    pub fn is_token(&self, r: usize) -> bool {
        r < 32 * self.row_tiles() && r % (32 * self.group_tiles()) < self.blocks()
    }

    /// `[tokens, width]` rows in raster order laid out on the device: `[32·row_tiles, width]`,
    /// zero in the padding rows.
    pub fn to_device(&self, raster: &[f32], width: usize) -> Vec<f32> {
        let mut out = vec![0f32; 32 * self.row_tiles() * width];
        for py in 0..self.nh {
            for px in 0..self.nw {
                let (src, dst) = ((py * self.nw + px) * width, self.row(py, px) * width);
                out[dst..dst + width].copy_from_slice(&raster[src..src + width]);
            }
        }
        out
    }

    /// The inverse of [`VisionLayout::to_device`]: the patches' rows in raster order.
    pub fn to_raster(&self, device: &[f32], width: usize) -> Vec<f32> {
        let mut out = vec![0f32; self.tokens() * width];
        for py in 0..self.nh {
            for px in 0..self.nw {
                let (dst, src) = ((py * self.nw + px) * width, self.row(py, px) * width);
                out[dst..dst + width].copy_from_slice(&device[src..src + width]);
            }
        }
        out
    }
}

/// Torch's projector input feature for device feature `g` of a tower `c` wide: `4·(g mod c) +
/// g / c`.
pub fn projector_feature(g: usize, c: usize) -> usize {
    4 * (g % c) + g / c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_group_is_the_projector_input_of_its_column_block() {
        let l = VisionLayout::new(18, 18).unwrap();
        assert_eq!(
            (l.tokens(), l.blocks(), l.group_tiles(), l.row_tiles()),
            (324, 81, 3, 12)
        );
        let mut seen = vec![false; 32 * l.row_tiles()];
        for py in 0..18 {
            for px in 0..18 {
                let r = l.row(py, px);
                assert!(!seen[r], "row {r} twice");
                seen[r] = true;
                assert!(l.is_token(r));
                // Projector row (block) and column block q, as torch's pixel_shuffle_back
                // puts patch (2Y+dy, 2X+dx) at feature block 2dy+dx of row Y·9+X.
                let (block, q) = ((py / 2) * 9 + px / 2, 2 * (py % 2) + px % 2);
                assert_eq!(r, q * 96 + block);
            }
        }
        assert_eq!(seen.iter().filter(|s| **s).count(), 324);
        assert!((0..384).all(|r| seen[r] == l.is_token(r)));
        assert!(VisionLayout::new(17, 18).is_none() && VisionLayout::new(0, 2).is_none());
    }

    #[test]
    fn rows_go_to_the_device_and_back_unchanged() {
        let l = VisionLayout::new(4, 6).unwrap();
        let raster: Vec<f32> = (0..24 * 3).map(|v| v as f32).collect();
        let dev = l.to_device(&raster, 3);
        assert_eq!(dev.len(), 32 * l.row_tiles() * 3);
        assert_eq!(l.to_raster(&dev, 3), raster);
        let pad: f32 = (0..32 * l.row_tiles())
            .filter(|r| !l.is_token(*r))
            .map(|r| dev[r * 3..r * 3 + 3].iter().sum::<f32>())
            .sum();
        assert_eq!(pad, 0.0);
    }

    #[test]
    fn projector_features_are_a_permutation_of_torchs() {
        let c = 5;
        let mut f: Vec<usize> = (0..4 * c).map(|g| projector_feature(g, c)).collect();
        // Device block q, channel 2 is torch's 4·2 + q.
        assert_eq!(projector_feature(3 * c + 2, c), 4 * 2 + 3);
        f.sort();
        assert_eq!(f, (0..4 * c).collect::<Vec<_>>());
    }
}
