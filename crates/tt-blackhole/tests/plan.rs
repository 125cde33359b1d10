//! The 110-core plan: roles, coverage (every arena tile read exactly once per step, decoded
//! from the runtime args alone), the L1 check and the roofline.

use crate::common;

use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::arena_layout;
use tt_blackhole::dims::{DitDims, WeightKind};
use tt_blackhole::plan::roofline::{
    KERNEL_FIDELITY, MathFidelity, SEED_MS_PER_STEP, hoistable_params, roofline,
};
use tt_blackhole::plan::{
    CoreRole, MegakernelPlan, PlanError, WeightClass, block_base, build_plan,
};

fn count_roles(p: &MegakernelPlan) -> [usize; 6] {
    let mut c = [0; 6];
    for core in &p.cores {
        c[match core.role {
            CoreRole::DramReader { .. } => 0,
            CoreRole::Compute { .. } => 1,
            CoreRole::Sequencer => 2,
            CoreRole::NormReducer => 3,
            CoreRole::OutputGather { .. } => 4,
            CoreRole::Spare => 5,
        }] += 1;
    }
    c
}

/// Rebuild, from the compute cores' runtime args only, which arena tiles each step reads; and
/// separately from the readers' args. Both must hit every tile exactly once, and agree with the
/// arena index.
fn check_coverage(dims: &DitDims, dtype: ArenaDtype) {
    let p = build_plan(dims, dtype).unwrap();
    let arena = arena_layout(dims, dtype);
    assert_eq!(p.arena_tiles, arena.total_tiles);
    let (cb, sb) = (p.cross_block_tiles, p.self_block_tiles);
    let mut by_compute = vec![0u8; arena.total_tiles as usize];
    let mut by_reader = vec![0u8; arena.total_tiles as usize];
    for block in 0..dims.num_layers {
        let base = block_base(block, cb, sb);
        assert_eq!(
            base as u64,
            arena.entry(block, WeightKind::AdaNorm).unwrap().first_tile,
            "block {block} base"
        );
        for kind in WeightKind::STREAM_ORDER {
            let label = WeightClass::of(block, kind).label();
            let e = arena.entry(block, kind).unwrap();
            let mut weight_first = None;
            for core in &p.cores {
                let a = |n: &str| core.arg(&format!("{label}.{n}")).unwrap() as usize;
                match core.role {
                    CoreRole::Compute { .. } => {
                        let start = base + a("offset_in_block") + a("first_tile");
                        weight_first.get_or_insert(base + a("offset_in_block"));
                        by_compute[start..start + a("n_count") * a("k_count")]
                            .iter_mut()
                            .for_each(|c| *c += 1);
                    }
                    CoreRole::DramReader { .. } => {
                        let start = base + a("offset_in_block") + a("tile_start");
                        by_reader[start..start + a("tile_count")]
                            .iter_mut()
                            .for_each(|c| *c += 1);
                    }
                    _ => {}
                }
            }
            assert_eq!(weight_first.unwrap() as u64, e.first_tile, "{}", e.name);
        }
    }
    assert!(
        by_compute.iter().all(|&c| c == 1),
        "compute args: some tile read {} times",
        by_compute.iter().max().unwrap()
    );
    assert!(
        by_reader.iter().all(|&c| c == 1),
        "reader args: some tile read {} times",
        by_reader.iter().max().unwrap()
    );

    // Inside a weight, the (k, n) tiles a core's args name are exactly its stream range.
    for c in &p.classes {
        let mut seen = vec![0u8; c.split.kt * c.split.nt];
        for core in p
            .cores
            .iter()
            .filter(|c| matches!(c.role, CoreRole::Compute { .. }))
        {
            let a = |n: &str| core.arg(&format!("{}.{n}", c.label)).unwrap() as usize;
            for n in a("n_start")..a("n_start") + a("n_count") {
                for k in a("k_start")..a("k_start") + a("k_count") {
                    seen[k * c.split.nt + n] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "{}: (k, n) coverage", c.label);
    }
}

#[test]
fn full_size_plan_roles_and_coverage() {
    let p = build_plan(&DitDims::FULL, ArenaDtype::Bfp8B).unwrap();
    assert_eq!(p.cores.len(), 110);
    assert_eq!(count_roles(&p), [8, 96, 1, 1, 2, 2]);
    let mut coords: Vec<_> = p.cores.iter().map(|c| (c.x, c.y)).collect();
    coords.sort();
    coords.dedup();
    assert_eq!(coords.len(), 110);
    assert!(
        p.cores
            .iter()
            .all(|c| c.x < 11 && c.y < 10 && c.l1_bytes <= p.l1_budget)
    );
    assert_eq!(p.l1_budget, 1536 * 1024 - 64 * 1024);
    for dtype in [ArenaDtype::Bfp8B, ArenaDtype::Bfp4B, ArenaDtype::Bf16] {
        check_coverage(&DitDims::FULL, dtype);
    }
    // The JSON form round-trips.
    let back: MegakernelPlan = serde_json::from_str(&p.to_json()).unwrap();
    assert_eq!(back, p);
}

#[test]
fn tiny_and_odd_plans_cover() {
    check_coverage(&common::tiny_dims(), ArenaDtype::Bfp8B);
    let odd = DitDims {
        num_layers: 3,
        num_heads: 5,
        head_dim: 24,
        cross_dim: 100,
        ff_inner: 480,
        sa_tokens: 17,
        ctx_tokens: 33,
    };
    check_coverage(&odd, ArenaDtype::Bfp4B);
}

#[test]
fn l1_overflow_is_a_clear_error() {
    // A 4096-token context makes the cross K/V activation buffers far larger than L1.
    let big = DitDims {
        ctx_tokens: 4096,
        ..DitDims::FULL
    };
    let e = build_plan(&big, ArenaDtype::Bfp8B).unwrap_err();
    assert!(matches!(e, PlanError::L1Overflow { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("budget is 1507328 B") && msg.contains("Compute"),
        "{msg}"
    );
    let e = build_plan(
        &DitDims {
            num_heads: 200,
            head_dim: 8,
            ..DitDims::FULL
        },
        ArenaDtype::Bfp8B,
    )
    .unwrap_err();
    assert_eq!(e, PlanError::TooManyHeads(200, 96));
}

#[test]
fn full_size_roofline() {
    let p = build_plan(&DitDims::FULL, ArenaDtype::Bfp8B).unwrap();
    let r = roofline(&p);
    assert_eq!(r.weight_bytes_per_step, 1_149_763_584);
    // 1.1498 GB / 512 GB/s = 2245.6 us per step.
    assert!(
        (r.dram_bound_us_per_step - 2245.63).abs() < 0.1,
        "{}",
        r.dram_bound_us_per_step
    );
    assert_eq!(r.bound, "dram");
    // The compute bound at the fidelity our matmul kernel runs (HiFi4: 4 passes), not the
    // HiFi2 that tt-metal pairs with bfp8_b: 143.3 GFLOP at 132.7 TFLOP/s.
    assert_eq!(r.fidelity, KERNEL_FIDELITY);
    assert_eq!(r.fidelity, MathFidelity::HiFi4);
    assert_eq!(r.paired_fidelity, MathFidelity::HiFi2);
    assert!(
        (r.compute_bound_us_per_step - 2.0 * r.compute_bound_us_per_step_paired).abs() < 1e-6,
        "{r:?}"
    );
    assert!(
        (r.compute_bound_us_per_step - 1080.1).abs() < 0.5,
        "{}",
        r.compute_bound_us_per_step
    );
    assert!(r.compute_bound_us_per_step < r.dram_bound_us_per_step);
    // Cross K/V: 16 blocks x 2 x 1536 x 2048 params in 1088-byte bfp8_b tiles = 106,954,752 B;
    // without them 1,042,808,832 B per step, 2036.7 us.
    assert_eq!(r.cross_kv_bytes, 106_954_752);
    assert_eq!(r.weight_bytes_per_step_kv_hoisted, 1_042_808_832);
    assert!(
        (r.dram_bound_us_per_step_kv_hoisted - 2036.74).abs() < 0.1,
        "{}",
        r.dram_bound_us_per_step_kv_hoisted
    );
    // Per chunk: 4 x 2245.6 us streamed; hoisted, 4 x 2036.7 + 208.9 (the K/V once).
    assert!((r.bound_ms_per_chunk - 8.9825).abs() < 1e-3, "{r:?}");
    assert!(
        (r.bound_ms_per_chunk_kv_hoisted - (4.0 * 2036.74 + 208.90) / 1e3).abs() < 1e-3,
        "{r:?}"
    );
    assert_eq!(r.seed_ms_per_step, SEED_MS_PER_STEP);
    assert!(r.l1.iter().all(|u| u.max_fraction <= 1.0));
    let r4 = roofline(&build_plan(&DitDims::FULL, ArenaDtype::Bfp4B).unwrap());
    assert!(r4.dram_bound_us_per_step < r.dram_bound_us_per_step * 0.55);
    let (kv, ada) = hoistable_params(&DitDims::FULL);
    assert_eq!((kv, ada), (16 * 2 * 1536 * 2048, 32 * 3072 * 1536));
    for dtype in [ArenaDtype::Bfp8B, ArenaDtype::Bfp4B, ArenaDtype::Bf16] {
        println!(
            "{}",
            roofline(&build_plan(&DitDims::FULL, dtype).unwrap()).report()
        );
    }
}
