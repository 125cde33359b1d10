//! The DiT weight arena built from the tiny golden checkpoint, and its cache file.

use crate::common;

use common::{SafeTensors, Src, TINY, tiny_dims};
use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::{
    ArenaError, ArenaKey, CacheOutcome, arena_layout, build_arena_bytes, decode_weight,
    open_or_build,
};
use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::bfp::{BfpFormat, pack_row_major, unpack_row_major};
use tt_blackhole::dims::WeightKind;

fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; w.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = w[r * cols + c];
        }
    }
    t
}

#[test]
fn tiny_checkpoint_names_shapes_and_values() {
    let st = SafeTensors::read(&format!("{TINY}/model.safetensors"));
    let dims = tiny_dims();
    assert_eq!(
        (dims.num_layers, dims.width(), dims.cross_dim, dims.ff_inner),
        (8, 40, 16, 160)
    );
    for dtype in [ArenaDtype::Bfp8B, ArenaDtype::Bfp4B, ArenaDtype::Bf16] {
        let layout = arena_layout(&dims, dtype);
        assert_eq!(layout.entries.len(), 8 * 7);
        let (index, data) = build_arena_bytes(&layout, &Src(&st)).unwrap();
        assert_eq!(data.len() as u64, index.total_bytes);
        for e in &index.entries {
            let [out, inp] = e.torch_shape;
            assert_eq!(st.tensors[&e.name].1, vec![out, inp], "{}", e.name);
            assert_eq!(e.sha256.len(), 64);
            let got = decode_weight(
                e,
                index.compute_cores,
                &data[e.offset as usize..(e.offset + e.bytes) as usize],
            )
            .unwrap();
            // What the device multiplies with: W^T packed through the plain row-major codec.
            let wt = transpose(&st.f32(&e.name), out, inp);
            let want = match dtype {
                ArenaDtype::Bfp8B => unpack_row_major(
                    BfpFormat::Bfp8B,
                    &pack_row_major(BfpFormat::Bfp8B, &wt, inp, out),
                    inp,
                    out,
                ),
                ArenaDtype::Bfp4B => unpack_row_major(
                    BfpFormat::Bfp4B,
                    &pack_row_major(BfpFormat::Bfp4B, &wt, inp, out),
                    inp,
                    out,
                ),
                ArenaDtype::Bf16 => wt.iter().map(|&x| round_to_bf16(x)).collect(),
            };
            assert_eq!(got, want, "{} {dtype}", e.name);
        }
        // Cross blocks read the 16-wide context, self blocks the 40-wide token stream.
        assert_eq!(index.entry(0, WeightKind::K).unwrap().kn_shape, [16, 40]);
        assert_eq!(index.entry(1, WeightKind::V).unwrap().kn_shape, [40, 40]);
    }
}

#[test]
fn bf16_source_gives_same_bytes_as_its_f32_value() {
    let st = SafeTensors::read(&format!("{TINY}/model.safetensors"));
    let dims = tiny_dims();
    let layout = arena_layout(&dims, ArenaDtype::Bfp8B);
    // A bf16 copy of the checkpoint, and the same values as f32.
    let bf16_src = |name: &str| -> Result<
        tt_blackhole::arena::SourceTensor<'static>,
        tt_blackhole::arena::SourceError,
    > {
        let t = st.source(name)?;
        let v = st.f32(name);
        let bytes: Vec<u8> = v
            .iter()
            .flat_map(|x| tt_blackhole::bf16::f32_to_bf16_bits(*x).to_le_bytes())
            .collect();
        Ok(tt_blackhole::arena::SourceTensor {
            shape: t.shape,
            data: tt_blackhole::arena::TensorData::Bf16Le(bytes.into()),
        })
    };
    let f32_src = |name: &str| -> Result<
        tt_blackhole::arena::SourceTensor<'static>,
        tt_blackhole::arena::SourceError,
    > {
        let t = st.source(name)?;
        let v: Vec<f32> = st.f32(name).into_iter().map(round_to_bf16).collect();
        Ok(tt_blackhole::arena::SourceTensor {
            shape: t.shape,
            data: tt_blackhole::arena::TensorData::F32(v.into()),
        })
    };
    let (a, da) = build_arena_bytes(&layout, &bf16_src).unwrap();
    let (b, db) = build_arena_bytes(&layout, &f32_src).unwrap();
    assert_eq!(da, db);
    assert_eq!(a, b);
}

