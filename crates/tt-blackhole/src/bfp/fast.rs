//! The fast codec: each 16-value group is processed as fixed `[u32; 16]` lanes with selects
//! instead of branches, so LLVM vectorizes it. x86-64 builds also compile the same code with
//! AVX2 enabled (variable per-lane shifts) and pick it at run time. Tiles are spread over the
//! current rayon pool.

use rayon::prelude::*;

use super::BfpFormat;
use crate::format::{GROUPS_PER_TILE, TILE_ELEMS};

const GROUP: usize = 16;
/// Tiles per rayon task: large enough that scheduling costs nothing next to the work.
const TILES_PER_TASK: usize = 64;

/// Encode one group; returns the shared exponent.
#[inline(always)]
fn encode_group<const BITS: u32>(x: &[f32], codes: &mut [u32; GROUP]) -> u8 {
    let mut u = [0u32; GROUP];
    let mut e = [0u32; GROUP];
    for i in 0..GROUP {
        u[i] = x[i].to_bits();
        e[i] = (u[i] >> 23) & 0xff;
    }
    let mut emax = 0u32;
    for v in e {
        emax = emax.max(v);
    }
    let shift = 25 - BITS;
    let max = (1u32 << (BITS - 1)) - 1;
    for i in 0..GROUP {
        let mag = (u[i] & 0x007f_ffff) | 0x0080_0000;
        // mag < 2^24, so any distance >= 24 gives 0 like the reference's `d >= 32` rule.
        let m = mag >> (emax - e[i]).min(31);
        let lsb = (m >> shift) & 1;
        let q = ((m + (1 << (shift - 1)) - 1 + lsb) >> shift).min(max);
        let q = if e[i] == 0 { 0 } else { q };
        let sign = if q != 0 { u[i] >> 31 } else { 0 };
        codes[i] = (sign << (BITS - 1)) | q;
    }
    emax as u8
}

#[inline(always)]
fn pack_tile_body<const BITS: u32>(tile: &[f32], out: &mut [u8]) {
    let (exps, mant) = out.split_at_mut(GROUPS_PER_TILE);
    let mut codes = [0u32; GROUP];
    for g in 0..GROUPS_PER_TILE {
        exps[g] = encode_group::<BITS>(&tile[g * GROUP..(g + 1) * GROUP], &mut codes);
        if BITS == 8 {
            let dst = &mut mant[g * GROUP..(g + 1) * GROUP];
            for j in 0..GROUP {
                dst[j] = codes[j] as u8;
            }
        } else {
            let dst = &mut mant[g * GROUP / 2..(g + 1) * GROUP / 2];
            for j in 0..GROUP / 2 {
                dst[j] = (codes[2 * j] | (codes[2 * j + 1] << 4)) as u8;
            }
        }
    }
}

#[inline(always)]
fn unpack_tile_body<const BITS: u32>(bytes: &[u8], out: &mut [f32]) {
    let (exps, mant) = bytes.split_at(GROUPS_PER_TILE);
    let top = BITS - 2;
    let mut codes = [0u32; GROUP];
    for g in 0..GROUPS_PER_TILE {
        let shared = exps[g] as u32;
        if BITS == 8 {
            for j in 0..GROUP {
                codes[j] = mant[g * GROUP + j] as u32;
            }
        } else {
            for j in 0..GROUP / 2 {
                let b = mant[g * GROUP / 2 + j] as u32;
                codes[2 * j] = b & 0xf;
                codes[2 * j + 1] = b >> 4;
            }
        }
        let dst = &mut out[g * GROUP..(g + 1) * GROUP];
        for j in 0..GROUP {
            let c = codes[j];
            let sign = (c >> (BITS - 1)) & 1;
            let m = c & ((1 << (BITS - 1)) - 1);
            // floor(log2 m) from the exponent of m as f32 (exact for m < 2^24).
            let lg = ((m as f32).to_bits() >> 23).wrapping_sub(127);
            let sh = top.wrapping_sub(lg);
            let frac = (m << (sh & 31)) & ((1 << top) - 1);
            let normal = (sign << 31) | (shared.wrapping_sub(sh) << 23) | (frac << (23 - top));
            let v = if m == 0 {
                sign << 31
            } else if sh > shared {
                0
            } else {
                normal
            };
            dst[j] = f32::from_bits(v);
        }
    }
}

fn pack_tile_generic(format: BfpFormat, tile: &[f32], out: &mut [u8]) {
    match format {
        BfpFormat::Bfp8B => pack_tile_body::<8>(tile, out),
        BfpFormat::Bfp4B => pack_tile_body::<4>(tile, out),
    }
}

