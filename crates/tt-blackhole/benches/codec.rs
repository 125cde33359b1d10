//! Pack / unpack throughput, in GB/s of f32 input (4 bytes per element), on a 1-thread and a
//! 2-thread rayon pool. Input: 4096 face-ordered tiles (16 MiB of f32) of N(0,1)-like values.

use divan::{Bencher, counter::BytesCount};
use tt_blackhole::bfp::{BfpFormat, fast, scalar};

fn main() {
    divan::main();
}

const TILES: usize = 4096;

fn input() -> Vec<f32> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    (0..TILES * 1024)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Sum of uniforms: roughly normal, varied exponents.
            ((s & 0xffff) as f32 + ((s >> 16) & 0xffff) as f32 + ((s >> 32) & 0xffff) as f32)
                / 65536.0
                - 1.5
        })
        .collect()
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

#[divan::bench(args = [1, 2], consts = [8, 4])]
fn pack<const BITS: u32>(b: Bencher, threads: usize) {
    let fmt = if BITS == 8 {
        BfpFormat::Bfp8B
    } else {
        BfpFormat::Bfp4B
    };
    let x = input();
    let mut out = vec![0u8; TILES * fmt.tile_bytes()];
    let p = pool(threads);
    b.counter(BytesCount::new(x.len() * 4))
        .bench_local(|| p.install(|| fast::pack_tiles(fmt, &x, &mut out)));
}

#[divan::bench(args = [1, 2], consts = [8, 4])]
fn unpack<const BITS: u32>(b: Bencher, threads: usize) {
    let fmt = if BITS == 8 {
        BfpFormat::Bfp8B
    } else {
        BfpFormat::Bfp4B
    };
    let x = input();
    let mut packed = vec![0u8; TILES * fmt.tile_bytes()];
    fast::pack_tiles(fmt, &x, &mut packed);
    let mut out = vec![0f32; x.len()];
    let p = pool(threads);
    b.counter(BytesCount::new(x.len() * 4))
        .bench_local(|| p.install(|| fast::unpack_tiles(fmt, &packed, &mut out)));
}

/// The scalar reference on one thread, for scale.
#[divan::bench]
fn pack_scalar_bfp8(b: Bencher) {
    let x = input();
    let mut out = vec![0u8; TILES * 1088];
    b.counter(BytesCount::new(x.len() * 4))
        .bench_local(|| scalar::pack_tiles(BfpFormat::Bfp8B, &x, &mut out));
}
