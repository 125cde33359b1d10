//! Filling the arena bytes from checkpoint tensors.

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::layout::{ArenaEntry, ArenaIndex};
use super::{ArenaError, SourceTensor, TensorData, TensorSource};
use crate::bfp::{decode_tiles, encode_tiles};
use crate::format::{DataFormat, TILE_DIM, TILE_ELEMS};
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
    // Widen little-endian / bf16 sources once (one weight at a time), so the tile gather
    // works on a plain slice and inlines completely.
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
    let weight = KnWeight {
        name: &e.name,
        kn_shape: e.kn_shape,
        format: e.format,
        order: &e.stream_order(compute_cores),
    };
    weight.pack(src, SourceLayout::OutIn, out)
}

/// How a source matrix's values lie in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceLayout {
    /// `[N, K]` row-major: an `nn.Linear` weight as the checkpoint holds it (`[out, in]`);
    /// the tiles are gathered transposed.
    OutIn,
    /// `[K, N]` row-major: already in the orientation the matmul streams.
    KN,
}

/// One `[K, N]` weight's place in a tile stream: everything packing and decoding need, so a
/// weight that is not a DiT [`ArenaEntry`] (the action head's) is stored in the same format
/// and order as the DiT's.
#[derive(Debug, Clone, Copy)]
pub struct KnWeight<'a> {
    /// Name for errors (the checkpoint tensor's, or the caller's own).
    pub name: &'a str,
    /// `[K, N]` before padding.
    pub kn_shape: [usize; 2],
    /// Tile format the weight is stored in.
    pub format: DataFormat,
    /// Tile `(k, n)` at each position of the stream (e.g. [`crate::split::MatmulSplit::stream_order`]);
    /// the padded grid is `[K/32, N/32]` rounded up.
    pub order: &'a [(usize, usize)],
}

impl KnWeight<'_> {
    /// Bytes of the packed weight: one tile per stream position.
    pub fn bytes(&self) -> usize {
        self.order.len() * self.format.tile_bytes()
    }

    /// Pack `src` (laid out as `layout` says, `K·N` values) into `out` (exactly
    /// [`KnWeight::bytes`] long), tile after tile in stream order; padding is 0.
    pub fn pack(
        &self,
        src: &[f32],
        layout: SourceLayout,
        out: &mut [u8],
    ) -> Result<(), ArenaError> {
        let [k, n] = self.kn_shape;
        if src.len() != k * n {
            return Err(ArenaError::Shape {
                name: self.name.to_owned(),
                expected: match layout {
                    SourceLayout::OutIn => vec![n, k],
                    SourceLayout::KN => vec![k, n],
                },
                got: vec![src.len()],
            });
        }
        self.check_bytes(out.len())?;
        PackCtx {
            format: self.format,
            order: self.order,
            k,
            n,
            layout,
        }
        .run(out, src);
        Ok(())
    }

    /// Decode packed bytes back to a row-major `[K, N]` f32 matrix (padding dropped):
    /// exactly the values the device multiplies with.
    pub fn decode(&self, bytes: &[u8]) -> Result<Vec<f32>, ArenaError> {
        self.check_bytes(bytes.len())?;
        let [k, n] = self.kn_shape;
        let mut tiled = vec![0f32; self.order.len() * TILE_ELEMS];
        decode_tiles(self.format, bytes, &mut tiled).map_err(|cause| ArenaError::Decode {
            name: self.name.to_owned(),
            cause,
        })?;
        let mut out = vec![0f32; k * n];
        for (&(kt, nt), tile) in self.order.iter().zip(tiled.chunks_exact(TILE_ELEMS)) {
            for r in 0..k.saturating_sub(kt * TILE_DIM).min(TILE_DIM) {
                for c in 0..n.saturating_sub(nt * TILE_DIM).min(TILE_DIM) {
                    out[(kt * TILE_DIM + r) * n + nt * TILE_DIM + c] = tile[face_index(r, c)];
                }
            }
        }
        Ok(out)
    }

    fn check_bytes(&self, len: usize) -> Result<(), ArenaError> {
        if len == self.bytes() {
            return Ok(());
        }
        Err(ArenaError::Shape {
            name: self.name.to_owned(),
            expected: vec![self.bytes()],
            got: vec![len],
        })
    }
}

