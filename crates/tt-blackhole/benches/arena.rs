//! Full-size (32-block) DiT arena build: cold (pack 1.08 G parameters and write the 1.15 GB
//! cache file), warm (a cache hit: map the file and check its sealed index; the weights are
//! checked on first read) and warm + full check (the hit, then every weight's digest, as a
//! DRAM upload reads it).
//! Random weights, one buffer per distinct shape reused by every block, so that generating
//! the input costs nothing inside the timing.

use std::borrow::Cow;
use std::collections::HashMap;

use divan::Bencher;
use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::{
    ArenaKey, CacheOutcome, SourceTensor, TensorData, TensorSource, arena_layout, open_or_build,
};
use tt_blackhole::dims::DitDims;

fn main() {
    divan::main();
}

struct Random {
    by_shape: HashMap<[usize; 2], Vec<f32>>,
    shapes: HashMap<String, [usize; 2]>,
}

impl Random {
    fn new() -> Self {
        let mut by_shape = HashMap::new();
        let mut shapes = HashMap::new();
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for w in DitDims::FULL.weights() {
            shapes.insert(w.name(), w.shape);
            by_shape.entry(w.shape).or_insert_with(|| {
                (0..w.shape[0] * w.shape[1])
                    .map(|_| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.04
                    })
                    .collect()
            });
        }
        Random { by_shape, shapes }
    }
}

impl TensorSource for Random {
    fn tensor(&self, name: &str) -> Result<SourceTensor<'_>, tt_blackhole::arena::SourceError> {
        let shape = *self
            .shapes
            .get(name)
            .ok_or_else(|| format!("unknown {name}"))?;
        Ok(SourceTensor {
            shape: shape.to_vec(),
            data: TensorData::F32(Cow::Borrowed(&self.by_shape[&shape])),
        })
    }
}

fn cache_dir() -> std::path::PathBuf {
    std::env::var_os("TT_BLACKHOLE_BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("tt-blackhole-bench-{}", std::process::id()))
        })
}

#[divan::bench(sample_count = 3, sample_size = 1, args = [1, 2])]
fn full_arena_cold(b: Bencher, threads: usize) {
    let src = Random::new();
    let layout = arena_layout(&DitDims::FULL, ArenaDtype::Bfp8B);
    let dir = cache_dir();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut rev = 0;
    b.bench_local(|| {
        rev += 1; // a new revision each time: the key changes, so it rebuilds
        let key = ArenaKey::new(format!("bench-{rev}"), ArenaDtype::Bfp8B);
        let (_, o) = pool
            .install(|| open_or_build(&dir, &key, &layout, &src))
            .unwrap();
        assert!(matches!(o, CacheOutcome::Built { .. }));
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[divan::bench(sample_count = 5, sample_size = 1, args = [1, 2])]
fn full_arena_warm(b: Bencher, threads: usize) {
    let src = Random::new();
    let layout = arena_layout(&DitDims::FULL, ArenaDtype::Bfp8B);
    let dir = cache_dir();
    let key = ArenaKey::new("bench-warm", ArenaDtype::Bfp8B);
    open_or_build(&dir, &key, &layout, &src).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    b.bench_local(|| {
        let (a, o) = pool
            .install(|| open_or_build(&dir, &key, &layout, &src))
            .unwrap();
        assert_eq!(o, CacheOutcome::Hit);
        a.index.total_bytes
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cache hit followed by a full read: every weight checked against its digest.
#[divan::bench(sample_count = 5, sample_size = 1, args = [1, 2])]
fn full_arena_warm_verified(b: Bencher, threads: usize) {
    let src = Random::new();
    let layout = arena_layout(&DitDims::FULL, ArenaDtype::Bfp8B);
    let dir = cache_dir();
    let key = ArenaKey::new("bench-warm", ArenaDtype::Bfp8B);
    open_or_build(&dir, &key, &layout, &src).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    b.bench_local(|| {
        let (a, o) = pool
            .install(|| open_or_build(&dir, &key, &layout, &src))
            .unwrap();
        assert_eq!(o, CacheOutcome::Hit);
        pool.install(|| a.verified_data().unwrap().len())
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// Packing alone (no file, no checksum verification): the arena built into memory.
#[divan::bench(sample_count = 3, sample_size = 1, args = [1, 2])]
fn full_arena_in_memory(b: Bencher, threads: usize) {
    let src = Random::new();
    let layout = arena_layout(&DitDims::FULL, ArenaDtype::Bfp8B);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    b.bench_local(|| {
        pool.install(|| tt_blackhole::arena::build_arena_bytes(&layout, &src))
            .unwrap()
            .1
            .len()
    });
}
