//! The common camera frame, a non-interlaced 8-bit RGB PNG, decoded directly: chunks are
//! walked in place (CRCs checked, as the `png` crate does), the IDAT stream is inflated with
//! `fdeflate` into one buffer, and the rows are unfiltered with [`super::unfilter`].
//!
//! Anything else (another colour type or depth, interlacing, `tRNS`, an unknown critical
//! chunk, any error) returns `None`, so the generic decoder decides and words the error.

use super::RgbImage;
use super::unfilter::unfilter_rgb8;

const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A parsed 8-bit RGB PNG: its size and IDAT payloads (borrowed from the file).
pub struct PngRgb8<'a> {
    /// Width in pixels (from `IHDR`).
    pub width: usize,
    /// Height in pixels (from `IHDR`).
    pub height: usize,
    idat: Vec<&'a [u8]>,
}

/// Decode `bytes` if it is an 8-bit RGB, non-interlaced PNG with sides in `1..=max_side`.
pub fn decode_png_rgb8(bytes: &[u8], max_side: usize) -> Option<RgbImage> {
    let png = parse_png_rgb8(bytes, max_side)?;
    let data = png.decode_rows(usize::MAX, |_| {})?;
    Some(RgbImage::new(png.width, png.height, data))
}

/// Walk the chunks; `None` unless this is a PNG [`decode_png_rgb8`] handles (CRCs included).
pub fn parse_png_rgb8(bytes: &[u8], max_side: usize) -> Option<PngRgb8<'_>> {
    let png = parse_png_rgb8_unchecked(bytes, max_side)?;
    verify_crcs(bytes).then_some(png)
}

/// [`parse_png_rgb8`] without the CRC checks, for a caller that runs [`verify_crcs`] itself
/// (on another thread, while this one inflates) and discards the image if they fail.
pub fn parse_png_rgb8_unchecked(bytes: &[u8], max_side: usize) -> Option<PngRgb8<'_>> {
    let mut rest = bytes.strip_prefix(&SIGNATURE)?;
    let mut size = None;
    let mut idat: Vec<&[u8]> = Vec::new();
    loop {
        if rest.len() < 12 {
            return None;
        }
        let len = be32(rest) as usize;
        let kind: [u8; 4] = rest[4..8].try_into().ok()?;
        if rest.len() < 12 + len {
            return None;
        }
        let data = &rest[8..8 + len];
        rest = &rest[12 + len..];
        match &kind {
            b"IHDR" => {
                // width, height, depth 8, colour type 2 (RGB), deflate, adaptive, no interlace.
                if size.is_some() || len != 13 || data[8..] != [8, 2, 0, 0, 0] {
                    return None;
                }
                let (w, h) = (be32(data) as usize, be32(&data[4..]) as usize);
                if w == 0 || h == 0 || w > max_side || h > max_side {
                    return None;
                }
                size = Some((w, h));
            }
            b"IDAT" if size.is_some() => idat.push(data),
            b"IEND" => break,
            // tRNS changes what "RGB" means for the generic decoder; leave it to that path.
            b"tRNS" => return None,
            // PLTE is only a suggested palette for RGB; ancillary chunks do not matter.
            b"PLTE" => {}
            _ if kind[0].is_ascii_lowercase() && size.is_some() => {}
            _ => return None,
        }
    }
    let (width, height) = size?;
    Some(PngRgb8 {
        width,
        height,
        idat,
    })
}

/// Every chunk's CRC matches (`false` also for a file whose chunks do not parse).
pub fn verify_crcs(bytes: &[u8]) -> bool {
    let Some(mut rest) = bytes.strip_prefix(&SIGNATURE) else {
        return false;
    };
    while rest.len() >= 12 {
        let len = be32(rest) as usize;
        if rest.len() < 12 + len {
            return false;
        }
        if crc32fast::hash(&rest[4..8 + len]) != be32(&rest[8 + len..]) {
            return false;
        }
        let iend = &rest[4..8] == b"IEND";
        rest = &rest[12 + len..];
        if iend {
            return true;
        }
    }
    false
}

