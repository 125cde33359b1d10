//! The 110-core plan: roles, coverage (every arena tile read exactly once per step, decoded
//! from the runtime args alone), the L1 check and the roofline.

use crate::common;

use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::arena_layout;
use tt_blackhole::dims::{DitDims, WeightKind};
use tt_blackhole::plan::program::{ProgramCores, pack_programs};
use tt_blackhole::plan::roofline::{
    KERNEL_FIDELITY, MathFidelity, SEED_MS_PER_STEP, hoistable_params, roofline,
};
use tt_blackhole::plan::{
    CoreRole, MegakernelPlan, PlanError, WeightClass, block_base, build_plan,
};

fn count_roles(p: &MegakernelPlan) -> [usize; 2] {
    let mut c = [0; 2];
    for core in &p.cores {
        c[match core.role {
            CoreRole::Compute { .. } => 0,
            CoreRole::Phase => 1,
        }] += 1;
    }
    c
}

/// Rebuild, from the compute cores' args only, which arena tiles each step reads (each core's
/// reader streams its own share): every tile exactly once, in agreement with the arena index.
fn check_coverage(dims: &DitDims, dtype: ArenaDtype) {
    let p = build_plan(dims, dtype).unwrap();
    let arena = arena_layout(dims, dtype);
    assert_eq!(p.arena_tiles, arena.total_tiles);
    let (cb, sb) = (p.cross_block_tiles, p.self_block_tiles);
    let mut by_compute = vec![0u8; arena.total_tiles as usize];
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
                let a = |n: &str| core.share(&format!("{label}.{n}")).unwrap() as usize;
                if let CoreRole::Compute { .. } = core.role {
                    let start = base + a("offset_in_block") + a("first_tile");
                    weight_first.get_or_insert(base + a("offset_in_block"));
                    by_compute[start..start + a("n_count") * a("k_count")]
                        .iter_mut()
                        .for_each(|c| *c += 1);
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

    // Inside a weight, the (k, n) tiles a core's args name are exactly its stream range.
    for c in &p.classes {
        let mut seen = vec![0u8; c.split.kt * c.split.nt];
        for core in p
            .cores
            .iter()
            .filter(|c| matches!(c.role, CoreRole::Compute { .. }))
        {
            let a = |n: &str| core.share(&format!("{}.{n}", c.label)).unwrap() as usize;
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
    // Every role is one the device programs give a kernel: the 96 matmul cores and the 14 cores
    // their programs' other phases run on (column 0 and the last four of row 9).
    assert_eq!(count_roles(&p), [96, 14]);
    let phase: Vec<_> = p
        .cores
        .iter()
        .filter(|c| c.role == CoreRole::Phase)
        .map(|c| (c.x, c.y))
        .collect();
    assert!(
        phase.iter().all(|&(x, y)| x == 0 || (y == 9 && x >= 7)),
        "{phase:?}"
    );
    // ... which is where the packer puts them on a p150a: every LayerNorm, attention and end
    // core of a full-size step is a phase core, every matmul core a compute core.
    let role = |xy: (usize, usize)| p.cores.iter().find(|c| (c.x, c.y) == xy).unwrap().role;
    for prog in p.step_programs([11, 10]).unwrap() {
        for s in &prog.steps {
            assert!(
                s.matmul
                    .iter()
                    .all(|c| matches!(role(*c), CoreRole::Compute { .. }))
            );
            assert!(
                s.before
                    .iter()
                    .chain(&s.end)
                    .all(|c| role(*c) == CoreRole::Phase)
            );
        }
    }
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
    // As the device path runs it: the AdaLN (32 x 1536 x 3072 params, 147,456 tiles of 1088 B)
    // once per timestep and device too: 882,376,704 B per step, 1723.4 us; per chunk 4 x that
    // plus the K/V once.
    assert_eq!(r.ada_bytes, 160_432_128);
    assert_eq!(r.weight_bytes_per_step_as_run, 882_376_704);
    assert!(
        (r.dram_bound_us_per_step_as_run - 1723.39).abs() < 0.1,
        "{}",
        r.dram_bound_us_per_step_as_run
    );
    assert!(
        (r.bound_ms_per_chunk_as_run - (4.0 * 1723.39 + 208.90) / 1e3).abs() < 1e-3,
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

/// Every program's LayerNorm, attention and end phases run on their group's cores: on the grid,
/// none a matmul core of the program, no core in two groups, every phase's cores its group's.
/// Answers how many cores the groups took.
fn group_cores(grid: [usize; 2], p: &ProgramCores) -> usize {
    let matmul: std::collections::HashSet<_> = p
        .steps
        .iter()
        .flat_map(|s| s.matmul.iter().copied())
        .collect();
    let mut owner = std::collections::HashMap::new();
    for (name, cores) in &p.groups {
        for c in cores {
            assert!(c.0 < grid[0] && c.1 < grid[1], "{c:?} is off the grid");
            assert!(!matmul.contains(c), "{c:?} is a matmul core: {p:?}");
            assert!(
                owner.insert(*c, name).is_none(),
                "{c:?} is in two groups: {p:?}"
            );
        }
    }
    for s in &p.steps {
        assert!(!s.end.is_empty(), "an end without cores: {p:?}");
        for c in s.before.iter().chain(&s.end) {
            assert!(owner.contains_key(c), "{c:?} is in no group: {p:?}");
        }
    }
    owner.len()
}

/// The programs of one denoising step, packed from the dimensions by the same code the device
/// backend packs its graphs with (`plan::program`). The simulator's grid is 13 × 10, a
/// p150a's 11 × 10.
#[test]
fn step_programs_of_the_tiny_and_the_full_size_dit() {
    let groups = |p: &ProgramCores| -> Vec<(String, usize)> {
        p.groups.iter().map(|(k, c)| (k.clone(), c.len())).collect()
    };
    let g = |k: &str, n: usize| (k.to_string(), n);
    // The tiny config (8 blocks, D = 40): its 32 steps are one program on either grid, in 8
    // groups: the Q, K and V ends on 3 cores, every other on one. (The AdaLN matmuls are the
    // timestep's, one program of their own: `timestep_needs`.)
    let tiny = build_plan(&common::tiny_dims(), ArenaDtype::Bfp8B).unwrap();
    assert_eq!(tiny.step_needs().len(), 4 * 8);
    for grid in [[13, 10], [11, 10]] {
        let p = tiny.step_programs(grid).unwrap();
        assert_eq!(p.len(), 1, "{grid:?}");
        assert_eq!(p[0].groups.len(), 8);
        assert_eq!(group_cores(grid, &p[0]), 3 + 7);
    }

    // One full-size cross block: one program on either grid, its 6 groups sharing the cores the
    // 96 matmul cores leave: 34 on the simulator's grid (each group as many as its phases can
    // use), 14 on a p150a's.
    let one = build_plan(
        &DitDims {
            num_layers: 1,
            ..DitDims::FULL
        },
        ArenaDtype::Bfp8B,
    )
    .unwrap();
    let p = one.step_programs([13, 10]).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].steps.len(), 4);
    assert_eq!(
        groups(&p[0]),
        [
            g("ln_ada", 2),
            g("finish/bf16", 5),
            g("attention/text", 8),
            g("finish_residual/f32", 6),
            g("ln_plain", 2),
            g("finish_gelu/bf16", 11),
        ]
    );
    assert!(p[0].steps.iter().all(|s| s.matmul.len() == 96));
    let p = one.step_programs([11, 10]).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(group_cores([11, 10], &p[0]), 14);

    // All 32 blocks: the 128 steps are ONE program on either grid (the runtime args of the
    // compute kernels and the task tables of the others hold them), in 8 groups: on a p150a
    // 14 cores for them all (it was 114 programs while every phase had cores of its own).
    let full = build_plan(&DitDims::FULL, ArenaDtype::Bfp8B).unwrap();
    assert_eq!(full.step_needs().len(), 4 * 32);
    for grid in [[13, 10], [11, 10]] {
        let p = full.step_programs(grid).unwrap();
        assert_eq!(p.len(), 1, "{grid:?}");
        assert_eq!(p[0].steps.len(), 128);
        assert_eq!(p[0].groups.len(), 8);
        assert!(group_cores(grid, &p[0]) <= 34);
        // A timestep's AdaLN matmuls and their ends: one program of their own.
        let t = pack_programs(grid, &full.timestep_needs(), true).unwrap();
        assert_eq!((t.len(), t[0].steps.len()), (1, 1), "{grid:?}");
    }
    assert_eq!(
        groups(&full.step_programs([11, 10]).unwrap()[0]),
        [
            g("ln_ada", 1),
            g("finish/bf16", 3),
            g("attention/text", 1),
            g("finish_residual/f32", 2),
            g("ln_plain", 1),
            g("finish_gelu/bf16", 3),
            g("attention/self", 2),
            g("attention/image", 1),
        ]
    );
}
