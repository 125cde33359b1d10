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
//! * Every other phase runs on the cores of its *group*: the phases with the same kernels (the
//!   AdaLN LayerNorms, the plain ones, the attentions, the ends of each kind), whose cores run
//!   one set of kernels for the whole program, each core doing its share of every phase of the
//!   group in turn. The groups share the cores no matmul of the program uses
//!   ([`phase_pool`], from the grid's last row backwards): a core each, then the rest one at a
//!   time to the group with the most work a core, up to what its phases can use ([`ROW_CORES`]
//!   for a LayerNorm or the attention, [`END_CORES`] for an end, in units of up to
//!   [`FINISH_UNIT_TILES`] output tiles). So a program needs a free core per group, not per
//!   phase: a whole full-size step (7 groups) fits the 14 a p150a leaves.
//! * A data-movement kernel reads its work from a task table in DRAM (at most [`TABLE_WORDS`]
//!   words a core), a compute kernel from its runtime args (at most [`MAX_ARGS`], tt-metal's
//!   limit): [`chain_cores`] counts both per core from the worker's layouts.
//!
//! [`pack_programs`] packs a step line greedily; [`chain_cores`] says whether (and how) a run of
//! steps fits one program. `MegakernelPlan::step_programs` applies it to the whole DiT step
//! from the dimensions alone, so the count at full size is computed by the same code the device
//! path runs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A core in tt-metal logical coordinates `(x, y)`.
pub type Core = (usize, usize);

/// tt-metal's limit of runtime-arg words per kernel per core (the compute kernels' args).
pub const MAX_ARGS: usize = 341;
/// The most words a data-movement kernel's task table holds on one core (16 KiB of L1).
pub const TABLE_WORDS: usize = 4096;
/// Cores a LayerNorm or the attention shares its work over.
pub const ROW_CORES: usize = 8;
/// Cores a matmul's end deals its units over (a core does several in turn).
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
    /// The LayerNorm or attention before the matmul, in the same program, and the name of its
    /// kernels (phases with the same kernels share cores).
    pub before: Option<(Before, String)>,
    /// Each independent matmul job's cores, one per work unit (a core may hold units of
    /// several jobs).
    pub matmul_jobs: Vec<Vec<Core>>,
    /// Each job's output `(mt, nt)` in tiles, what its end covers.
    pub end_jobs: Vec<(usize, usize)>,
    /// The name of the end's kernels (with its output format).
    pub end_kernels: String,
}

/// The end's units for `end_jobs` when cut for `n_grid` cores: up to [`FINISH_UNIT_TILES`]
/// columns of one tile row each, a row cut into no more pieces than `n_grid` cores share.
pub fn finish_units(end_jobs: &[(usize, usize)], n_grid: usize) -> usize {
    end_jobs
        .iter()
        .map(|&(mt, nt)| mt * nt.div_ceil(finish_unit_cols(mt, nt, FINISH_UNIT_TILES, n_grid)))
        .sum()
}

/// The columns (tiles) of each unit of a `mt × nt`-tile end cut for `n_grid` cores: at most
/// `unit_tiles`, a row cut into no more pieces than `n_grid` cores share (a row's last unit
/// takes what is left). The lowering cuts the units it lays out with it.
pub fn finish_unit_cols(mt: usize, nt: usize, unit_tiles: usize, n_grid: usize) -> usize {
    let per_row = nt
        .div_ceil(unit_tiles.min(nt).max(1))
        .min((n_grid / mt.max(1)).max(1));
    nt.div_ceil(per_row.max(1)).max(1)
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
    /// The cores the end's units were cut for ([`finish_units`]): its group's, up to
    /// [`END_CORES`].
    pub end_cut: usize,
}

/// A program's phases with the same kernels: their name and the cores that run them.
pub type PhaseGroup = (String, Vec<Core>);

/// One program: a run of consecutive steps and their cores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCores {
    /// Index of its first step in the line.
    pub first_step: usize,
    /// Its steps' cores, in order.
    pub steps: Vec<StepCores>,
    /// Its phase groups, in the order they first appear.
    pub groups: Vec<PhaseGroup>,
}

