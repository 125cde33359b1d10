//! Which cores each phase of a device program takes, and which steps share a program: the one
//! place the device backend's programs get their cores from (the worker runs them as given).
//!
//! A denoising step is a line of *steps*, each a matmul and its end (the K pieces summed, the
//! bias, GELU or the residual add), with the LayerNorm or attention that makes the matmul's
//! input before it when there is one. Consecutive steps run as ONE program, a *chain*, while
//! they fit: a chain is a line of phases (before → matmul → end → before → …), each waiting for
//! the whole of the one before it (semaphores on the device).
//!
//! * The matmuls run on the plan's compute cores ([`super::compute_coord`] of their units):
//!   every job of the chain, in turn, on the same cores.
//! * Every other phase takes cores of its own for the whole program, from the grid's last row
//!   backwards, none a matmul's ([`phase_pool`]): at most [`ROW_CORES`] for a LayerNorm or the
//!   attention, [`END_CORES`] for an end (units of up to [`FINISH_UNIT_TILES`] output tiles).
//! * No core's runtime args may pass [`MAX_ARGS`] words (tt-metal's limit per kernel per core).
//!
//! [`pack_programs`] packs a step line greedily; [`chain_cores`] says whether (and how) a run of
//! steps fits one program. `MegakernelPlan::step_programs` applies it to the whole DiT step
//! from the dimensions alone, so the count at full size is computed by the same code the device
//! path runs.

use serde::{Deserialize, Serialize};

/// A core in tt-metal logical coordinates `(x, y)`.
pub type Core = (usize, usize);

/// tt-metal's limit of runtime-arg words per kernel per core.
pub const MAX_ARGS: usize = 341;
/// Cores a LayerNorm or the attention shares its work over.
pub const ROW_CORES: usize = 8;
/// Cores a matmul's end deals its units over (a core does several in turn), so that a chain of
/// steps leaves cores for the phases after it.
pub const END_CORES: usize = 16;
/// Output tiles per unit of a matmul's end (bounds the bias a core holds in L1).
pub const FINISH_UNIT_TILES: usize = 16;

/// The phase that makes a step's matmul input, run in the same program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Before {
    /// A LayerNorm (plain or with the AdaLN modulation) over `row_tiles` tile rows: a core per
    /// run of rows.
    Rows {
        /// Tile rows of the normalised tensor.
        row_tiles: usize,
    },
    /// Attention per head: a core per run of heads whose columns start on a tile boundary.
    Attention {
        /// Attention heads.
        heads: usize,
        /// Columns per head.
        head_dim: usize,
    },
}

impl Before {
    /// The most cores the phase can use (its work does not divide further).
    pub fn most_cores(&self) -> usize {
        match *self {
            Before::Rows { row_tiles } => row_tiles,
            Before::Attention { heads, head_dim } => head_starts(heads, head_dim).len(),
        }
    }
}

/// The heads a run of heads may start at: those whose columns start on a tile boundary (a core
/// owns whole output tiles), so also the most cores attention can use.
pub fn head_starts(heads: usize, head_dim: usize) -> Vec<usize> {
    (0..heads)
        .filter(|g| (g * head_dim).is_multiple_of(32))
        .collect()
}

/// One step of a line, as far as its cores go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepNeed {
    /// The LayerNorm or attention before the matmul, in the same program.
    pub before: Option<Before>,
    /// Each independent matmul job's cores, one per work unit (a core may hold units of
    /// several jobs).
    pub matmul_jobs: Vec<Vec<Core>>,
    /// Each job's output `(mt, nt)` in tiles, what its end covers.
    pub end_jobs: Vec<(usize, usize)>,
}

/// The end's units for `end_jobs` when cut for `n_grid` cores: up to [`FINISH_UNIT_TILES`]
/// columns of one tile row each, a row cut into no more pieces than `n_grid` cores share.
pub fn finish_units(end_jobs: &[(usize, usize)], n_grid: usize) -> usize {
    end_jobs
        .iter()
        .map(|&(mt, nt)| {
            let per_row = nt
                .div_ceil(FINISH_UNIT_TILES.min(nt).max(1))
                .min((n_grid / mt.max(1)).max(1));
            let cw = nt.div_ceil(per_row.max(1));
            mt * nt.div_ceil(cw.max(1))
        })
        .sum()
}

