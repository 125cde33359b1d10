//! Strict standard base64 (RFC 4648 alphabet, `=` padding) for image payloads, with an AVX2
//! bulk decoder (Muła & Lemire, "Faster Base64 Encoding and Decoding using AVX2 Instructions":
//! 32 characters -> 24 bytes per step, validity checked by two nibble lookups).
//!
//! [`decode_standard`] accepts only canonical input (length a multiple of 4, padding only at
//! the end, zero trailing bits) and returns `None` for anything else, so a caller can hand
//! such input to a general decoder that words the error or tolerates whitespace.

/// Value of a base64 character, or 0xFF.
const fn decode_table() -> [u8; 256] {
    let mut t = [0xFFu8; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t
}
const TABLE: [u8; 256] = decode_table();

/// Decode canonical standard base64; `None` if `s` is not exactly that.
pub fn decode_standard(s: &[u8]) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(s.len() / 4 * 3 + 32);
    // The bulk never includes the last quantum (it may hold padding).
    let mut done_in = 0;
    let mut done_out = 0;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected; `out` has room for every 24-byte block plus the 8 bytes
        // of slack its 32-byte stores write.
        (done_in, done_out) = unsafe { x86::decode_bulk(s, out.spare_capacity_mut()) };
    }
    let rest = &s[done_in..];
    let spare = &mut out.spare_capacity_mut()[done_out..];
    let mut o = 0;
    for (q, quad) in rest.chunks_exact(4).enumerate() {
        let last = q + 1 == rest.len() / 4;
        let pad = if last {
            quad.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return None;
        }
        let mut v = 0u32;
        for &c in &quad[..4 - pad] {
            let d = TABLE[c as usize];
            if d == 0xFF {
                return None;
            }
            v = (v << 6) | d as u32;
        }
        v <<= 6 * pad as u32;
        let bytes = v.to_be_bytes();
        // Canonical: the bits a padded quantum drops must be zero.
        if bytes[4 - pad..].iter().any(|&b| b != 0) {
            return None;
        }
        for &b in &bytes[1..4 - pad] {
            spare[o].write(b);
            o += 1;
        }
    }
    // SAFETY: the bulk wrote `done_out` bytes and the loop `o` more, contiguously.
    unsafe { out.set_len(done_out + o) };
    Some(out)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// Whole 32-character blocks that end before the last quantum. Returns (characters read,
    /// bytes written); stops early (at a block boundary) at an invalid character, which the
    /// scalar tail then rejects.
    ///
    /// `out` must hold `s.len() / 4 * 3 + 8` bytes (asserted). A safe `#[target_feature]`
    /// function: calling it is `unsafe` only where AVX2 is not statically known.
    #[target_feature(enable = "avx2")]
    pub(super) fn decode_bulk(s: &[u8], out: &mut [MaybeUninit<u8>]) -> (usize, usize) {
        assert!(out.len() >= s.len() / 4 * 3 + 8);
        let lut_lo = _mm256_setr_epi8(
            0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B,
            0x1B, 0x1A, 0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A,
            0x1B, 0x1B, 0x1B, 0x1A,
        );
        let lut_hi = _mm256_setr_epi8(
            0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
            0x10, 0x10, 0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10,
            0x10, 0x10, 0x10, 0x10,
        );
        let lut_roll = _mm256_setr_epi8(
            0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 19, 4, -65, -65, -71,
            -71, 0, 0, 0, 0, 0, 0, 0, 0,
        );
        let mask_2f = _mm256_set1_epi8(0x2F);
        let pack = _mm256_setr_epi8(
            2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1, 2, 1, 0, 6, 5, 4, 10, 9, 8, 14,
            13, 12, -1, -1, -1, -1,
        );
        let compact = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, -1, -1);
        let mut i = 0;
        let mut o = 0;
        // Leave the last quantum (possible padding) to the scalar code.
        while i + 32 + 4 <= s.len() {
            // SAFETY: `i + 32 <= s.len()`, and `o + 32 <= out.len()` because `o` is 3/4 of
            // `i` and `out` has 8 bytes of slack.
            unsafe {
                let v = _mm256_loadu_si256(s.as_ptr().add(i) as *const __m256i);
                let hi_nib = _mm256_and_si256(_mm256_srli_epi32(v, 4), mask_2f);
                let lo_nib = _mm256_and_si256(v, mask_2f);
                let lo = _mm256_shuffle_epi8(lut_lo, lo_nib);
                let hi = _mm256_shuffle_epi8(lut_hi, hi_nib);
                if _mm256_testz_si256(lo, hi) == 0 {
                    break;
                }
                let eq_2f = _mm256_cmpeq_epi8(v, mask_2f);
                let roll = _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(eq_2f, hi_nib));
                let vals = _mm256_add_epi8(v, roll);
                let ab_bc = _mm256_maddubs_epi16(vals, _mm256_set1_epi32(0x01400140));
                let abc = _mm256_madd_epi16(ab_bc, _mm256_set1_epi32(0x00011000));
                let bytes = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(abc, pack), compact);
                _mm256_storeu_si256(out.as_mut_ptr().add(o) as *mut __m256i, bytes);
            }
            i += 32;
            o += 24;
        }
        (i, o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(data: &[u8]) -> Vec<u8> {
        let a = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::new();
        for ch in data.chunks(3) {
            let v = (ch[0] as u32) << 16
                | (*ch.get(1).unwrap_or(&0) as u32) << 8
                | *ch.get(2).unwrap_or(&0) as u32;
            for k in 0..4 {
                if k <= ch.len() {
                    out.push(a[(v >> (18 - 6 * k)) as usize & 63]);
                } else {
                    out.push(b'=');
                }
            }
        }
        out
    }

    #[test]
    fn round_trips_every_length_and_byte() {
        let mut s = 1u64;
        for n in (0..200).chain([1000, 4095, 4096, 105_000]) {
            let data = crate::preprocess::test_data::bytes(n, &mut s);
            assert_eq!(
                decode_standard(&encode(&data)).as_deref(),
                Some(&data[..]),
                "{n}"
            );
        }
    }

    #[test]
    fn rejects_every_foreign_byte_at_every_position_of_a_block() {
        let data: Vec<u8> = (0..120u8).collect();
        let good = encode(&data);
        for pos in [0, 5, 31, 32, 33, 63, 100, good.len() - 1] {
            for b in 0..=255u8 {
                let mut t = good.clone();
                t[pos] = b;
                let valid = TABLE[b as usize] != 0xFF || (b == b'=' && pos == good.len() - 1);
                let got = decode_standard(&t);
                if !valid {
                    assert_eq!(got, None, "byte {b} at {pos}");
                } else if TABLE[b as usize] != 0xFF && b == good[pos] {
                    assert_eq!(got.as_deref(), Some(&data[..]));
                }
            }
        }
        assert_eq!(decode_standard(b"QQ=="), Some(b"A".to_vec()));
        assert_eq!(decode_standard(b"QR=="), None, "non-zero trailing bits");
        assert_eq!(decode_standard(b"Q==="), None);
        assert_eq!(decode_standard(b"QQ"), None, "padding required");
        assert_eq!(decode_standard(b"QQ==QUJD"), None, "padding inside");
    }
}