/// A step that does not fit even a program of its own.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error(
    "step {step} does not fit one program on a {gx}x{gy} grid: its phases want more cores than \
     the {free} the matmuls leave, or a core more than {MAX_ARGS} runtime-arg words or \
     {TABLE_WORDS} task-table words",
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

/// A phase group while its cores are shared out: its kernels, the most cores one of its phases
/// can use, its work (rows, runs of heads or units, summed over its phases), its cores.
struct Group {
    kernels: String,
    want: usize,
    load: usize,
    n: usize,
}

/// The groups of `steps`' LayerNorm, attention and end phases, in order of first appearance.
fn groups_of(steps: &[StepNeed]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut add = |kernels: &str, want: usize, load: usize| match groups
        .iter_mut()
        .find(|g| g.kernels == kernels)
    {
        Some(g) => {
            g.want = g.want.max(want);
            g.load += load;
        }
        None => groups.push(Group {
            kernels: kernels.to_string(),
            want,
            load,
            n: 1,
        }),
    };
    for s in steps {
        if let Some((b, k)) = &s.before {
            let most = b.most_cores().max(1);
            add(k, ROW_CORES.min(most), most);
        }
        let units = finish_units(&s.end_jobs, END_CORES).max(1);
        add(&s.end_kernels, units.min(END_CORES), units);
    }
    groups
}

/// `free` cores shared over `groups`: one each, then one at a time to the group with the most
/// work a core that can still use one. `false` when there are more groups than cores.
fn share_cores(groups: &mut [Group], free: usize) -> bool {
    if groups.len() > free {
        return false;
    }
    for _ in groups.len()..free {
        // The most work a core; on a tie the group that came first.
        let best = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.n < g.want)
            .max_by(|(ia, a), (ib, b)| (a.load * b.n).cmp(&(b.load * a.n)).then(ib.cmp(ia)))
            .map(|(i, _)| i);
        match best {
            Some(i) => groups[i].n += 1,
            None => break,
        }
    }
    true
}

/// The cores of `steps` run as one program on `grid`, and its groups' cores; `None` when they do
/// not fit: more groups than free cores, or a core's compute args past [`MAX_ARGS`] or a task
/// table past [`TABLE_WORDS`].
pub fn chain_cores(
    grid: [usize; 2],
    steps: &[StepNeed],
) -> Option<(Vec<StepCores>, Vec<PhaseGroup>)> {
    let pool = phase_pool(grid, steps);
    let mut groups = groups_of(steps);
    if !share_cores(&mut groups, pool.len()) {
        return None;
    }
    let mut at = 0;
    let groups: Vec<PhaseGroup> = groups
        .into_iter()
        .map(|g| {
            at += g.n;
            (g.kernels, pool[at - g.n..at].to_vec())
        })
        .collect();
    let cores_of = |k: &str| -> &[Core] {
        groups
            .iter()
            .find(|(name, _)| name == k)
            .map_or(&[][..], |(_, c)| c.as_slice())
    };
    let out: Vec<StepCores> = steps
        .iter()
        .map(|s| {
            let before = s.before.as_ref().map_or_else(Vec::new, |(b, k)| {
                let g = cores_of(k);
                g[..g.len().min(ROW_CORES).min(b.most_cores().max(1))].to_vec()
            });
            let mut matmul: Vec<Core> = s.matmul_jobs.iter().flatten().copied().collect();
            matmul.sort_unstable();
            matmul.dedup();
            // The units are cut for the group's cores, then the end takes one per unit.
            let g = cores_of(&s.end_kernels);
            let end_cut = g.len().min(END_CORES);
            let units = finish_units(&s.end_jobs, end_cut);
            StepCores {
                before,
                matmul,
                end: g[..units.min(end_cut)].to_vec(),
                end_cut,
            }
        })
        .collect();
    let (args, table) = chain_words(steps, &out);
    (args <= MAX_ARGS && table <= TABLE_WORDS).then_some((out, groups))
}

/// The words of each kernel on one core: its reader's and writer's task tables, its compute
/// kernel's runtime args.
#[derive(Default, Clone, Copy)]
struct Words {
    reader: usize,
    writer: usize,
    compute: usize,
}

