//! Filling the arena bytes from checkpoint tensors.

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::layout::{ArenaEntry, ArenaIndex};
use super::{ArenaError, SourceTensor, TensorData, TensorSource};
use crate::bfp::{decode_tiles, encode_tiles};
use crate::format::{TILE_DIM, TILE_ELEMS};
use crate::tile::face_index;

/// Tiles per rayon task while packing one weight.
const TILES_PER_TASK: usize = 32;

/// Build the arena in memory: returns the index with checksums filled in, and the data.
pub fn build_arena_bytes(
    layout: &ArenaIndex,
    source: &dyn TensorSource,
) -> Result<(ArenaIndex, Vec<u8>), ArenaError> {
    let mut data = vec![0u8; layout.total_bytes as usize];
    let index = fill_arena(layout, source, &mut data)?;
    Ok((index, data))
}

/// Pack every weight of `layout` from `source` into `data` (exactly `total_bytes` long) and
/// return the index with per-weight SHA-256 filled in.
pub fn fill_arena(
    layout: &ArenaIndex,
    source: &dyn TensorSource,
    data: &mut [u8],
) -> Result<ArenaIndex, ArenaError> {
    assert_eq!(
        data.len() as u64,
        layout.total_bytes,
        "fill_arena: data buffer size"
    );
    let mut rest = &mut data[..];
    let mut slices = Vec::with_capacity(layout.entries.len());
    for e in &layout.entries {
        let (head, tail) = rest.split_at_mut(e.bytes as usize);
        slices.push(head);
        rest = tail;
    }
    // One weight at a time (bounded memory: only one source tensor is materialised), tiles of
    // that weight in parallel.
    for (e, out) in layout.entries.iter().zip(slices.iter_mut()) {
        let t = source.tensor(&e.name).map_err(|cause| ArenaError::Source {
            name: e.name.clone(),
            cause,
        })?;
        pack_weight(e, layout.compute_cores, &t, out)?;
    }
    let digests: Vec<String> = slices
        .par_iter()
        .map(|s| hex(&Sha256::digest(&**s)))
        .collect();
    let mut index = layout.clone();
    for (e, d) in index.entries.iter_mut().zip(digests) {
        e.sha256 = d;
    }
    Ok(index)
}

/// Pack one `[out, in]` source weight as `[in, out]` tiles in stream order.
pub fn pack_weight(
    e: &ArenaEntry,
    compute_cores: usize,
    t: &SourceTensor<'_>,
    out: &mut [u8],
) -> Result<(), ArenaError> {
    let [rows, cols] = e.torch_shape;
    if t.shape != [rows, cols] || t.data.len() != rows * cols {
        return Err(ArenaError::Shape {
            name: e.name.clone(),
            expected: vec![rows, cols],
            got: t.shape.clone(),
        });
    }
    let order = e.stream_order(compute_cores);
    // Widen little-endian / bf16 sources once (one weight at a time), so the tile gather
    // below works on a plain slice and inlines completely.
    let widened: Vec<f32>;
    let src: &[f32] = match &t.data {
        TensorData::F32(v) => v,
        TensorData::F32Le(b) => {
            widened = b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            &widened
        }
        TensorData::Bf16Le(b) => {
            widened = b
                .chunks_exact(2)
                .map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16))
                .collect();
            &widened
        }
    };
    PackCtx {
        format: e.format,
        order: &order,
        rows,
        cols,
    }
    .run(out, src);
    Ok(())
}

struct PackCtx<'a> {
    format: crate::format::DataFormat,
    order: &'a [(usize, usize)],
    rows: usize,
    cols: usize,
}

impl PackCtx<'_> {
    fn run(&self, out: &mut [u8], src: &[f32]) {
        let tb = self.format.tile_bytes();
        out.par_chunks_mut(tb * TILES_PER_TASK)
            .enumerate()
            .for_each(|(chunk, bytes)| {
                let mut tiles = vec![0f32; bytes.len() / tb * TILE_ELEMS];
                for (i, tile) in tiles.chunks_exact_mut(TILE_ELEMS).enumerate() {
                    let (kt, nt) = self.order[chunk * TILES_PER_TASK + i];
                    gather_transposed(
                        src,
                        self.rows,
                        self.cols,
                        kt * TILE_DIM,
                        nt * TILE_DIM,
                        tile,
                    );
                }
                // Sizes are whole tiles by construction, so this cannot fail.
                let _ = encode_tiles(self.format, &tiles, bytes);
            });
    }
}

/// Tile element (r, c) of the transposed weight is `W[n0 + c][k0 + r]`; padding stays 0.
#[inline(always)]
fn gather_transposed(
    src: &[f32],
    rows: usize,
    cols: usize,
    k0: usize,
    n0: usize,
    tile: &mut [f32],
) {
    let cmax = rows.saturating_sub(n0).min(TILE_DIM); // output features in this tile
    let rmax = cols.saturating_sub(k0).min(TILE_DIM); // input features in this tile
    for c in 0..cmax {
        let base = (n0 + c) * cols + k0;
        let run = &src[base..base + rmax]; // contiguous over k
        let (face_col, cc) = ((c / 16) * 256, c % 16);
        for (r, &v) in run.iter().enumerate() {
            tile[(r / 16) * 512 + face_col + (r % 16) * 16 + cc] = v;
        }
    }
}

/// Decode one weight of an arena back to a row-major `[K, N]` f32 matrix (`kn_shape`, padding
/// dropped): exactly the values the device multiplies with.
pub fn decode_weight(
    e: &ArenaEntry,
    compute_cores: usize,
    bytes: &[u8],
) -> Result<Vec<f32>, ArenaError> {
    if bytes.len() as u64 != e.bytes {
        return Err(ArenaError::Shape {
            name: e.name.clone(),
            expected: vec![e.bytes as usize],
            got: vec![bytes.len()],
        });
    }
    let [k, n] = e.kn_shape;
    let mut tiled = vec![0f32; e.num_tiles as usize * TILE_ELEMS];
    decode_tiles(e.format, bytes, &mut tiled).map_err(|cause| ArenaError::Decode {
        name: e.name.clone(),
        cause,
    })?;
    let mut out = vec![0f32; k * n];
    for ((kt, nt), tile) in e
        .stream_order(compute_cores)
        .into_iter()
        .zip(tiled.chunks_exact(TILE_ELEMS))
    {
        for r in 0..k.saturating_sub(kt * TILE_DIM).min(TILE_DIM) {
            for c in 0..n.saturating_sub(nt * TILE_DIM).min(TILE_DIM) {
                out[(kt * TILE_DIM + r) * n + nt * TILE_DIM + c] = tile[face_index(r, c)];
            }
        }
    }
    Ok(out)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
