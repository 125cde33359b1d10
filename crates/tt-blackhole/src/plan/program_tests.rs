//! The packer's rules on small made-up lines.

use super::*;

fn step(before: Option<Before>, mm: &[Core], end: (usize, usize)) -> StepNeed {
    StepNeed {
        before: before.map(|b| {
            let k = match b {
                Before::Rows { .. } => "ln",
                Before::Attention { .. } => "attention",
            };
            (b, k.to_string())
        }),
        matmul_jobs: vec![mm.to_vec()],
        end_jobs: vec![end],
        end_kernels: end_kernels("finish", false),
    }
}

#[test]
fn units_of_an_end_follow_the_finish_layout() {
    // 2 tile rows of 48 columns, 16 cores: 3 units of 16 columns a row.
    assert_eq!(finish_units(&[(2, 48)], 16), 6);
    // One tile row of 8 columns: one unit.
    assert_eq!(finish_units(&[(1, 8)], 16), 1);
    // 4 rows, 96 columns on 16 cores: a row in at most 4 pieces of 24.
    assert_eq!(finish_units(&[(4, 96)], 16), 16);
    // Jobs add up.
    assert_eq!(finish_units(&[(2, 48), (1, 8)], 16), 7);
    assert_eq!(head_starts(32, 48), (0..32).step_by(2).collect::<Vec<_>>());
}

#[test]
fn phases_with_the_same_kernels_share_cores_none_a_matmuls() {
    let grid = [4, 3];
    let s = [
        step(
            Some(Before::Rows { row_tiles: 2 }),
            &[(0, 0), (1, 0)],
            (2, 2),
        ),
        step(None, &[(1, 0)], (1, 1)),
        step(Some(Before::Rows { row_tiles: 1 }), &[(0, 0)], (1, 3)),
    ];
    let (cores, groups) = chain_cores(grid, &s).expect("fits");
    // Two groups (the LayerNorms, the ends) on the 10 free cores from the last row backwards:
    // a core each, then by work a core (the ends' 4 units against the LayerNorms' 3 rows), up
    // to what their phases can use (2 rows, 2 units).
    assert_eq!(
        groups,
        vec![
            ("ln".to_string(), vec![(3, 2), (2, 2)]),
            (end_kernels("finish", false), vec![(1, 2), (0, 2)]),
        ]
    );
    assert_eq!(cores[0].before, vec![(3, 2), (2, 2)]);
    assert_eq!(cores[0].matmul, vec![(0, 0), (1, 0)]);
    assert_eq!(cores[0].end, vec![(1, 2), (0, 2)]);
    // The later phases take the first of their group's cores: one row, one unit.
    assert_eq!(cores[1].end, vec![(1, 2)]);
    assert_eq!(cores[2].before, vec![(3, 2)]);
    assert_eq!(cores[2].end, vec![(1, 2)]);
    assert!(cores.iter().all(|c| c.end_cut == 2));
    assert!(phase_pool(grid, &s).iter().all(|c| c.1 > 0 || c.0 > 1));
}

#[test]
fn packing_splits_where_the_grid_runs_out_of_a_core_a_group() {
    // 2x1 grid, one matmul core: one free core; a step with a LayerNorm has two groups.
    let grid = [2, 1];
    let s: Vec<_> = (0..3)
        .map(|_| step(Some(Before::Rows { row_tiles: 1 }), &[(0, 0)], (2, 1)))
        .collect();
    let none = pack_programs(grid, &s, true).unwrap_err();
    assert_eq!((none.step, none.free), (0, 1));
    assert!(none.to_string().contains("2x1 grid"), "{none}");
    // Two free cores hold the whole line, whatever its length: every LayerNorm on one, every
    // end on the other.
    let p = pack_programs([3, 1], &s, true).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].groups.len(), 2);
    assert_eq!(pack_programs([3, 1], &s, false).unwrap().len(), 3);
}

#[test]
fn compute_args_and_task_tables_bound_a_chain() {
    // One matmul core taking a job per step: its compute kernel's 3 + n words pass 341 at
    // n = 339, long before its reader's table (4 + 5n words) passes 4096.
    let s: Vec<_> = (0..400).map(|_| step(None, &[(0, 0)], (1, 1))).collect();
    let p = pack_programs([2, 1], &s, true).unwrap();
    assert_eq!(p[0].steps.len(), 338, "3 + 338 = 341 words");
    assert_eq!(p.len(), 2);
}
