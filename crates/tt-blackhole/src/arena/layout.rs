//! The arena index, from shapes alone.
//!
//! Order (layout version 1): blocks 0..N in execution order; inside a block the seven weights
//! in [`WeightKind::STREAM_ORDER`] (AdaLN, Q, K, V, out, FF up, FF down); inside a weight the
//! tiles in [`crate::split`] stream order (compute core by compute core, each core's share
//! column by column with K fastest). One step of the denoise loop is therefore a single
//! forward sweep over the arena, and every core's share of every weight is one contiguous
//! range, which is what lets a compute core's reader stream it with one linear read per weight.

use serde::{Deserialize, Serialize};

use crate::dims::{DitDims, WeightKind, checkpoint_name};
use crate::format::{ArenaDtype, DataFormat};
use crate::split::split_matmul;
use crate::tile::tile_grid;

/// Bumped whenever the byte layout or the order changes; part of the cache key.
pub const LAYOUT_VERSION: u32 = 1;

/// Compute cores the arena order is cut for (the plan's compute role count).
pub const COMPUTE_CORES: usize = 96;

/// One weight in the arena.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArenaEntry {
    /// Checkpoint tensor name.
    pub name: String,
    /// Index of the DiT block the weight belongs to (0-based, execution order).
    pub block: usize,
    /// Which of the block's seven matmul weights this is.
    pub kind: WeightKind,
    /// `[out, in]` as in the checkpoint.
    pub torch_shape: [usize; 2],
    /// `[K, N]` = `[in, out]`: the stored (transposed) orientation, before padding.
    pub kn_shape: [usize; 2],
    /// `[K, N]` in tiles after zero padding to multiples of 32.
    pub tiles: [usize; 2],
    /// Tile format the weight is stored in (the arena dtype's [`DataFormat`]).
    pub format: DataFormat,
    /// First tile of this weight in the arena's global tile numbering (DRAM page index).
    pub first_tile: u64,
    /// Tiles the weight occupies: `tiles[0] * tiles[1]`.
    pub num_tiles: u64,
    /// Byte offset from the start of the arena data, and length.
    pub offset: u64,
    /// Byte length: `num_tiles * tile_bytes`.
    pub bytes: u64,
    /// SHA-256 of the weight's bytes, lowercase hex (empty in a shapes-only index).
    pub sha256: String,
}

/// The whole index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArenaIndex {
    /// [`LAYOUT_VERSION`] the index was computed for.
    pub layout_version: u32,
    /// Storage format of every weight in the arena.
    pub dtype: ArenaDtype,
    /// DiT blocks covered ([`DitDims::num_layers`]).
    pub num_layers: usize,
    /// DiT width D ([`DitDims::width`]).
    pub width: usize,
    /// Width of the cross-attention context ([`DitDims::cross_dim`]); sets the cross blocks'
    /// K/V shapes.
    pub cross_dim: usize,
    /// Feed-forward inner width ([`DitDims::ff_inner`]).
    pub ff_inner: usize,
    /// Compute cores each weight's tile order was split for (see [`crate::split`]).
    pub compute_cores: usize,
    /// Bytes of one tile in `dtype`.
    pub tile_bytes: usize,
    /// Tiles in the whole arena (sum of the entries' `num_tiles`).
    pub total_tiles: u64,
    /// Bytes of arena data: `total_tiles * tile_bytes`.
    pub total_bytes: u64,
    /// One entry per weight, in stream order (block by block, [`WeightKind::STREAM_ORDER`] inside).
    pub entries: Vec<ArenaEntry>,
}

impl ArenaIndex {
    /// The entry of `kind` in `block`, found by position in the stream order; `None` when the
    /// block is out of range.
    pub fn entry(&self, block: usize, kind: WeightKind) -> Option<&ArenaEntry> {
        self.entries
            .get(block * WeightKind::STREAM_ORDER.len() + kind.stream_index())
            .filter(|e| e.block == block && e.kind == kind)
    }

    /// The entry whose checkpoint tensor name is `name` (linear search).
    pub fn by_name(&self, name: &str) -> Option<&ArenaEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// Same layout (everything but the checksums).
    pub fn same_layout(&self, other: &ArenaIndex) -> bool {
        let strip = |i: &ArenaIndex| {
            let mut i = i.clone();
            i.entries.iter_mut().for_each(|e| e.sha256.clear());
            i
        };
        strip(self) == strip(other)
    }

    /// Logical parameters (before padding).
    pub fn params(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| (e.kn_shape[0] * e.kn_shape[1]) as u64)
            .sum()
    }
}

/// The arena index for a DiT, from shapes only (no data, no checksums).
pub fn arena_layout(dims: &DitDims, dtype: ArenaDtype) -> ArenaIndex {
    let format = dtype.format();
    let tile_bytes = format.tile_bytes();
    let mut entries = Vec::new();
    let mut tile = 0u64;
    for w in dims.weights() {
        let [out, inp] = w.shape;
        let (kt, nt) = tile_grid(inp, out);
        let n = (kt * nt) as u64;
        entries.push(ArenaEntry {
            name: checkpoint_name(w.block, w.kind),
            block: w.block,
            kind: w.kind,
            torch_shape: w.shape,
            kn_shape: [inp, out],
            tiles: [kt, nt],
            format,
            first_tile: tile,
            num_tiles: n,
            offset: tile * tile_bytes as u64,
            bytes: n * tile_bytes as u64,
            sha256: String::new(),
        });
        tile += n;
    }
    ArenaIndex {
        layout_version: LAYOUT_VERSION,
        dtype,
        num_layers: dims.num_layers,
        width: dims.width(),
        cross_dim: dims.cross_dim,
        ff_inner: dims.ff_inner,
        compute_cores: COMPUTE_CORES,
        tile_bytes,
        total_tiles: tile,
        total_bytes: tile * tile_bytes as u64,
        entries,
    }
}

impl ArenaEntry {
    /// Tile (k, n) for every position of this weight's stream (the [`crate::split`] order).
    pub fn stream_order(&self, compute_cores: usize) -> Vec<(usize, usize)> {
        split_matmul(self.tiles[0], self.tiles[1], compute_cores)
            .stream_order()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_size_byte_count_from_shapes() {
        let idx = arena_layout(&DitDims::FULL, ArenaDtype::Bfp8B);
        assert_eq!(idx.entries.len(), 32 * 7);
        // Every full-size dimension is a multiple of 32, so no padding: tiles = params / 1024.
        assert_eq!(idx.params(), 1_082_130_432);
        assert_eq!(idx.total_tiles, 1_082_130_432 / 1024);
        assert_eq!(idx.total_bytes, 1_056_768 * 1088); // 1,149,763,584 B
        assert_eq!(
            arena_layout(&DitDims::FULL, ArenaDtype::Bfp4B).total_bytes,
            1_056_768 * 576
        );
        assert_eq!(
            arena_layout(&DitDims::FULL, ArenaDtype::Bf16).total_bytes,
            1_056_768 * 2048
        );
        // Contiguous, in stream order.
        let mut off = 0;
        for e in &idx.entries {
            assert_eq!(e.offset, off);
            off += e.bytes;
        }
        assert_eq!(
            idx.entry(3, WeightKind::V).unwrap().name,
            "action_head.model.transformer_blocks.3.attn1.to_v.weight"
        );
    }
}