impl PngRgb8<'_> {
    /// Bytes of one filtered row: the filter-type byte and the row.
    pub fn raw_row_len(&self) -> usize {
        self.width * 3 + 1
    }

    /// Inflate the IDAT stream, handing each newly complete band of *filtered* rows (at most
    /// `band_rows` rows, each [`Self::raw_row_len`] bytes, top to bottom) to `sink`. `None` on
    /// any error in the stream (the rows already handed over stay valid).
    pub fn inflate_rows(&self, band_rows: usize, sink: impl FnMut(&[u8])) -> Option<()> {
        thread_local! {
            static RAW: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        }
        let len = self.height * self.raw_row_len();
        // Every byte is written by the inflate before it is read (or handed to `sink`).
        super::with_scratch(&RAW, len, |raw| self.inflate_into(raw, band_rows, sink))
    }

    fn inflate_into(
        &self,
        raw: &mut [u8],
        band_rows: usize,
        mut sink: impl FnMut(&[u8]),
    ) -> Option<()> {
        let row_in = self.raw_row_len();
        let mut dec = fdeflate::Decompressor::new();
        // As the `png` crate: chunk CRCs are checked, the zlib checksum is not.
        dec.ignore_adler32();
        let band_bytes = band_rows.saturating_mul(row_in).max(row_in);
        let (mut pos, mut rows_done, mut chunk) = (0, 0, 0);
        let mut input: &[u8] = self.idat.first().copied().unwrap_or(&[]);
        while pos < raw.len() {
            while input.is_empty() && chunk + 1 < self.idat.len() {
                chunk += 1;
                input = self.idat[chunk];
            }
            let last = chunk + 1 >= self.idat.len();
            let limit = pos.saturating_add(band_bytes).min(raw.len());
            let (used, made) = dec.read(input, &mut raw[..limit], pos, last).ok()?;
            input = &input[used..];
            pos += made;
            let rows_ready = pos / row_in;
            if rows_ready > rows_done {
                sink(&raw[rows_done * row_in..rows_ready * row_in]);
                rows_done = rows_ready;
            }
            if used == 0 && made == 0 && (last || !input.is_empty()) && pos < raw.len() {
                // No progress with everything available: truncated or stuck stream.
                return None;
            }
        }
        Some(())
    }

    /// Inflate and unfilter, handing each newly finished band of rows (at most `band_rows`
    /// rows, top to bottom) to `sink` as it completes; returns the whole image. `None` on any
    /// error in the stream (the rows already handed over stay valid).
    pub fn decode_rows(&self, band_rows: usize, mut sink: impl FnMut(&[u8])) -> Option<Vec<u8>> {
        let stride = self.width * 3;
        let mut out = vec![0u8; self.height * stride];
        let mut rows_done = 0;
        let mut bad = false;
        self.inflate_rows(band_rows, |raw| {
            if bad {
                return;
            }
            let n = raw.len() / (stride + 1);
            let (done, todo) = out.split_at_mut(rows_done * stride);
            let above = rows_done.checked_sub(1).map(|r| &done[r * stride..]);
            let band = &mut todo[..n * stride];
            if unfilter_rgb8(raw, above, band, stride).is_err() {
                bad = true;
                return;
            }
            sink(band);
            rows_done += n;
        })?;
        (!bad).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preprocess::test_data::encode_png as encode;

    fn noise(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(1664525).wrapping_add(1013904223);
                // Smooth-ish content so every filter type gets chosen by the adaptive encoder.
                ((i / 7) as u32).wrapping_add(s >> 29) as u8
            })
            .collect()
    }

    #[test]
    fn matches_the_png_crate_on_rgb8() {
        for (w, h) in [(1, 1), (3, 2), (31, 17), (256, 256), (243, 100)] {
            let data = noise(w * h * 3, (w * h) as u32);
            for filter in [
                png::Filter::Adaptive,
                png::Filter::Paeth,
                png::Filter::Sub,
                png::Filter::Avg,
            ] {
                let file = encode(w as u32, h as u32, png::ColorType::Rgb, &data, filter);
                let img = decode_png_rgb8(&file, 4096).expect("fast path");
                assert_eq!((img.width, img.height), (w, h));
                assert_eq!(img.data, data, "{w}x{h} {filter:?}");
            }
        }
    }

    #[test]
    fn declines_what_it_does_not_handle() {
        let rgba = encode(4, 4, png::ColorType::Rgba, &[9; 64], png::Filter::Sub);
        assert!(decode_png_rgb8(&rgba, 4096).is_none());
        let rgb = encode(4, 4, png::ColorType::Rgb, &[9; 48], png::Filter::Sub);
        assert!(decode_png_rgb8(&rgb, 3).is_none(), "too large");
        let mut bad_crc = rgb.clone();
        let n = bad_crc.len();
        bad_crc[n - 20] ^= 1;
        assert!(decode_png_rgb8(&bad_crc, 4096).is_none());
        assert!(
            decode_png_rgb8(&rgb[..rgb.len() - 12], 4096).is_none(),
            "truncated"
        );
    }
}