/// The cores of one step's three phases in a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCores {
    /// The LayerNorm's or attention's cores (empty without one).
    pub before: Vec<Core>,
    /// The matmul cores, sorted.
    pub matmul: Vec<Core>,
    /// The end's cores, in the order its units are dealt to them.
    pub end: Vec<Core>,
    /// The cores the end's units were cut for ([`finish_units`]): [`END_CORES`], or fewer when
    /// fewer were free.
    pub end_cut: usize,
}

/// One program: a run of consecutive steps and their cores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCores {
    /// Index of its first step in the line.
    pub first_step: usize,
    /// Its steps' cores, in order.
    pub steps: Vec<StepCores>,
}

/// A step that does not fit even a program of its own.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error(
    "step {step} does not fit one program on a {gx}x{gy} grid: its phases want more cores than \
     the {free} the matmuls leave, or a core more than {MAX_ARGS} runtime-arg words",
    gx = grid[0], gy = grid[1]
)]
pub struct ProgramError {
    /// Index of the step in the line.
    pub step: usize,
    /// The grid it was packed for.
    pub grid: [usize; 2],
    /// Cores the step's matmuls leave free.
    pub free: usize,
}

/// The cores not running a matmul of `steps`, from the grid's last row backwards: where the
/// other phases of their program go.
pub fn phase_pool(grid: [usize; 2], steps: &[StepNeed]) -> Vec<Core> {
    let mm: std::collections::BTreeSet<Core> = steps
        .iter()
        .flat_map(|s| s.matmul_jobs.iter().flatten().copied())
        .collect();
    (0..grid[1])
        .rev()
        .flat_map(|y| (0..grid[0]).rev().map(move |x| (x, y)))
        .filter(|c| !mm.contains(c))
        .collect()
}

/// The cores of `steps` run as one program on `grid`, or `None` when they do not fit.
///
/// A phase gets the cores it wants (a LayerNorm or the attention as many as its work divides
/// into, up to [`ROW_CORES`]; an end [`END_CORES`] or fewer when it has fewer units). Only the
/// first step's phases make do with fewer when fewer are free, so that a step always fits a
/// program of its own while a core per phase is free (a p150a's 11 × 10 grid leaves 14 beside
/// the 96 matmul cores); a step that joins a chain must not slow its phases down.
pub fn chain_cores(grid: [usize; 2], steps: &[StepNeed]) -> Option<Vec<StepCores>> {
    let pool = phase_pool(grid, steps);
    let taken = std::cell::Cell::new(0);
    let take = |want: usize, may_shrink: bool| -> Option<Vec<Core>> {
        let (from, left) = (taken.get(), pool.len() - taken.get());
        let n = if may_shrink { want.min(left) } else { want };
        if n == 0 || n > left {
            return None;
        }
        taken.set(from + n);
        Some(pool[from..from + n].to_vec())
    };
    let mut out = Vec::with_capacity(steps.len());
    let mut jobs_per_core = std::collections::BTreeMap::<Core, usize>::new();
    let mut end_units = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        let before = match &s.before {
            Some(b) => take(ROW_CORES.min(b.most_cores()), i == 0)?,
            None => Vec::new(),
        };
        for c in s.matmul_jobs.iter().flatten() {
            *jobs_per_core.entry(*c).or_default() += 1;
        }
        let mut matmul: Vec<Core> = s.matmul_jobs.iter().flatten().copied().collect();
        matmul.sort_unstable();
        matmul.dedup();
        // The units are cut for the cores the end may have, then it takes one per unit.
        let end_cut = if i == 0 {
            END_CORES.min(pool.len() - taken.get()).max(1)
        } else {
            END_CORES
        };
        let units = finish_units(&s.end_jobs, end_cut);
        let end = take(units.min(end_cut), false)?;
        end_units.push(units.div_ceil(end.len()));
        out.push(StepCores {
            before,
            matmul,
            end,
            end_cut,
        });
    }
    (longest_args(steps, &out, &jobs_per_core, &end_units) <= MAX_ARGS).then_some(out)
}

