//! float32 → bfloat16 conversion as tt-metal's host library does it.
//!
//! `bfloat16(float)` / `fp32_to_bf16_bits_round_to_nearest_even` round to nearest, ties to
//! even; every NaN becomes the canonical quiet `0x7fc0` (sign dropped, sNaN quieted); finite
//! values that overflow become ±Inf; subnormals are rounded, not flushed
//! (golden: `tile_layout.json` → `f32_to_bf16`).

/// Round-to-nearest-even f32 → bf16 bits, tt-metal's rule.
#[inline(always)]
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if x.is_nan() {
        return 0x7fc0;
    }
    let lsb = (u >> 16) & 1;
    (u.wrapping_add(0x7fff + lsb) >> 16) as u16
}

/// `bfloat16::truncate`: keep the top 16 bits.
#[inline(always)]
pub fn f32_to_bf16_bits_truncate(x: f32) -> u16 {
    (x.to_bits() >> 16) as u16
}

/// bf16 bits → f32 (exact).
#[inline(always)]
pub fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// Round an f32 to the nearest bf16 value, returned as f32 (what a device pack to bf16 keeps).
#[inline(always)]
pub fn round_to_bf16(x: f32) -> f32 {
    bf16_bits_to_f32(f32_to_bf16_bits(x))
}

/// Convert a slice (chunked so the loop autovectorizes; NaN handled by a select).
pub fn f32_slice_to_bf16_bits(src: &[f32], dst: &mut [u16]) {
    assert_eq!(
        src.len(),
        dst.len(),
        "f32_slice_to_bf16_bits: length mismatch"
    );
    for (s, d) in src.iter().zip(dst.iter_mut()) {
        *d = f32_to_bf16_bits(*s);
    }
}