#[test]
fn missing_or_misshapen_tensor_is_a_located_error() {
    let st = SafeTensors::read(&format!("{TINY}/model.safetensors"));
    let layout = arena_layout(&tiny_dims(), ArenaDtype::Bfp8B);
    let missing = |name: &str| -> Result<
        tt_blackhole::arena::SourceTensor<'static>,
        tt_blackhole::arena::SourceError,
    > {
        if name.contains("blocks.5.ff.net.2") {
            Err("gone".into())
        } else {
            st.source(name).map(|t| tt_blackhole::arena::SourceTensor {
                shape: t.shape,
                data: tt_blackhole::arena::TensorData::F32(st.f32(name).into()),
            })
        }
    };
    let e = build_arena_bytes(&layout, &missing)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("transformer_blocks.5.ff.net.2.weight") && e.contains("gone"),
        "{e}"
    );
    let wrong = |_: &str| -> Result<
        tt_blackhole::arena::SourceTensor<'static>,
        tt_blackhole::arena::SourceError,
    > {
        Ok(tt_blackhole::arena::SourceTensor {
            shape: vec![2, 2],
            data: tt_blackhole::arena::TensorData::F32(vec![0.0; 4].into()),
        })
    };
    let e = build_arena_bytes(&layout, &wrong).unwrap_err().to_string();
    assert!(e.contains("shape [2, 2], expected [80, 40]"), "{e}");
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tt-blackhole-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn cache_hit_key_change_and_corruption() {
    let st = SafeTensors::read(&format!("{TINY}/model.safetensors"));
    let dims = tiny_dims();
    let layout = arena_layout(&dims, ArenaDtype::Bfp8B);
    let dir = temp_dir("cache");
    let key = ArenaKey::new("tiny-case1-rev1", ArenaDtype::Bfp8B);
    let src = Src(&st);

    let (a, o) = open_or_build(&dir, &key, &layout, &src).unwrap();
    assert_eq!(
        o,
        CacheOutcome::Built {
            reason: "no cache file".into()
        }
    );
    let (expected_index, expected_data) = build_arena_bytes(&layout, &src).unwrap();
    assert_eq!(a.data(), &expected_data[..]);
    assert_eq!(a.index, expected_index);
    let path = a.path.clone();
    drop(a);
    // No temporary files are left behind.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

    let (a, o) = open_or_build(&dir, &key, &layout, &src).unwrap();
    assert_eq!(o, CacheOutcome::Hit);
    let q = a
        .decode("action_head.model.transformer_blocks.2.attn1.to_q.weight")
        .unwrap();
    assert_eq!(q.len(), 40 * 40);
    drop(a);

    // A new weights revision rebuilds.
    let key2 = ArenaKey::new("tiny-case1-rev2", ArenaDtype::Bfp8B);
    let (_, o) = open_or_build(&dir, &key2, &layout, &src).unwrap();
    assert!(
        matches!(&o, CacheOutcome::Built { reason } if reason.contains("does not match")),
        "{o:?}"
    );
    let (_, o) = open_or_build(&dir, &key2, &layout, &src).unwrap();
    assert_eq!(o, CacheOutcome::Hit);

    let good = std::fs::read(&path).unwrap();
    let len = good.len();
    // A flipped byte in a weight: the open checks only the sealed index, so it succeeds; the
    // first read of that weight (alone, or in a full read) is the typed error, and the
    // other weights still read.
    let last = expected_index.entries.last().unwrap().name.clone();
    let first = expected_index.entries[0].name.clone();
    let mut bad = good.clone();
    bad[len - 48 - 5000] ^= 0x01;
    std::fs::write(&path, &bad).unwrap();
    let (a, o) = open_or_build(&dir, &key2, &layout, &src).unwrap();
    assert_eq!(o, CacheOutcome::Hit);
    assert_eq!(a.checked_weights(), 0, "the open hashes no weight");
    assert!(a.weight(&first).is_ok());
    for err in [
        a.weight(&last).unwrap_err(),
        a.decode(&last).unwrap_err(),
        a.verified_data().unwrap_err(),
    ] {
        match &err {
            ArenaError::WeightChecksum { path: p, name } => {
                assert_eq!((p, name), (&path, &last), "{err}")
            }
            other => panic!("expected WeightChecksum, got {other:?}"),
        }
        assert!(err.to_string().contains("checksum mismatch in"), "{err}");
    }
    drop(a);
    // Deleting the file rebuilds it (what the error message tells the user).
    std::fs::remove_file(&path).unwrap();
    let (a, o) = open_or_build(&dir, &key2, &layout, &src).unwrap();
    assert!(matches!(o, CacheOutcome::Built { .. }), "{o:?}");
    assert_eq!(a.checked_weights(), expected_index.entries.len());
    assert_eq!(a.verified_data().unwrap(), &expected_data[..]);
    drop(a);

    // Truncated (partial write), a flipped index byte, a flipped trailer byte, a wrong magic:
    // each fails the open, is rebuilt, and the rebuilt file is the good one.
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let damages: Vec<(&str, Damage)> = vec![
        (
            "truncated",
            Box::new(|b: &mut Vec<u8>| b.truncate(b.len() - 1000)),
        ),
        (
            "truncated to header",
            Box::new(|b: &mut Vec<u8>| b.truncate(40)),
        ),
        ("index byte", Box::new(|b: &mut Vec<u8>| b[200] ^= 0x20)),
        (
            "trailer",
            Box::new(move |b: &mut Vec<u8>| b[len - 40] ^= 0xff),
        ),
        ("magic", Box::new(|b: &mut Vec<u8>| b[0] = b'X')),
    ];
    for (what, damage) in damages {
        let mut bad = good.clone();
        damage(&mut bad);
        std::fs::write(&path, &bad).unwrap();
        let (a, o) = open_or_build(&dir, &key2, &layout, &src).unwrap();
        assert!(matches!(o, CacheOutcome::Built { .. }), "{what}: {o:?}");
        assert_eq!(a.data(), &expected_data[..], "{what}");
        drop(a);
        assert_eq!(std::fs::read(&path).unwrap(), good, "{what}: rebuilt file");
    }
    // A file for another dtype is a different file.
    let key4 = ArenaKey::new("tiny-case1-rev2", ArenaDtype::Bfp4B);
    let (a, o) = open_or_build(&dir, &key4, &arena_layout(&dims, ArenaDtype::Bfp4B), &src).unwrap();
    assert!(matches!(o, CacheOutcome::Built { .. }));
    assert_ne!(a.path, path);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The whole full-size arena from random weights (1.15 GB in memory): slow, run by hand with
/// `cargo test -p tt-blackhole --release -- --ignored`.
#[test]
#[ignore = "builds the 1.15 GB full-size arena (several seconds, >2 GB RAM)"]
fn full_size_arena_with_random_weights() {
    let dims = tt_blackhole::dims::DitDims::FULL;
    let layout = arena_layout(&dims, ArenaDtype::Bfp8B);
    let src = random_source(7);
    let (index, data) = build_arena_bytes(&layout, &src).unwrap();
    assert_eq!(data.len(), 1_149_763_584);
    assert_eq!(index.entries.len(), 224);
    // Spot-check one weight round trip.
    let e = index.entry(30, WeightKind::FfDown).unwrap();
    let w = decode_weight(
        e,
        index.compute_cores,
        &data[e.offset as usize..(e.offset + e.bytes) as usize],
    )
    .unwrap();
    assert_eq!(w.len(), 6144 * 1536);
}

pub fn random_source(
    seed: u64,
) -> impl Fn(
    &str,
) -> Result<tt_blackhole::arena::SourceTensor<'static>, tt_blackhole::arena::SourceError>
+ Sync {
    let dims = tt_blackhole::dims::DitDims::FULL;
    move |name: &str| {
        let w = dims
            .weights()
            .into_iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| format!("unknown {name}"))?;
        let n = w.shape[0] * w.shape[1];
        let mut s = seed ^ (w.block as u64 * 7919 + w.kind as u64 * 104_729 + 1);
        let v: Vec<f32> = (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.04
            })
            .collect();
        Ok(tt_blackhole::arena::SourceTensor {
            shape: w.shape.to_vec(),
            data: tt_blackhole::arena::TensorData::F32(v.into()),
        })
    }
}
