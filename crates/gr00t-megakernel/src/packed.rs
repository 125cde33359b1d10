//! Weights packed for our matmul kernels, whatever model part they belong to: each `[K, N]`
//! matrix zero-padded to whole tiles, its tiles in `tt_blackhole::split` stream order for the
//! compute cores (the order one core's share of columns and K range is read in), one weight
//! after another. The action head's arena (`crate::head_arena`) and the backbone's
//! (`crate::backbone_arena`) are lists of these keyed by their own weight names.

use std::fmt::Debug;

use tt_blackhole::arena::layout::COMPUTE_CORES;
use tt_blackhole::arena::{ArenaError, KnWeight, SourceLayout};
use tt_blackhole::format::{ArenaDtype, TILE_DIM};
use tt_blackhole::split::MatmulSplit;

use gr00t_runtime::weights::{WeightError, WeightSource};

/// One weight before packing: row-major `[K, N]` and the bias `[N]` its matmul adds.
pub(crate) struct KnMatrix {
    pub kn_shape: [usize; 2],
    pub kn: Vec<f32>,
    pub bias: Vec<f32>,
}

/// `nn.Linear` `{prefix}.weight` `[N, K]` (transposed here to `[K, N]`) and `{prefix}.bias`.
pub(crate) fn linear(
    ws: &dyn WeightSource,
    prefix: &str,
    k: usize,
    n: usize,
) -> Result<KnMatrix, WeightError> {
    linear_with(ws, prefix, k, n, true)
}

/// [`linear`], its bias read when `bias` (else zero: a Linear without one, Qwen3's).
pub(crate) fn linear_with(
    ws: &dyn WeightSource,
    prefix: &str,
    k: usize,
    n: usize,
    bias: bool,
) -> Result<KnMatrix, WeightError> {
    let w = ws
        .tensor(&format!("{prefix}.weight"), &[n, k])?
        .to_f32_vec();
    let mut kn = vec![0f32; k * n];
    for (j, row) in w.chunks_exact(k).enumerate() {
        for (i, &v) in row.iter().enumerate() {
            kn[i * n + j] = v;
        }
    }
    Ok(KnMatrix {
        kn_shape: [k, n],
        kn,
        bias: if bias {
            ws.f32(&format!("{prefix}.bias"), &[n])?
        } else {
            vec![0.0; n]
        },
    })
}

/// One weight's place in a packed arena.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedEntry<W> {
    /// Which weight.
    pub weight: W,
    /// `[K, N]` before padding.
    pub kn_shape: [usize; 2],
    /// `[K, N]` in tiles after zero padding.
    pub tiles: [usize; 2],
    /// First tile in the arena's numbering (its DRAM page).
    pub first_tile: usize,
    /// `tiles[0] * tiles[1]`.
    pub num_tiles: usize,
    /// The bias `[N]` as the device adds it (f32 values; rounded to bf16 where it is added).
    pub bias: Vec<f32>,
}

/// Weights keyed by `W`, packed one after another in one tile format.
#[derive(Debug, Clone)]
pub struct PackedWeights<W> {
    /// The tile format of every weight.
    pub dtype: ArenaDtype,
    /// Bytes per tile.
    pub tile_bytes: usize,
    /// Compute cores each weight's tile order is split for.
    pub compute_cores: usize,
    /// One entry per weight, in packing order.
    pub entries: Vec<PackedEntry<W>>,
    /// The tiles, weight after weight.
    pub bytes: Vec<u8>,
}

impl<W: Copy + PartialEq + Debug> PackedWeights<W> {
    /// An empty arena in `dtype`, split for the plan's compute cores.
    pub(crate) fn new(dtype: ArenaDtype) -> Self {
        PackedWeights {
            dtype,
            tile_bytes: dtype.format().tile_bytes(),
            compute_cores: COMPUTE_CORES,
            entries: Vec::new(),
            bytes: Vec::new(),
        }
    }

    /// Pack `m` as weight `w` after the others (`name` for errors).
    pub(crate) fn push(&mut self, w: W, name: &str, m: KnMatrix) -> Result<(), ArenaError> {
        let [k, n] = m.kn_shape;
        let tiles = [k.div_ceil(TILE_DIM), n.div_ceil(TILE_DIM)];
        let num_tiles = tiles[0] * tiles[1];
        let order = stream_order(tiles, self.compute_cores);
        let kw = KnWeight {
            name,
            kn_shape: m.kn_shape,
            format: self.dtype.format(),
            order: &order,
        };
        let start = self.bytes.len();
        self.bytes.resize(start + num_tiles * self.tile_bytes, 0);
        kw.pack(&m.kn, SourceLayout::KN, &mut self.bytes[start..])?;
        self.entries.push(PackedEntry {
            weight: w,
            kn_shape: m.kn_shape,
            tiles,
            first_tile: self.total_tiles(),
            num_tiles,
            bias: m.bias,
        });
        Ok(())
    }

    /// Tiles in the whole arena.
    pub fn total_tiles(&self) -> usize {
        self.entries.iter().map(|e| e.num_tiles).sum()
    }

    /// The entry of `w`, if it was packed.
    pub fn get(&self, w: W) -> Option<&PackedEntry<W>> {
        self.entries.iter().find(|e| e.weight == w)
    }

    /// The packed tiles of `e` (its share of [`PackedWeights::bytes`]).
    pub fn bytes_of(&self, e: &PackedEntry<W>) -> &[u8] {
        let start = (e.first_tile * self.tile_bytes).min(self.bytes.len());
        let end = ((e.first_tile + e.num_tiles) * self.tile_bytes).min(self.bytes.len());
        &self.bytes[start..end]
    }

    /// The decoded `[K, N]` values of `e`: exactly what the device multiplies with.
    pub fn decode(&self, e: &PackedEntry<W>) -> Result<Vec<f32>, ArenaError> {
        let order = stream_order(e.tiles, self.compute_cores);
        let name = format!("{:?}", e.weight);
        let kw = KnWeight {
            name: &name,
            kn_shape: e.kn_shape,
            format: self.dtype.format(),
            order: &order,
        };
        kw.decode(self.bytes_of(e))
    }

    /// How `e`'s tiles are split over the compute cores (the stream order of its tiles).
    pub fn split(&self, e: &PackedEntry<W>) -> MatmulSplit {
        tt_blackhole::split::split_matmul(e.tiles[0], e.tiles[1], self.compute_cores)
    }
}

/// The tile stream order of a `[kt, nt]`-tile weight split over `cores` compute cores.
fn stream_order(tiles: [usize; 2], cores: usize) -> Vec<(usize, usize)> {
    tt_blackhole::split::split_matmul(tiles[0], tiles[1], cores)
        .stream_order()
        .collect()
}
