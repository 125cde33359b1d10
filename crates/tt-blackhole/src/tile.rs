//! Row-major ⇄ TILE layout (32x32 tiles of four 16x16 faces), as `convert_layout`
//! LIN_ROW_MAJOR → TILED_NFACES does it in tt-metal.
//!
//! Tiles go in row-major tile order; inside a tile the faces go top-left, top-right,
//! bottom-left, bottom-right, each face row-major. Element (r, c) of a tile sits at
//! `face*256 + (r%16)*16 + c%16` with `face = (r/16)*2 + c/16`.

use crate::format::{FACE_DIM, TILE_DIM, TILE_ELEMS};

/// Position inside a tile (0..1024) of tile-local element (r, c).
#[inline(always)]
pub const fn face_index(r: usize, c: usize) -> usize {
    let face = (r / FACE_DIM) * 2 + c / FACE_DIM;
    face * FACE_DIM * FACE_DIM + (r % FACE_DIM) * FACE_DIM + c % FACE_DIM
}

/// Rows and columns rounded up to whole tiles.
pub const fn padded_dims(rows: usize, cols: usize) -> (usize, usize) {
    (
        rows.div_ceil(TILE_DIM) * TILE_DIM,
        cols.div_ceil(TILE_DIM) * TILE_DIM,
    )
}

/// Number of (row, column) tiles of a `rows x cols` matrix after padding.
pub const fn tile_grid(rows: usize, cols: usize) -> (usize, usize) {
    (rows.div_ceil(TILE_DIM), cols.div_ceil(TILE_DIM))
}

/// Tilize a row-major `rows x cols` matrix; padding (up to whole tiles) gets `pad`.
pub fn tilize<T: Copy>(src: &[T], rows: usize, cols: usize, pad: T) -> Vec<T> {
    assert_eq!(
        src.len(),
        rows * cols,
        "tilize: {} elements for {rows}x{cols}",
        src.len()
    );
    let (tr, tc) = tile_grid(rows, cols);
    let mut out = vec![pad; tr * tc * TILE_ELEMS];
    for (t, tile) in out.chunks_exact_mut(TILE_ELEMS).enumerate() {
        let (r0, c0) = ((t / tc) * TILE_DIM, (t % tc) * TILE_DIM);
        gather_tile(src, rows, cols, r0, c0, tile);
    }
    out
}

/// Copy tile (r0, c0) of a row-major matrix into face order; out-of-range elements keep
/// what `tile` held (the caller's padding value).
#[inline]
pub fn gather_tile<T: Copy>(
    src: &[T],
    rows: usize,
    cols: usize,
    r0: usize,
    c0: usize,
    tile: &mut [T],
) {
    let rmax = (rows - r0.min(rows)).min(TILE_DIM);
    let cmax = (cols - c0.min(cols)).min(TILE_DIM);
    for r in 0..rmax {
        let row = &src[(r0 + r) * cols + c0..(r0 + r) * cols + c0 + cmax];
        // Two face halves per tile row: columns 0..16 and 16..32.
        let left = cmax.min(FACE_DIM);
        let base = face_index(r, 0);
        tile[base..base + left].copy_from_slice(&row[..left]);
        if cmax > FACE_DIM {
            let base = face_index(r, FACE_DIM);
            tile[base..base + cmax - FACE_DIM].copy_from_slice(&row[FACE_DIM..cmax]);
        }
    }
}

/// Untilize back to a row-major `rows x cols` matrix (padding dropped).
pub fn untilize<T: Copy + Default>(tiled: &[T], rows: usize, cols: usize) -> Vec<T> {
    let (tr, tc) = tile_grid(rows, cols);
    assert_eq!(
        tiled.len(),
        tr * tc * TILE_ELEMS,
        "untilize: {} elements for {rows}x{cols}",
        tiled.len()
    );
    let mut out = vec![T::default(); rows * cols];
    for (t, tile) in tiled.chunks_exact(TILE_ELEMS).enumerate() {
        let (r0, c0) = ((t / tc) * TILE_DIM, (t % tc) * TILE_DIM);
        for r in 0..(rows - r0).min(TILE_DIM) {
            for c in 0..(cols - c0).min(TILE_DIM) {
                out[(r0 + r) * cols + c0 + c] = tile[face_index(r, c)];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_with_padding() {
        let (rows, cols) = (40, 70);
        let src: Vec<u32> = (0..(rows * cols) as u32).collect();
        let t = tilize(&src, rows, cols, u32::MAX);
        assert_eq!(t.len(), 2 * 3 * 1024);
        assert_eq!(untilize(&t, rows, cols), src);
        // Padding holds the pad value: tile 0 is full, tile 2 (cols 64..96) has 6 real columns.
        assert_eq!(
            t.iter().filter(|&&v| v == u32::MAX).count(),
            6 * 1024 - rows * cols
        );
        assert_eq!(t[2 * 1024 + face_index(0, 6)], u32::MAX);
        assert_eq!(t[2 * 1024 + face_index(0, 5)], 69);
    }
}
