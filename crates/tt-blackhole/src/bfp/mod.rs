//! bfp8_b / bfp4_b block-float codec, bit-identical to tt-metal's host packer
//! (`pack_as_bfp_tiles<Bfp8_b|Bfp4_b>` with `is_exp_a = false`) and tile unpacker
//! (`unpack_bfp{8,4}_tiles_into_float_vec`).
//!
//! A tile is 64 shared-exponent bytes (one per 16-value face row, in face order) followed by
//! the sign-magnitude codes: one byte each (bfp8) or one nibble each, low nibble = even element
//! (bfp4). The encoder rules (see `docs/blackhole.md`): shared exponent = max raw f32 exponent
//! field of the group; exponent-0 inputs (zero, subnormal) give code 0; the 24-bit magnitude is
//! shifted right by the exponent difference with the shifted-out bits dropped (no sticky bit),
//! rounded to nearest-even at bit 17 (bfp8) / 21 (bfp4), clamped to 127 / 7, and the sign is
//! kept only when the magnitude is nonzero.
//!
//! Two implementations live side by side and are tested equal: [`scalar`] (literal, one element
//! at a time, the reference) and [`fast`] (16-lane fixed arrays that autovectorize, an AVX2
//! build of the same code picked at run time, rayon over tiles).

pub mod fast;
pub mod scalar;

use crate::format::{DataFormat, TILE_ELEMS};

/// Which block-float format. The const generic `BITS` of the kernels is 8 or 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BfpFormat {
    /// bfp8_b: 8-bit sign-magnitude codes, 1088-byte tiles.
    Bfp8B,
    /// bfp4_b: 4-bit sign-magnitude codes (two per byte), 576-byte tiles.
    Bfp4B,
}

impl BfpFormat {
    /// The matching tt-metal [`DataFormat`].
    pub const fn data_format(self) -> DataFormat {
        match self {
            BfpFormat::Bfp8B => DataFormat::Bfp8B,
            BfpFormat::Bfp4B => DataFormat::Bfp4B,
        }
    }

    /// Bytes of one packed tile (64 exponent bytes plus the codes).
    pub const fn tile_bytes(self) -> usize {
        self.data_format().tile_bytes()
    }

    /// The block-float format for `f`; `None` for bf16 and f32, which are not block-float.
    pub fn from_data_format(f: DataFormat) -> Option<Self> {
        match f {
            DataFormat::Bfp8B => Some(BfpFormat::Bfp8B),
            DataFormat::Bfp4B => Some(BfpFormat::Bfp4B),
            _ => None,
        }
    }
}

/// Codec misuse: buffer sizes that are not whole tiles, or a format the call cannot produce.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    /// A buffer length is not a multiple of the tile size.
    #[error("{what}: {len} is not a whole number of {unit}-sized tiles")]
    NotWholeTiles {
        /// The codec call that rejected the buffer.
        what: &'static str,
        /// The offending length, in elements or bytes (the unit of `unit`).
        len: usize,
        /// One tile's size in the same unit (1024 elements, or the format's tile bytes).
        unit: usize,
    },
    /// Input and output are whole tiles but hold different numbers of them.
    #[error("{what}: input holds {input} tiles but output holds {output}")]
    TileCountMismatch {
        /// The codec call that rejected the buffers.
        what: &'static str,
        /// Tiles in the input buffer.
        input: usize,
        /// Tiles the output buffer has room for.
        output: usize,
    },
}

pub(crate) fn check_sizes(
    what: &'static str,
    elems: usize,
    bytes: usize,
    tile_bytes: usize,
) -> Result<usize, CodecError> {
    if !elems.is_multiple_of(TILE_ELEMS) {
        return Err(CodecError::NotWholeTiles {
            what,
            len: elems,
            unit: TILE_ELEMS,
        });
    }
    if !bytes.is_multiple_of(tile_bytes) {
        return Err(CodecError::NotWholeTiles {
            what,
            len: bytes,
            unit: tile_bytes,
        });
    }
    let (input, output) = (elems / TILE_ELEMS, bytes / tile_bytes);
    if input != output {
        return Err(CodecError::TileCountMismatch {
            what,
            input,
            output,
        });
    }
    Ok(input)
}

/// Encode face-ordered tiles (`tiled.len()` a multiple of 1024) into `out` in `format`:
/// bfp8_b / bfp4_b (the host packer), bf16 (round to nearest even, little-endian) or f32.
/// Multi-threaded over tiles on the current rayon pool.
pub fn encode_tiles(format: DataFormat, tiled: &[f32], out: &mut [u8]) -> Result<(), CodecError> {
    check_sizes("encode_tiles", tiled.len(), out.len(), format.tile_bytes())?;
    match format {
        DataFormat::Bfp8B => fast::pack_tiles(BfpFormat::Bfp8B, tiled, out),
        DataFormat::Bfp4B => fast::pack_tiles(BfpFormat::Bfp4B, tiled, out),
        DataFormat::Float16B => {
            for (s, d) in tiled.iter().zip(out.chunks_exact_mut(2)) {
                d.copy_from_slice(&crate::bf16::f32_to_bf16_bits(*s).to_le_bytes());
            }
        }
        DataFormat::Float32 => {
            for (s, d) in tiled.iter().zip(out.chunks_exact_mut(4)) {
                d.copy_from_slice(&s.to_le_bytes());
            }
        }
    }
    Ok(())
}

/// Decode tiles of `format` back to face-ordered f32 (exact for every format).
pub fn decode_tiles(format: DataFormat, bytes: &[u8], out: &mut [f32]) -> Result<(), CodecError> {
    check_sizes("decode_tiles", out.len(), bytes.len(), format.tile_bytes())?;
    match format {
        DataFormat::Bfp8B => fast::unpack_tiles(BfpFormat::Bfp8B, bytes, out),
        DataFormat::Bfp4B => fast::unpack_tiles(BfpFormat::Bfp4B, bytes, out),
        DataFormat::Float16B => {
            for (s, d) in bytes.chunks_exact(2).zip(out.iter_mut()) {
                *d = crate::bf16::bf16_bits_to_f32(u16::from_le_bytes([s[0], s[1]]));
            }
        }
        DataFormat::Float32 => {
            for (s, d) in bytes.chunks_exact(4).zip(out.iter_mut()) {
                *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            }
        }
    }
    Ok(())
}

/// Convenience: tilize a row-major `rows x cols` matrix (zero padding, as `from_torch` pads)
/// and pack it. Returns the bytes in row-major tile order.
pub fn pack_row_major(format: BfpFormat, data: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    let tiled = crate::tile::tilize(data, rows, cols, 0.0f32);
    let mut out = vec![0u8; tiled.len() / TILE_ELEMS * format.tile_bytes()];
    fast::pack_tiles(format, &tiled, &mut out);
    out
}

/// Convenience: unpack tiles and untilize to a row-major `rows x cols` matrix.
pub fn unpack_row_major(format: BfpFormat, bytes: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let tiles = bytes.len() / format.tile_bytes();
    let mut tiled = vec![0f32; tiles * TILE_ELEMS];
    fast::unpack_tiles(format, bytes, &mut tiled);
    crate::tile::untilize(&tiled, rows, cols)
}
