//! CPU backend hot paths: the tiny-config forward (golden case 1), the GEMM on the full-size
//! layer shapes (bf16 and f32 weights), and the machine's f32 FMA peak for comparison.
//! Counters are FLOPs, so divan's item throughput reads as FLOP/s.

use divan::Bencher;
use divan::counter::ItemsCount;
use gr00t_runtime::cpu::gemm::{PackedMat, matmul};
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::policy::ModelInputs;
use gr00t_runtime::weights::Data;
use half::bf16;
use safetensors::SafeTensors;
use std::path::PathBuf;

fn main() {
    divan::main();
}

fn case_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/golden/gr00t-n16-tiny/case1"
    ))
}

fn f32s(st: &SafeTensors<'_>, name: &str) -> Vec<f32> {
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
fn i64s(st: &SafeTensors<'_>, name: &str) -> Vec<i64> {
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn golden_inputs() -> ModelInputs {
    let taps = std::fs::read(case_dir().join("taps.safetensors")).unwrap();
    let taps = SafeTensors::deserialize(&taps).unwrap();
    let obs = std::fs::read(case_dir().join("observation.safetensors")).unwrap();
    let obs = SafeTensors::deserialize(&obs).unwrap();
    ModelInputs {
        input_ids: i64s(&taps, "input.input_ids")
            .into_iter()
            .map(|v| v as u32)
            .collect(),
        pixel_values: vec![f32s(&taps, "input.pixel_values")],
        image_hw: (252, 252),
        state: f32s(&taps, "input.state"),
        embodiment_id: i64s(&taps, "input.embodiment_id")[0] as usize,
        noise: f32s(&obs, "noise"),
    }
}

/// Whole tiny forward: SigLIP2 (2 layers, 324 tokens) + Qwen3 (2 layers, 115 tokens) + 4 Euler
/// steps of the 8-block DiT. PyTorch f32 on this machine class: 110–160 ms.
#[divan::bench(sample_count = 30)]
fn tiny_forward(b: Bencher) {
    let model = Gr00tModel::load(&case_dir()).unwrap();
    let inputs = golden_inputs();
    b.bench_local(|| model.forward(&inputs, &mut Taps::none()).unwrap());
}

/// (m, k, n) of full-size GEMMs: SigLIP2 fc1 and q, Qwen3 gate/up, DiT ff1 and to_q. The short
/// ones (~1 ms) are the fairest against the FMA loop on a shared, loaded machine.
const SHAPES: [(usize, usize, usize); 5] = [
    (324, 1152, 4304),
    (324, 1152, 1152),
    (116, 2048, 6144),
    (51, 1536, 6144),
    (51, 1536, 1536),
];

fn gemm_case(b: Bencher, (m, k, n): (usize, usize, usize), as_bf16: bool) {
    let x: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let w: Vec<f32> = (0..n * k)
        .map(|i| ((i * 11 % 17) as f32 - 8.0) / 64.0)
        .collect();
    let wb: Vec<bf16> = w.iter().map(|&v| bf16::from_f32(v)).collect();
    let packed = if as_bf16 {
        PackedMat::from_out_in(Data::Bf16(&wb), n, k)
    } else {
        PackedMat::from_out_in(Data::F32(&w), n, k)
    };
    let mut y = vec![0.0f32; m * n];
    b.counter(ItemsCount::new(2 * m * n * k))
        .bench_local(|| matmul(&x, m, &packed.view(), None, &mut y));
}

#[divan::bench(args = SHAPES, sample_count = 20)]
fn gemm_bf16_weights(b: Bencher, shape: (usize, usize, usize)) {
    gemm_case(b, shape, true);
}

#[divan::bench(args = SHAPES, sample_count = 20)]
fn gemm_f32_weights(b: Bencher, shape: (usize, usize, usize)) {
    gemm_case(b, shape, false);
}

/// Pure-FMA loop (16 independent 512-bit chains): the f32 peak the GEMM is judged against.
#[divan::bench(args = [1, 2], sample_count = 20)]
fn fma_peak_threads(b: Bencher, threads: usize) {
    const ITERS: usize = 1 << 20;
    let flops_per_thread = ITERS * 16 * 16 * 2;
    b.counter(ItemsCount::new(flops_per_thread * threads))
        .bench_local(|| {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| peak::run(ITERS))).collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<f32>()
            })
        });
}

mod peak {
    pub fn run(iters: usize) -> f32 {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F is present.
            return unsafe { fma512(iters) };
        }
        let mut acc = [[1.0f32; 16]; 16];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                for v in a.iter_mut() {
                    *v = v.mul_add(0.999_999, 1e-7);
                }
            }
        }
        acc.iter().flatten().sum()
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn fma512(iters: usize) -> f32 {
        use std::arch::x86_64::*;
        let m = _mm512_set1_ps(0.999_999);
        let c = _mm512_set1_ps(1e-7);
        let mut acc = [_mm512_set1_ps(1.0); 16];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, m, c);
            }
        }
        let mut s = _mm512_setzero_ps();
        for a in acc {
            s = _mm512_add_ps(s, a);
        }
        _mm512_reduce_add_ps(s)
    }
}