/// The longest compute args and the longest task table any kernel of the chain has on one core,
/// in words (the kernels' layouts, as gr00t-megakernel's `lower_parts.rs` writes them: its
/// tests hold this at least what the lowering writes, so the packer never accepts a chain the
/// lowering refuses). A writer's table names every core of the phase after its own, a word
/// each, after each of its phases. A matmul's end's reader is counted with its stream's word.
pub fn chain_words(steps: &[StepNeed], cores: &[StepCores]) -> (usize, usize) {
    // The line of phases: (its cores, per core its reader, writer and compute words), built
    // below; each phase's writer signals the next phase's cores.
    enum Kind {
        Before(Before),
        Matmul(usize),
        End(usize),
    }
    let mut line: Vec<(Kind, &[Core])> = Vec::new();
    for (i, (s, c)) in steps.iter().zip(cores).enumerate() {
        if let Some((b, _)) = &s.before {
            line.push((Kind::Before(*b), &c.before));
        }
        line.push((Kind::Matmul(i), &c.matmul));
        line.push((Kind::End(i), &c.end));
    }
    let mut words = BTreeMap::<Core, Words>::new();
    for (i, (kind, these)) in line.iter().enumerate() {
        let next = line.get(i + 1).map_or(0, |p| p.1.len());
        let mut add = |core: Core, reader: usize, writer: usize, compute: usize, head: Words| {
            let w = words.entry(core).or_insert(head);
            w.reader += reader;
            w.writer += writer;
            w.compute += compute;
        };
        // A phase core's table and compute args start with their count of tasks (or units).
        let phase_head = Words {
            reader: 1,
            writer: 1,
            compute: 1,
        };
        match kind {
            // rows: reader 11 words a task, writer 4, compute 1; attention: 16, 10, 3 (the
            // layouts gr00t-megakernel's lowering writes: `lower_parts.rs`).
            Kind::Before(Before::Rows { .. }) => {
                for c in *these {
                    add(*c, 11, 4 + next, 1, phase_head);
                }
            }
            Kind::Before(Before::Attention { .. }) => {
                for c in *these {
                    add(*c, 16, 10 + next, 3, phase_head);
                }
            }
            // A matmul core: reader 4 words then 6 a job (its arena's address the sixth),
            // writer 1 then 4 a job, compute 3 then 1 a job; the writer signals the end's cores
            // after its last job of the phase.
            Kind::Matmul(s) => {
                let head = Words {
                    reader: 4,
                    writer: 1,
                    compute: 3,
                };
                for c in steps[*s].matmul_jobs.iter().flatten() {
                    add(*c, 6, 4, 1, head);
                }
                for c in *these {
                    add(*c, 0, next, 0, head);
                }
            }
            // An end core, its units dealt in turn: reader 2 words (count, the CBs' sizes) then
            // 2 a task and 9 a unit, writer 1 then 2 a task and 3 a unit, compute 2 then 1 a
            // unit.
            Kind::End(s) => {
                let n = these.len().max(1);
                let units = finish_units(&steps[*s].end_jobs, cores[*s].end_cut);
                let head = Words {
                    reader: 2,
                    writer: 1,
                    compute: 2,
                };
                for (j, c) in these.iter().enumerate() {
                    let u = units / n + usize::from(j < units % n);
                    add(*c, 2 + 9 * u, 2 + 3 * u + next, u, head);
                }
            }
        }
    }
    words.values().fold((0, 0), |(a, t), w| {
        (a.max(w.compute), t.max(w.reader).max(w.writer))
    })
}

/// `steps` packed into programs greedily: a step joins the program before it while the two fit
/// one ([`chain_cores`]); with `chain` false every step is a program of its own. When all the
/// steps left fit one program (a whole denoising step does) that is found first, in one try.
pub fn pack_programs(
    grid: [usize; 2],
    steps: &[StepNeed],
    chain: bool,
) -> Result<Vec<ProgramCores>, ProgramError> {
    let mut programs: Vec<ProgramCores> = Vec::new();
    let mut first = 0;
    while first < steps.len() {
        if chain && let Some((cores, groups)) = chain_cores(grid, &steps[first..]) {
            programs.push(ProgramCores {
                first_step: first,
                steps: cores,
                groups,
            });
            break;
        }
        let (mut cores, mut groups) =
            chain_cores(grid, &steps[first..=first]).ok_or_else(|| ProgramError {
                step: first,
                grid,
                free: phase_pool(grid, &steps[first..=first]).len(),
            })?;
        let mut end = first + 1;
        while chain && end < steps.len() {
            match chain_cores(grid, &steps[first..=end]) {
                Some((c, g)) => (cores, groups) = (c, g),
                None => break,
            }
            end += 1;
        }
        programs.push(ProgramCores {
            first_step: first,
            steps: cores,
            groups,
        });
        first = end;
    }
    Ok(programs)
}

