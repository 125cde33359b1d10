//! The codec against tt-metal's own host packer (../shared/golden/blockfloat).

use serde_json::Value;
use tt_blackhole::bf16::{f32_to_bf16_bits, f32_to_bf16_bits_truncate};
use tt_blackhole::bfp::{BfpFormat, fast, pack_row_major, scalar, unpack_row_major};
use tt_blackhole::tile::{tilize, untilize};

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/golden/blockfloat"
);

fn load(name: &str) -> Value {
    let path = format!("{GOLDEN}/{name}");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
        .unwrap()
}

fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| u32::from_str_radix(h.as_str().unwrap(), 16).unwrap())
        .collect()
}

fn shape(c: &Value) -> (usize, usize) {
    let s = c["shape"].as_array().unwrap();
    (
        s[0].as_u64().unwrap() as usize,
        s[1].as_u64().unwrap() as usize,
    )
}

fn check_format(file: &str, format: BfpFormat) {
    let doc = load(file);
    assert_eq!(
        doc["tile_bytes"].as_u64().unwrap() as usize,
        format.tile_bytes()
    );
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 27, "{file}: encode cases");
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let (rows, cols) = shape(c);
        let input: Vec<f32> = u32s(&c["input_f32_hex"])
            .into_iter()
            .map(f32::from_bits)
            .collect();
        let want = hex_bytes(c["packed_hex"].as_str().unwrap());

        // Fast path (rayon + AVX2 when present).
        let got = pack_row_major(format, &input, rows, cols);
        assert_eq!(got.len(), want.len(), "{file}/{name}: packed length");
        if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
            panic!(
                "{file}/{name}: fast pack differs at byte {i}: {:02x} vs {:02x}",
                got[i], want[i]
            );
        }
        // Scalar reference and the portable (non-AVX2) build of the fast kernel.
        let tiled = tilize(&input, rows, cols, 0.0f32);
        let mut s = vec![0u8; want.len()];
        scalar::pack_tiles(format, &tiled, &mut s);
        assert!(s == want, "{file}/{name}: scalar pack differs");
        let mut p = vec![0u8; want.len()];
        fast::pack_tiles_portable(format, &tiled, &mut p);
        assert!(p == want, "{file}/{name}: portable pack differs");

        check_decode(
            file,
            name,
            format,
            &want,
            rows,
            cols,
            &u32s(&c["decoded_f32_hex"]),
        );
    }
    let dec = doc["decode_only_cases"].as_array().unwrap();
    assert!(!dec.is_empty());
    for c in dec {
        let (rows, cols) = shape(c);
        let packed = hex_bytes(c["packed_hex"].as_str().unwrap());
        check_decode(
            file,
            c["name"].as_str().unwrap(),
            format,
            &packed,
            rows,
            cols,
            &u32s(&c["decoded_f32_hex"]),
        );
    }
}

fn check_decode(
    file: &str,
    name: &str,
    format: BfpFormat,
    packed: &[u8],
    rows: usize,
    cols: usize,
    want: &[u32],
) {
    let got: Vec<u32> = unpack_row_major(format, packed, rows, cols)
        .into_iter()
        .map(f32::to_bits)
        .collect();
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{file}/{name}: fast unpack differs at element {i}: {:08x} vs {:08x}",
            got[i], want[i]
        );
    }
    let tiles = packed.len() / format.tile_bytes();
    let mut t = vec![0f32; tiles * 1024];
    scalar::unpack_tiles(format, packed, &mut t);
    let s: Vec<u32> = untilize(&t, rows, cols)
        .into_iter()
        .map(f32::to_bits)
        .collect();
    assert!(s == want, "{file}/{name}: scalar unpack differs");
    fast::unpack_tiles_portable(format, packed, &mut t);
    let p: Vec<u32> = untilize(&t, rows, cols)
        .into_iter()
        .map(f32::to_bits)
        .collect();
    assert!(p == want, "{file}/{name}: portable unpack differs");
}

#[test]
fn bfp8_b_matches_tt_metal() {
    check_format("bfp8_b.json", BfpFormat::Bfp8B);
}

#[test]
fn bfp4_b_matches_tt_metal() {
    check_format("bfp4_b.json", BfpFormat::Bfp4B);
}

