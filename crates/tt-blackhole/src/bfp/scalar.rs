//! The scalar reference codec: one element at a time, written to read like the rules in the
//! module docs. The fast path ([`super::fast`]) is tested equal to it.

use super::BfpFormat;
use crate::format::{GROUPS_PER_TILE, TILE_ELEMS};

const GROUP: usize = 16;

fn bits(format: BfpFormat) -> u32 {
    match format {
        BfpFormat::Bfp8B => 8,
        BfpFormat::Bfp4B => 4,
    }
}

/// Encode one f32 (as bits) against a shared exponent: the per-value rule.
pub fn encode_value(format: BfpFormat, x: u32, shared_exp: u32) -> u8 {
    let b = bits(format);
    let exp = (x >> 23) & 0xff;
    if exp == 0 {
        return 0; // zero and subnormals flush
    }
    let d = shared_exp - exp;
    let mut mag: u32 = (x & 0x007f_ffff) | 0x0080_0000;
    mag = if d >= 32 { 0 } else { mag >> d }; // shifted-out bits are dropped: no sticky bit
    let shift = 25 - b;
    let kept = mag >> shift;
    let rest = mag & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let mut m = if rest > half || (rest == half && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    };
    let max = (1 << (b - 1)) - 1;
    if m > max {
        m = max; // saturate: the exponent never goes up
    }
    let sign = if m != 0 { x >> 31 } else { 0 };
    ((sign << (b - 1)) | m) as u8
}

/// Decode one code against a shared exponent, as the tile unpacker does (including its
/// flush when the normalising shift exceeds the exponent, and -0 for a sign-only code).
pub fn decode_value(format: BfpFormat, code: u8, shared_exp: u32) -> u32 {
    let b = bits(format);
    let sign = ((code as u32) >> (b - 1)) & 1;
    let mut m = (code as u32) & ((1 << (b - 1)) - 1);
    if m == 0 {
        return sign << 31;
    }
    let top = b - 2; // bit position of the leading one after normalising
    let mut sh = 0;
    while m & (1 << top) == 0 {
        m <<= 1;
        sh += 1;
    }
    if sh > shared_exp {
        return 0;
    }
    let frac = m & ((1 << top) - 1);
    (sign << 31) | ((shared_exp - sh) << 23) | (frac << (23 - top))
}

/// Pack one face-ordered tile (1024 values) into `out` (`format.tile_bytes()` bytes).
pub fn pack_tile(format: BfpFormat, tile: &[f32], out: &mut [u8]) {
    assert_eq!(tile.len(), TILE_ELEMS);
    assert_eq!(out.len(), format.tile_bytes());
    for g in 0..GROUPS_PER_TILE {
        let vals = &tile[g * GROUP..(g + 1) * GROUP];
        let shared = vals
            .iter()
            .map(|v| (v.to_bits() >> 23) & 0xff)
            .max()
            .unwrap_or(0);
        out[g] = shared as u8;
        for (j, v) in vals.iter().enumerate() {
            let code = encode_value(format, v.to_bits(), shared);
            match format {
                BfpFormat::Bfp8B => out[GROUPS_PER_TILE + g * GROUP + j] = code,
                BfpFormat::Bfp4B => {
                    let byte = &mut out[GROUPS_PER_TILE + g * GROUP / 2 + j / 2];
                    if j % 2 == 0 {
                        *byte = code & 0xf;
                    } else {
                        *byte |= code << 4;
                    }
                }
            }
        }
    }
}

/// Unpack one tile into 1024 face-ordered values.
pub fn unpack_tile(format: BfpFormat, bytes: &[u8], out: &mut [f32]) {
    assert_eq!(out.len(), TILE_ELEMS);
    assert_eq!(bytes.len(), format.tile_bytes());
    for g in 0..GROUPS_PER_TILE {
        let shared = bytes[g] as u32;
        for j in 0..GROUP {
            let code = match format {
                BfpFormat::Bfp8B => bytes[GROUPS_PER_TILE + g * GROUP + j],
                BfpFormat::Bfp4B => {
                    let byte = bytes[GROUPS_PER_TILE + g * GROUP / 2 + j / 2];
                    if j % 2 == 0 { byte & 0xf } else { byte >> 4 }
                }
            };
            out[g * GROUP + j] = f32::from_bits(decode_value(format, code, shared));
        }
    }
}

/// Pack many tiles, single-threaded.
pub fn pack_tiles(format: BfpFormat, tiled: &[f32], out: &mut [u8]) {
    for (t, o) in tiled
        .chunks_exact(TILE_ELEMS)
        .zip(out.chunks_exact_mut(format.tile_bytes()))
    {
        pack_tile(format, t, o);
    }
}

/// Unpack many tiles, single-threaded.
pub fn unpack_tiles(format: BfpFormat, bytes: &[u8], out: &mut [f32]) {
    for (b, o) in bytes
        .chunks_exact(format.tile_bytes())
        .zip(out.chunks_exact_mut(TILE_ELEMS))
    {
        unpack_tile(format, b, o);
    }
}