/// The longest runtime args any kernel of the chain takes on one core, in words (the worker's
/// layouts: `ttnn_worker.py`). Each phase's writer signals every core of the next phase.
fn longest_args(
    steps: &[StepNeed],
    cores: &[StepCores],
    jobs_per_core: &std::collections::BTreeMap<Core, usize>,
    end_units: &[usize],
) -> usize {
    // The line of phases: (its cores, its reader's words, its writer's words but the signals:
    // 2 more per core of the next phase). A reader's words bound its compute kernel's too.
    let mut line: Vec<(usize, usize, usize)> = Vec::new();
    let mut matmul_signals = std::collections::BTreeMap::<Core, usize>::new();
    for ((s, c), units) in steps.iter().zip(cores).zip(end_units) {
        if let Some(b) = &s.before {
            // rows: reader 11, writer 4; attention: reader 14, writer 10.
            let (reader, writer) = match b {
                Before::Rows { .. } => (11, 4),
                Before::Attention { .. } => (14, 10),
            };
            line.push((c.before.len(), reader, writer));
        }
        // The matmul phase: counted per core below.
        line.push((c.matmul.len(), 0, 0));
        for m in &c.matmul {
            *matmul_signals.entry(*m).or_default() += c.end.len();
        }
        // An end core: reader 2 words then 9 a unit, compute 1 then 2, writer 2 then 3.
        line.push((c.end.len(), 2 + 9 * units, 2 + 3 * units));
    }
    let mut longest = 0;
    for (i, &(_, reader, writer)) in line.iter().enumerate() {
        if reader > 0 {
            let next = line.get(i + 1).map_or(0, |p| p.0);
            longest = longest.max(reader).max(writer + 2 * next);
        }
    }
    // A matmul core: reader 4 words then 5 a job; compute 3 then 2; writer 1 then 4 a job and one
    // for each core it signals after its last job of a phase (that phase's end cores).
    for (core, jobs) in jobs_per_core {
        let signals = matmul_signals.get(core).copied().unwrap_or(0);
        longest = longest.max(4 + 5 * jobs).max(1 + 4 * jobs + signals);
    }
    longest
}

/// `steps` packed into programs greedily: a step joins the program before it while the two fit
/// one ([`chain_cores`]); with `chain` false every step is a program of its own.
pub fn pack_programs(
    grid: [usize; 2],
    steps: &[StepNeed],
    chain: bool,
) -> Result<Vec<ProgramCores>, ProgramError> {
    let mut programs: Vec<ProgramCores> = Vec::new();
    for (i, _) in steps.iter().enumerate() {
        if chain
            && let Some(p) = programs.last_mut()
            && let Some(cores) = chain_cores(grid, &steps[p.first_step..=i])
        {
            p.steps = cores;
            continue;
        }
        let cores = chain_cores(grid, &steps[i..=i]).ok_or_else(|| ProgramError {
            step: i,
            grid,
            free: phase_pool(grid, &steps[i..=i]).len(),
        })?;
        programs.push(ProgramCores {
            first_step: i,
            steps: cores,
        });
    }
    Ok(programs)
}