/// The name of an end's kernels: its compute kernel's (`finish`, `finish_gelu`,
/// `finish_residual`) and its output format, since a core's CBs have one format.
pub fn end_kernels(compute: &str, out_f32: bool) -> String {
    format!("{compute}/{}", if out_f32 { "f32" } else { "bf16" })
}

impl super::MegakernelPlan {
    /// A timestep's line as the device backend builds it (`gr00t-runtime`'s `ada_graph`): every
    /// block's AdaLN matmul (M = 1, SiLU(temb)) and its end, one step. It depends on the
    /// timestep alone, so it runs once per timestep and device, not in the steps.
    pub fn timestep_needs(&self) -> Vec<StepNeed> {
        use crate::dims::WeightKind;
        let layers = 0..self.dims.num_layers;
        vec![StepNeed {
            before: None,
            matmul_jobs: layers
                .clone()
                .map(|b| {
                    let split = &self.class(b, WeightKind::AdaNorm).split;
                    split
                        .units
                        .iter()
                        .map(|u| super::compute_coord(u.core))
                        .collect()
                })
                .collect(),
            end_jobs: layers
                .map(|b| (1, self.class(b, WeightKind::AdaNorm).split.nt))
                .collect(),
            end_kernels: end_kernels("finish", true),
        }]
    }

    /// One denoising step's line as the device backend builds it (`gr00t-runtime`'s
    /// `step_graph`): per block the AdaLN LayerNorm (its rows the timestep's,
    /// [`Self::timestep_needs`]) with Q (with K and V in a self block), the attention with the
    /// output projection and its residual, the plain LayerNorm with FF-up and its GELU, FF-down
    /// and its residual. The cross blocks' K and V are the observation's, computed before the
    /// steps. The kernels' names are the graph's (`ln_ada`, `ln_plain`,
    /// `attention/self|text|image`, [`end_kernels`]).
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
        let step = |before: Option<(Before, &str)>,
                    block: usize,
                    kinds: &[WeightKind],
                    m_tiles: usize,
                    end: String| StepNeed {
            before: before.map(|(b, k)| (b, k.to_string())),
            matmul_jobs: kinds.iter().map(|k| job(block, *k)).collect(),
            end_jobs: kinds.iter().map(|k| (m_tiles, nt(block, *k))).collect(),
            end_kernels: end,
        };
        let mut line = Vec::new();
        let rows = Before::Rows { row_tiles: mt };
        let attention = Before::Attention {
            heads: d.num_heads,
            head_dim: d.head_dim,
        };
        for b in 0..d.num_layers {
            let qkv: &[WeightKind] = if DitDims::is_cross(b) {
                &[WeightKind::Q]
            } else {
                &[WeightKind::Q, WeightKind::K, WeightKind::V]
            };
            let plain = end_kernels("finish", false);
            let residual = end_kernels("finish_residual", true);
            line.push(step(Some((rows, "ln_ada")), b, qkv, mt, plain));
            let out = [WeightKind::Out];
            // Self, text and image attentions have keys of their own sizes, so groups of their
            // own; N1.6 (attend_text_every_n_blocks = 2) attends the text in every fourth block.
            let which = match (DitDims::is_cross(b), b % 4 == 0) {
                (false, _) => "attention/self",
                (true, true) => "attention/text",
                (true, false) => "attention/image",
            };
            line.push(step(
                Some((attention, which)),
                b,
                &out,
                mt,
                residual.clone(),
            ));
            let gelu = end_kernels("finish_gelu", false);
            line.push(step(
                Some((rows, "ln_plain")),
                b,
                &[WeightKind::FfUp],
                mt,
                gelu,
            ));
            line.push(step(None, b, &[WeightKind::FfDown], mt, residual));
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
#[path = "program_tests.rs"]
mod tests;
