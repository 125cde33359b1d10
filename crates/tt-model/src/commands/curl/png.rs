//! The picture `--task image-text-to-text` shows the model: the original's 224×224 PNG, red
//! above blue (small, and its colours are easy to check in the answer), as a data URL.

use base64::Engine;

/// The side of the square image.
pub const SIZE: u32 = 224;

/// `data:image/png;base64,…` of [`sample_png`].
pub fn sample_image_url() -> String {
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(sample_png())
    )
}

/// 8-bit RGB, the top half red, the bottom half blue.
pub fn sample_png() -> Vec<u8> {
    let half = (SIZE * SIZE / 2) as usize;
    let pixels: Vec<u8> = std::iter::repeat_n([0xff, 0, 0], half)
        .chain(std::iter::repeat_n([0, 0, 0xff], half))
        .flatten()
        .collect();
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, SIZE, SIZE);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    // Rows unfiltered: two flat colours compress as well either way, and a reader (the curl
    // test's) finds the pixels in the stream.
    encoder.set_filter(png::Filter::NoFilter);
    // Writing to memory cannot fail, and the header and data are ours.
    let mut writer = encoder.write_header().expect("PNG header to memory");
    writer
        .write_image_data(&pixels)
        .expect("PNG data to memory");
    writer.finish().expect("PNG end to memory");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_is_small_and_decodes_to_red_over_blue() {
        let bytes = sample_png();
        assert!(bytes.len() < 4096, "{} bytes", bytes.len());
        assert!(sample_image_url().starts_with("data:image/png;base64,iVBORw0KGgo"));
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (SIZE, SIZE));
        assert_eq!(&buf[..3], &[0xff, 0, 0]);
        assert_eq!(&buf[buf.len() - 3..], &[0, 0, 0xff]);
    }
}