struct PackCtx<'a> {
    format: DataFormat,
    order: &'a [(usize, usize)],
    k: usize,
    n: usize,
    layout: SourceLayout,
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
                    let (k0, n0) = (kt * TILE_DIM, nt * TILE_DIM);
                    match self.layout {
                        SourceLayout::OutIn => gather_transposed(src, self.n, self.k, k0, n0, tile),
                        SourceLayout::KN => gather_kn(src, self.k, self.n, k0, n0, tile),
                    }
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

/// Tile element (r, c) is `W[k0 + r][n0 + c]` of a row-major `[K, N]` source; padding stays 0.
fn gather_kn(src: &[f32], k: usize, n: usize, k0: usize, n0: usize, tile: &mut [f32]) {
    let rmax = k.saturating_sub(k0).min(TILE_DIM);
    let cmax = n.saturating_sub(n0).min(TILE_DIM);
    for r in 0..rmax {
        let base = (k0 + r) * n + n0;
        for (c, &v) in src[base..base + cmax].iter().enumerate() {
            tile[face_index(r, c)] = v;
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
    KnWeight {
        name: &e.name,
        kn_shape: e.kn_shape,
        format: e.format,
        order: &e.stream_order(compute_cores),
    }
    .decode(bytes)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfp::{BfpFormat, pack_row_major, unpack_row_major};
    use crate::split::split_matmul;

    /// A `[K, N]` matrix with values over several binades, so block exponents differ.
    fn matrix(k: usize, n: usize) -> Vec<f32> {
        (0..k * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0 * (1 + i % 5) as f32)
            .collect()
    }

    /// A `[K, N]` source and its `[N, K]` transpose give the same bytes in every format (the
    /// head's weights are packed from `[K, N]`, the DiT's from `[out, in]`), and decoding
    /// gives the codec's own quantization of the matrix.
    #[test]
    fn kn_and_out_in_sources_pack_alike_and_decode_to_the_codec() {
        // 70 x 100: padded in both dimensions; 4 x 3 tiles over 96 cores splits K.
        let (k, n) = (100, 70);
        let w = matrix(k, n);
        let mut wt = vec![0f32; k * n];
        for r in 0..k {
            for c in 0..n {
                wt[c * k + r] = w[r * n + c];
            }
        }
        let order: Vec<(usize, usize)> = split_matmul(4, 3, 96).stream_order().collect();
        for format in [DataFormat::Bfp8B, DataFormat::Bfp4B, DataFormat::Float16B] {
            let kw = KnWeight {
                name: "m",
                kn_shape: [k, n],
                format,
                order: &order,
            };
            let (mut a, mut b) = (vec![0u8; kw.bytes()], vec![0u8; kw.bytes()]);
            kw.pack(&w, SourceLayout::KN, &mut a).unwrap();
            kw.pack(&wt, SourceLayout::OutIn, &mut b).unwrap();
            assert_eq!(a, b, "{format}");
            let want = match BfpFormat::from_data_format(format) {
                Some(f) => unpack_row_major(f, &pack_row_major(f, &w, k, n), k, n),
                None => w.iter().map(|&x| crate::bf16::round_to_bf16(x)).collect(),
            };
            assert_eq!(kw.decode(&a).unwrap(), want, "{format}");
            // Wrong sizes are typed errors, not panics.
            assert!(matches!(
                kw.pack(&w[1..], SourceLayout::KN, &mut a),
                Err(ArenaError::Shape { .. })
            ));
            assert!(matches!(kw.decode(&a[1..]), Err(ArenaError::Shape { .. })));
        }
    }
}