fn unpack_tile_generic(format: BfpFormat, bytes: &[u8], out: &mut [f32]) {
    match format {
        BfpFormat::Bfp8B => unpack_tile_body::<8>(bytes, out),
        BfpFormat::Bfp4B => unpack_tile_body::<4>(bytes, out),
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;

    /// # Safety
    /// The CPU must support AVX2 (checked by the caller).
    #[target_feature(enable = "avx2")]
    pub unsafe fn pack_tiles(format: BfpFormat, tiled: &[f32], out: &mut [u8]) {
        let tb = format.tile_bytes();
        for (t, o) in tiled.chunks_exact(TILE_ELEMS).zip(out.chunks_exact_mut(tb)) {
            match format {
                BfpFormat::Bfp8B => pack_tile_body::<8>(t, o),
                BfpFormat::Bfp4B => pack_tile_body::<4>(t, o),
            }
        }
    }

    /// # Safety
    /// The CPU must support AVX2 (checked by the caller).
    #[target_feature(enable = "avx2")]
    pub unsafe fn unpack_tiles(format: BfpFormat, bytes: &[u8], out: &mut [f32]) {
        let tb = format.tile_bytes();
        for (b, o) in bytes.chunks_exact(tb).zip(out.chunks_exact_mut(TILE_ELEMS)) {
            match format {
                BfpFormat::Bfp8B => unpack_tile_body::<8>(b, o),
                BfpFormat::Bfp4B => unpack_tile_body::<4>(b, o),
            }
        }
    }
}

/// Pack a run of tiles on the calling thread (AVX2 build when the CPU has it).
pub fn pack_tiles_serial(format: BfpFormat, tiled: &[f32], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just checked.
        unsafe { avx2::pack_tiles(format, tiled, out) };
        return;
    }
    let tb = format.tile_bytes();
    for (t, o) in tiled.chunks_exact(TILE_ELEMS).zip(out.chunks_exact_mut(tb)) {
        pack_tile_generic(format, t, o);
    }
}

/// Unpack a run of tiles on the calling thread (AVX2 build when the CPU has it).
pub fn unpack_tiles_serial(format: BfpFormat, bytes: &[u8], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 support was just checked.
        unsafe { avx2::unpack_tiles(format, bytes, out) };
        return;
    }
    let tb = format.tile_bytes();
    for (b, o) in bytes.chunks_exact(tb).zip(out.chunks_exact_mut(TILE_ELEMS)) {
        unpack_tile_generic(format, b, o);
    }
}

/// Pack face-ordered tiles, in parallel over the current rayon pool.
///
/// Panics if the buffers are not the same whole number of tiles; [`super::encode_tiles`] is
/// the checked entry point.
pub fn pack_tiles(format: BfpFormat, tiled: &[f32], out: &mut [u8]) {
    let tb = format.tile_bytes();
    assert!(tiled.len().is_multiple_of(TILE_ELEMS) && out.len() == tiled.len() / TILE_ELEMS * tb);
    tiled
        .par_chunks(TILE_ELEMS * TILES_PER_TASK)
        .zip(out.par_chunks_mut(tb * TILES_PER_TASK))
        .for_each(|(t, o)| pack_tiles_serial(format, t, o));
}

/// Unpack tiles to face-ordered f32, in parallel over the current rayon pool.
pub fn unpack_tiles(format: BfpFormat, bytes: &[u8], out: &mut [f32]) {
    let tb = format.tile_bytes();
    assert!(bytes.len().is_multiple_of(tb) && out.len() == bytes.len() / tb * TILE_ELEMS);
    bytes
        .par_chunks(tb * TILES_PER_TASK)
        .zip(out.par_chunks_mut(TILE_ELEMS * TILES_PER_TASK))
        .for_each(|(b, o)| unpack_tiles_serial(format, b, o));
}

/// The portable (non-AVX2) build, exposed so tests can check it against the reference too.
pub fn pack_tiles_portable(format: BfpFormat, tiled: &[f32], out: &mut [u8]) {
    let tb = format.tile_bytes();
    for (t, o) in tiled.chunks_exact(TILE_ELEMS).zip(out.chunks_exact_mut(tb)) {
        pack_tile_generic(format, t, o);
    }
}

/// The portable (non-AVX2) unpacker.
pub fn unpack_tiles_portable(format: BfpFormat, bytes: &[u8], out: &mut [f32]) {
    let tb = format.tile_bytes();
    for (b, o) in bytes.chunks_exact(tb).zip(out.chunks_exact_mut(TILE_ELEMS)) {
        unpack_tile_generic(format, b, o);
    }
}