#[test]
fn tile_layout_and_bf16_match_tt_metal() {
    let doc = load("tile_layout.json");
    // TILED_NFACES order of a 64x64 ramp.
    let order: Vec<u32> = doc["tiled_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let ramp: Vec<u32> = (0..4096).collect();
    assert_eq!(tilize(&ramp, 64, 64, 0), order);
    assert_eq!(untilize(&order, 64, 64), ramp);
    // bf16 TILE bytes.
    let input: Vec<u16> = doc["input_bf16_hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| u16::from_str_radix(h.as_str().unwrap(), 16).unwrap())
        .collect();
    let tiled = tilize(&input, 64, 64, 0u16);
    let bytes: Vec<u8> = tiled.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(
        bytes,
        hex_bytes(doc["tile_bytes_bf16_hex"].as_str().unwrap())
    );
    // f32 → bf16: the constructor (round to nearest even, canonical NaN) and truncate.
    let conv = doc["f32_to_bf16"].as_array().unwrap();
    assert!(conv.len() >= 20);
    for e in conv {
        let x = f32::from_bits(u32::from_str_radix(e["f32_hex"].as_str().unwrap(), 16).unwrap());
        let rne = u16::from_str_radix(e["bfloat16_from_float_ctor"].as_str().unwrap(), 16).unwrap();
        let rne2 = u16::from_str_radix(
            e["fp32_to_bf16_bits_round_to_nearest_even"]
                .as_str()
                .unwrap(),
            16,
        )
        .unwrap();
        let tr = u16::from_str_radix(e["bfloat16_truncate"].as_str().unwrap(), 16).unwrap();
        assert_eq!(f32_to_bf16_bits(x), rne, "ctor {:08x}", x.to_bits());
        assert_eq!(f32_to_bf16_bits(x), rne2, "rne {:08x}", x.to_bits());
        assert_eq!(
            f32_to_bf16_bits_truncate(x),
            tr,
            "truncate {:08x}",
            x.to_bits()
        );
    }
}

/// Random bit patterns of every class (normals, subnormals, zeros, NaN/Inf), grouped so that
/// shared exponents vary: the fast kernels equal the scalar reference everywhere.
#[test]
fn fast_equals_scalar_on_random_bits() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let tiles = 64;
    let mut data = vec![0f32; tiles * 1024];
    for (i, v) in data.iter_mut().enumerate() {
        let r = next();
        let group_exp = ((i / 16) as u64 * 37 % 256) as u32;
        let bits = match r % 8 {
            0 => (r >> 8) as u32,                                     // anything
            1 => ((r >> 8) as u32 & 0x807f_ffff) | (group_exp << 23), // at the group exponent
            2 => {
                ((r >> 8) as u32 & 0x807f_ffff)
                    | (group_exp.saturating_sub((r >> 40) as u32 % 30) << 23)
            }
            3 => (r >> 8) as u32 & 0x807f_ffff, // subnormal / zero
            _ => ((r >> 8) as u32 & 0x81ff_ffff) | (0x3c00_0000), // near 1
        };
        *v = f32::from_bits(bits);
    }
    for format in [BfpFormat::Bfp8B, BfpFormat::Bfp4B] {
        let n = tiles * format.tile_bytes();
        let (mut a, mut b, mut c) = (vec![0u8; n], vec![0u8; n], vec![0u8; n]);
        scalar::pack_tiles(format, &data, &mut a);
        fast::pack_tiles(format, &data, &mut b);
        fast::pack_tiles_portable(format, &data, &mut c);
        assert!(a == b && a == c, "{format:?} pack");
        // Decode random bytes (every code, every exponent) both ways.
        let bytes: Vec<u8> = (0..n).map(|_| next() as u8).collect();
        let (mut x, mut y, mut z) = (
            vec![0f32; tiles * 1024],
            vec![0f32; tiles * 1024],
            vec![0f32; tiles * 1024],
        );
        scalar::unpack_tiles(format, &bytes, &mut x);
        fast::unpack_tiles(format, &bytes, &mut y);
        fast::unpack_tiles_portable(format, &bytes, &mut z);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(&x) == bits(&y) && bits(&x) == bits(&z),
            "{format:?} unpack"
        );
    }
}

#[test]
fn report_vectors_by_hand() {
    // tenstorrent.md §1.8 group A in one face row; the rest of the tile zero.
    let a = [
        1.0,
        0.5,
        -0.25,
        1.5,
        1.999_999_9,
        2f32.powi(-10),
        -1.0,
        0.0,
        -0.0,
        1.0 / 3.0,
        0.75,
        -0.125,
        1.007_812_5,
        1.023_437_5,
        1e-30,
        1.984_375,
    ];
    let mut tile = vec![0f32; 1024];
    tile[..16].copy_from_slice(&a);
    let mut out = vec![0u8; 1088];
    fast::pack_tiles(BfpFormat::Bfp8B, &tile, &mut out);
    assert_eq!(out[0], 0x7f);
    assert_eq!(
        &out[64..80],
        &[
            0x40, 0x20, 0x90, 0x60, 0x7f, 0, 0xc0, 0, 0, 0x15, 0x30, 0x88, 0x40, 0x42, 0, 0x7f
        ]
    );
    let mut out4 = vec![0u8; 576];
    fast::pack_tiles(BfpFormat::Bfp4B, &tile, &mut out4);
    // codes 4 2 9 6 7 0 c 0 0 1 3 0 4 4 0 7, low nibble first
    assert_eq!(
        &out4[64..72],
        &[0x24, 0x69, 0x07, 0x0c, 0x10, 0x03, 0x44, 0x70]
    );
    assert!(
        tt_blackhole::bfp::encode_tiles(tt_blackhole::DataFormat::Bfp8B, &tile[..100], &mut out)
            .is_err()
    );
}