impl super::MegakernelPlan {
    /// One denoising step's line as the device backend builds it (`gr00t-runtime`'s
    /// `step_graph`): every block's AdaLN in one step; then per block the AdaLN LayerNorm with
    /// Q (with K and V in a self block), the attention with the output projection and its
    /// residual, the plain LayerNorm with FF-up and its GELU, FF-down and its residual. The cross
    /// blocks' K and V are the observation's, computed before the steps.
    pub fn step_needs(&self) -> Vec<StepNeed> {
        use crate::dims::{DitDims, WeightKind};
        let d = &self.dims;
        let mt = d.sa_tokens.div_ceil(32);
        let job = |block: usize, kind: WeightKind| -> Vec<Core> {
            self.class(block, kind)
                .split
                .units
                .iter()
                .map(|u| super::compute_coord(u.core))
                .collect()
        };
        let nt = |block: usize, kind: WeightKind| self.class(block, kind).split.nt;
        let step = |before, block: usize, kinds: &[WeightKind], m_tiles: usize| StepNeed {
            before,
            matmul_jobs: kinds.iter().map(|k| job(block, *k)).collect(),
            end_jobs: kinds.iter().map(|k| (m_tiles, nt(block, *k))).collect(),
        };
        let mut line = vec![StepNeed {
            before: None,
            matmul_jobs: (0..d.num_layers)
                .map(|b| job(b, WeightKind::AdaNorm))
                .collect(),
            end_jobs: (0..d.num_layers)
                .map(|b| (1, nt(b, WeightKind::AdaNorm)))
                .collect(),
        }];
        let rows = Some(Before::Rows { row_tiles: mt });
        let attention = Some(Before::Attention {
            heads: d.num_heads,
            head_dim: d.head_dim,
        });
        for b in 0..d.num_layers {
            let qkv: &[WeightKind] = if DitDims::is_cross(b) {
                &[WeightKind::Q]
            } else {
                &[WeightKind::Q, WeightKind::K, WeightKind::V]
            };
            line.push(step(rows, b, qkv, mt));
            line.push(step(attention, b, &[WeightKind::Out], mt));
            line.push(step(rows, b, &[WeightKind::FfUp], mt));
            line.push(step(None, b, &[WeightKind::FfDown], mt));
        }
        line
    }

    /// The programs of one denoising step on a `grid` of cores ([`pack_programs`] over
    /// [`Self::step_needs`]): what the device backend launches per step.
    pub fn step_programs(&self, grid: [usize; 2]) -> Result<Vec<ProgramCores>, ProgramError> {
        pack_programs(grid, &self.step_needs(), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(before: Option<Before>, mm: &[Core], end: (usize, usize)) -> StepNeed {
        StepNeed {
            before,
            matmul_jobs: vec![mm.to_vec()],
            end_jobs: vec![end],
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
    fn phases_take_cores_from_the_last_row_backwards_none_a_matmuls() {
        let grid = [4, 3];
        let s = [
            step(
                Some(Before::Rows { row_tiles: 2 }),
                &[(0, 0), (1, 0)],
                (2, 2),
            ),
            step(None, &[(1, 0)], (1, 1)),
        ];
        let cores = chain_cores(grid, &s).expect("fits");
        assert_eq!(cores[0].before, vec![(3, 2), (2, 2)]);
        assert_eq!(cores[0].matmul, vec![(0, 0), (1, 0)]);
        assert_eq!(cores[0].end, vec![(1, 2), (0, 2)]);
        assert_eq!(cores[1].end, vec![(3, 1)]);
        assert!(phase_pool(grid, &s).iter().all(|c| c.1 > 0 || c.0 > 1));
    }

    #[test]
    fn packing_splits_where_the_grid_runs_out() {
        // 3x2 grid, one matmul core: 5 free cores; each step takes 1 + 2 of them.
        let grid = [3, 2];
        let s: Vec<_> = (0..3)
            .map(|_| step(Some(Before::Rows { row_tiles: 1 }), &[(0, 0)], (2, 1)))
            .collect();
        let p = pack_programs(grid, &s, true).unwrap();
        assert_eq!(
            p.iter()
                .map(|p| (p.first_step, p.steps.len()))
                .collect::<Vec<_>>(),
            vec![(0, 1), (1, 1), (2, 1)]
        );
        let wide = pack_programs([4, 2], &s, true).unwrap();
        assert_eq!(wide.len(), 2, "7 free cores hold two steps of 3");
        assert_eq!(pack_programs([4, 2], &s, false).unwrap().len(), 3);
        let none = pack_programs([1, 2], &s, true).unwrap_err();
        assert_eq!((none.step, none.free), (0, 1));
        assert!(none.to_string().contains("1x2 grid"), "{none}");
    }

    #[test]
    fn runtime_args_bound_a_chain() {
        // One matmul core taking a job per step: 4 + 5n reader words pass 341 at n = 68.
        let s: Vec<_> = (0..80).map(|_| step(None, &[(0, 0)], (1, 1))).collect();
        let p = pack_programs([100, 2], &s, true).unwrap();
        assert_eq!(
            p[0].steps.len(),
            67,
            "4 + 5 * 67 = 339 words, 68 jobs would be 344"
        );
        assert_eq!(p.len(), 2);
    }
}
