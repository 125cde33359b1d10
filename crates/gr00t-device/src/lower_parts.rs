//! The kernels, words and CBs of each kind of our programs: a matmul's share on the plan's
//! cores, a row kernel (LayerNorm, softmax, RoPE, the gather), attention per head, a matmul's
//! end. Each takes a list of *tasks*: the phases of one kind that a chain runs on the same cores
//! (one group of the plan, `tt_blackhole::plan::program`), or the one phase of a program of its
//! own. A core runs one set of kernels for the whole program and does its share of each task in
//! turn; before a task its reader waits until the core's semaphore 0 holds the task's count,
//! after it its writer increments semaphore 0 of every core of the next phase.
//!
//! The words are the kernels' own layouts (`kernels/*.cpp`, read through `task_table.h`): the
//! data-movement kernels' go into task tables, the compute kernels' into runtime args, several
//! values packed two 16-bit halves a word ([`pair`]).

use std::collections::BTreeMap;

use tt_blackhole::plan::program::{Core, finish_unit_cols, head_starts};

use super::graph_steps::{AttentionStep, FinishJob, FinishStep, MatmulJob, MatmulShared, RowsStep};
use super::lower::{Draft, LowerError, pair, word};
use super::program::{CbFormat, KernelConfig, Words};
use super::registry::cb_id;

/// Where a task runs and how it is ordered in a chain: its cores (`None`: the grid's default),
/// per core the semaphore count its reader waits for, the cores its writer signals after it,
/// and (a matmul's end) the cores its units are cut for.
#[derive(Debug, Clone, Default)]
pub(super) struct Sync {
    pub cores: Option<Vec<Core>>,
    pub waits: BTreeMap<Core, usize>,
    pub signal: Vec<Core>,
    pub cut: Option<usize>,
}

/// A row kernel's task: its tensors (indices into the program's).
pub(super) struct RowsTask {
    pub x: usize,
    pub scaler: usize,
    pub g: usize,
    pub b: usize,
    pub out: usize,
    pub step: RowsStep,
    pub sync: Sync,
}

/// An attention's task.
pub(super) struct AttnTask {
    pub q: usize,
    pub k: usize,
    pub v: usize,
    pub scaler: usize,
    pub mask: usize,
    pub out: usize,
    pub step: AttentionStep,
    pub sync: Sync,
}

/// A matmul end's task: per job (the job, partials, bias, output, stream).
pub(super) struct FinishTask {
    pub jobs: Vec<(FinishJob, usize, usize, usize, Option<usize>)>,
    pub sync: Sync,
}

/// One matmul of a program: its job, arena, activation, partials and phase.
pub(super) struct MmJob<'a> {
    pub job: &'a MatmulJob,
    pub arena: usize,
    pub act: usize,
    pub out: usize,
    pub phase: usize,
}

const F32_PAGE: (CbFormat, usize) = (CbFormat::F32, 4096);
const BF16_PAGE: (CbFormat, usize) = (CbFormat::Bf16, 2048);

fn hifi4(unpack_to_dest: Vec<u8>) -> KernelConfig {
    KernelConfig::Compute {
        fidelity: "HiFi4".into(),
        unpack_to_dest,
    }
}

/// A program kind's words a core: the reader's table, the compute args, the writer's table.
type KernelWords = (
    BTreeMap<Core, Words>,
    BTreeMap<Core, Vec<u32>>,
    BTreeMap<Core, Words>,
);

/// Per core the task lists of a reader, compute and writer, each core's tasks in turn.
#[derive(Default)]
struct PerCore {
    rd: BTreeMap<Core, Vec<Words>>,
    cp: BTreeMap<Core, Vec<Vec<u32>>>,
    wr: BTreeMap<Core, Vec<Words>>,
}

impl PerCore {
    fn push(&mut self, core: Core, rd: Words, cp: Vec<u32>, wr: Words) {
        self.rd.entry(core).or_default().push(rd);
        self.cp.entry(core).or_default().push(cp);
        self.wr.entry(core).or_default().push(wr);
    }

    /// Each kernel's words a core: its task count, then its head, then its tasks in turn;
    /// `heads` are the reader's, the compute's and the writer's.
    fn words(self, [rd_head, cp_head, wr_head]: [&[u32]; 3]) -> KernelWords {
        let tables = |m: BTreeMap<Core, Vec<Words>>, head: &[u32]| {
            m.into_iter()
                .map(|(c, tasks)| {
                    let mut w = Words::default();
                    w.lit(tasks.len() as u32);
                    w.words.extend_from_slice(head);
                    for t in &tasks {
                        w.append(t);
                    }
                    (c, w)
                })
                .collect()
        };
        let cp = self
            .cp
            .into_iter()
            .map(|(c, tasks)| {
                let mut w = vec![tasks.len() as u32];
                w.extend_from_slice(cp_head);
                w.extend(tasks.into_iter().flatten());
                (c, w)
            })
            .collect();
        (tables(self.rd, rd_head), cp, tables(self.wr, wr_head))
    }
}

/// The words of a writer's signal: how many cores, then each one's NOC coordinates.
fn signal_words(w: &mut Words, signal: &[Core]) -> Result<(), LowerError> {
    w.lit(word("signalled cores", signal.len())?);
    for &c in signal {
        w.noc(c);
    }
    Ok(())
}

/// Literal words.
fn lits(w: &mut Words, what: &'static str, vals: &[usize]) -> Result<(), LowerError> {
    for &v in vals {
        w.lit(word(what, v)?);
    }
    Ok(())
}

impl Draft {
    /// One program's matmuls (`jobs`, in phase order) on the plan's cores: a core that holds
    /// units of several does them in turn. `phases`: each one's producers (the cores of the
    /// phase before it) and the cores it signals; a core waits for the sum of the producers of
    /// every phase it took part in so far, and after its last job of a phase signals that
    /// phase's next. The kernels, dtypes and fidelity are `shared`'s; each CB the largest any
    /// job's plan gives.
    pub(super) fn matmul_parts(
        &mut self,
        shared: &MatmulShared,
        jobs: &[MmJob<'_>],
        phases: &[(usize, Vec<Core>)],
    ) -> Result<(), LowerError> {
        let arena = self.tensor(&shared.arena);
        let mut per_core: BTreeMap<Core, Vec<(&MmJob<'_>, &super::graph_steps::MatmulUnit)>> =
            BTreeMap::new();
        for j in jobs {
            for u in &j.job.units {
                per_core.entry((u.x, u.y)).or_default().push((j, u));
            }
        }
        let most = |f: fn(&MatmulJob) -> usize| jobs.iter().map(|j| f(j.job)).max().unwrap_or(0);
        let (cb_act, cb_w, cb_out) = (
            most(|j| j.cbs.act),
            most(|j| j.cbs.weights),
            most(|j| j.cbs.out),
        );
        let (mut rd, mut cp, mut wr) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        for (&core, work) in &per_core {
            let (mut r, mut w) = (Words::default(), Words::default());
            r.addr(arena);
            lits(&mut r, "matmul header", &[work.len(), cb_act, cb_w])?;
            let mut c = vec![
                word("jobs", work.len())?,
                word("cb", cb_act)?,
                word("cb", cb_w)?,
            ];
            lits(&mut w, "jobs", &[work.len()])?;
            let mut count = 0;
            for (i, &(j, u)) in work.iter().enumerate() {
                let (producers, signal) = &phases[j.phase];
                if i == 0 || work[i - 1].0.phase != j.phase {
                    count += producers;
                }
                let wait = if *producers > 0 { count } else { 0 };
                let last = work.get(i + 1).is_none_or(|(n, _)| n.phase != j.phase);
                let sig: &[Core] = if last { signal } else { &[] };
                let mt = j.job.mt;
                if u.n_count >= 1 << 10 || u.k_count >= 1 << 11 || mt >= 1 << 11 {
                    return Err(LowerError::Steps(format!(
                        "matmul unit ({}, {}, {mt}) does not fit one word",
                        u.n_count, u.k_count
                    )));
                }
                r.addr(j.act);
                r.lit(word("first tile", u.first_tile)?);
                r.lit(pair("n, k", u.n_count, u.k_count)?);
                r.lit(pair("k start, kt", u.k_start, j.job.kt)?);
                r.lit(pair("mt, wait", mt, wait)?);
                r.addr(j.arena);
                c.push((u.n_count | u.k_count << 10 | mt << 21) as u32);
                w.addr(j.out);
                w.lit(pair("piece, signals", u.piece, sig.len())?);
                w.lit(pair("n start, n", u.n_start, u.n_count)?);
                w.lit(pair("mt, nt", mt, j.job.nt)?);
                for &s in sig {
                    w.noc(s);
                }
            }
            rd.insert(core, r);
            cp.insert(core, c);
            wr.insert(core, w);
        }
        let Some(first) = jobs.first() else {
            return Err(LowerError::Steps("a matmul program without a job".into()));
        };
        let weights = CbFormat::of_weight(&shared.weight_dtype)
            .ok_or_else(|| LowerError::Steps(format!("weight dtype {:?}", shared.weight_dtype)))?;
        let mm = "matmul_share.cpp";
        let cbs = BTreeMap::from([
            (cb_id(mm, "cb_act"), (CbFormat::Bf16, 2048, cb_act)),
            (
                cb_id(mm, "cb_w"),
                (weights, shared.weight_page as usize, cb_w),
            ),
            (cb_id(mm, "cb_out"), (CbFormat::F32, 4096, cb_out)),
        ]);
        let compute = KernelConfig::Compute {
            fidelity: shared.math_fidelity.clone(),
            unpack_to_dest: Vec::new(),
        };
        let acc = (vec![first.act, arena], vec![first.out]);
        self.three_kernels(&shared.kernels, rd, wr, cp, acc, compute, cbs)
    }

    /// A row kernel's program part over `tasks` (`h`: the group's first step, whose kernels,
    /// work CBs and core count they share): a task's tile rows shared over up to `h.cores` of
    /// its cores. Answers the cores each task used.
    pub(super) fn rows_parts(
        &mut self,
        h: &RowsStep,
        tasks: Vec<RowsTask>,
    ) -> Result<Vec<Vec<Core>>, LowerError> {
        let (mut pc, mut used) = (PerCore::default(), Vec::new());
        let first_row = self.first_row();
        for t in &tasks {
            let s = &t.step;
            let cores = t.sync.cores.as_deref().unwrap_or(&first_row);
            let n_cores = h.cores.min(s.row_tiles).min(cores.len()).max(1);
            let (per, extra) = (s.row_tiles / n_cores, s.row_tiles % n_cores);
            let mut first = 0;
            for (i, &core) in cores[..n_cores].iter().enumerate() {
                let count = per + usize::from(i < extra);
                let (mut r, mut w) = (Words::default(), Words::default());
                r.addr(t.x).addr(t.scaler).addr(t.g).addr(t.b);
                let wait = t.sync.waits.get(&core).copied().unwrap_or(0);
                let task = [s.wt, first, count, s.vec_tiles, s.b_col, s.vec_len, wait];
                lits(&mut r, "rows task", &task)?;
                w.addr(t.out);
                lits(&mut w, "rows out", &[first * s.wt, count * s.wt])?;
                signal_words(&mut w, &t.sync.signal)?;
                pc.push(core, r, vec![pair("wt, rows", s.wt, count)?], w);
                first += count;
            }
            used.push(cores[..n_cores].to_vec());
        }
        let wt = tasks.iter().map(|t| t.step.wt).max().unwrap_or(1);
        let acc = tasks
            .first()
            .map(|t| (vec![t.x, t.scaler, t.g, t.b], vec![t.out]))
            .unwrap_or_default();
        let (rd, cp, wr) = pc.words([&[]; 3]);
        let out = if h.out_f32 { F32_PAGE } else { BF16_PAGE };
        let (rr, wt_out) = ("reader_rows.cpp", "writer_tiles.cpp");
        let mut cbs = BTreeMap::from([
            (cb_id(rr, "cb_x"), (F32_PAGE.0, F32_PAGE.1, wt)),
            (cb_id(rr, "cb_scaler"), (F32_PAGE.0, F32_PAGE.1, 1)),
            (cb_id(wt_out, "cb_out"), (out.0, out.1, 2)),
        ]);
        for &(i, n) in &h.work_cbs {
            cbs.insert(i, (F32_PAGE.0, F32_PAGE.1, n));
        }
        let compute = hifi4(h.unpack_to_dest.clone());
        self.three_kernels(&h.kernels, rd, wr, cp, acc, compute, cbs)?;
        Ok(used)
    }

    /// The attention program part over `tasks`, every one of one shape (the plan's groups keep
    /// self, text and image attentions apart). The reader splits the heads, the writer merges
    /// them; a core owns whole output tiles, so the heads go out in runs whose columns start on
    /// a tile boundary, up to `h.cores` of them. GQA: query head g reads K/V head
    /// g / (heads / kv_heads); causal: query row i attends keys j <= i (the reader builds the
    /// diagonal's mask tiles). Answers the cores each task used.
    pub(super) fn attention_parts(
        &mut self,
        h: &AttentionStep,
        tasks: Vec<AttnTask>,
    ) -> Result<Vec<Vec<Core>>, LowerError> {
        let shape = |a: &AttentionStep| (a.heads, a.mp, a.np, a.hd, a.kv_heads, a.causal);
        if let Some(t) = tasks.iter().find(|t| shape(&t.step) != shape(h)) {
            return Err(LowerError::Steps(format!(
                "attention: one program's tasks have shapes {:?} and {:?}",
                shape(h),
                shape(&t.step)
            )));
        }
        let (heads, mp, np, hd, kv_heads, causal) = shape(h);
        if kv_heads < 1 || heads % kv_heads != 0 {
            return Err(LowerError::Steps(format!(
                "attention: {heads} query heads over {kv_heads} K/V heads"
            )));
        }
        let (mt, nt, dt) = (mp / 32, np / 32, hd.div_ceil(32));
        let (w, w_kv, group) = (
            (heads * hd).div_ceil(32),
            (kv_heads * hd).div_ceil(32),
            heads / kv_heads,
        );
        let starts = head_starts(heads, hd);
        let (mut pc, mut used, mut cw_max) = (PerCore::default(), Vec::new(), 1);
        let first_row = self.first_row();
        for t in &tasks {
            let cores = t.sync.cores.as_deref().unwrap_or(&first_row);
            let n_cores = h.cores.min(starts.len()).min(cores.len()).max(1);
            let (per, extra) = (starts.len() / n_cores, starts.len() % n_cores);
            let mut first = 0;
            for (i, &core) in cores[..n_cores].iter().enumerate() {
                let count = per + usize::from(i < extra);
                let h0 = starts[first];
                let h1 = starts.get(first + count).copied().unwrap_or(heads);
                let (c0, c1) = (h0 * hd / 32, (h1 * hd).div_ceil(32));
                cw_max = cw_max.max(c1 - c0);
                let (mut r, mut wr) = (Words::default(), Words::default());
                r.addr(t.q).addr(t.k).addr(t.v).addr(t.scaler).addr(t.mask);
                let wait = t.sync.waits.get(&core).copied().unwrap_or(0);
                let task = [
                    h0,
                    h1 - h0,
                    mt,
                    nt,
                    dt,
                    hd,
                    w,
                    w_kv,
                    wait,
                    group,
                    usize::from(causal),
                ];
                lits(&mut r, "attention task", &task)?;
                let cp = vec![
                    pair("heads, mt", h1 - h0, mt)?,
                    pair("nt, dt", nt, dt)?,
                    u32::from(causal),
                ];
                wr.addr(t.out);
                lits(
                    &mut wr,
                    "attention out",
                    &[h0, h1 - h0, mt, dt, hd, w, c0, c1 - c0],
                )?;
                signal_words(&mut wr, &t.sync.signal)?;
                pc.push(core, r, cp, wr);
                first += count;
            }
            used.push(cores[..n_cores].to_vec());
        }
        let acc = tasks
            .first()
            .map(|t| (vec![t.q, t.k, t.v, t.scaler, t.mask], vec![t.out]))
            .unwrap_or_default();
        let (rd, cp, wr) = pc.words([&[]; 3]);
        let (a, r) = ("attention_head.cpp", "reader_attention.cpp");
        let f32 = |n| (F32_PAGE.0, F32_PAGE.1, n);
        let bf16 = |n| (BF16_PAGE.0, BF16_PAGE.1, n);
        let mut cbs = BTreeMap::from([
            (cb_id(a, "cb_q"), bf16(mt * dt)),
            (cb_id(a, "cb_scaler"), f32(1)),
            (cb_id(a, "cb_k"), bf16(nt * dt)),
            (cb_id(a, "cb_v"), bf16(nt * dt)),
            (cb_id(r, "cb_zero"), bf16(1)),
            (cb_id(a, "cb_mask"), f32(nt)),
            (cb_id(r, "cb_scratch"), bf16(dt + 1)),
            (cb_id(a, "cb_s"), f32(nt)),
            (cb_id(a, "cb_s2"), f32(nt)),
            (cb_id(a, "cb_e"), f32(nt)),
            (cb_id(a, "cb_max"), f32(1)),
            (cb_id(a, "cb_rsum"), f32(1)),
            (cb_id(a, "cb_p"), bf16(nt)),
            (cb_id(a, "cb_o"), bf16(2)),
            (cb_id("writer_merge_heads.cpp", "cb_asm"), bf16(mt * cw_max)),
        ]);
        if causal {
            cbs.insert(cb_id(a, "cb_diag"), f32(mt.min(nt)));
        }
        self.three_kernels(&h.kernels, rd, wr, cp, acc, hifi4(Vec::new()), cbs)?;
        Ok(used)
    }

    /// The program part ending matmuls over `tasks`: a task's units (up to `h.unit_tiles`
    /// output tiles of one tile row) dealt over its first cores in turn, a core per unit up to
    /// the cores they are cut for, a core doing its units one after the other (so its L1 holds
    /// one unit's bias). The kernels and output format are `h`'s; every job adds the fp32
    /// stream, or none does. Answers the cores each task used.
    pub(super) fn finish_parts(
        &mut self,
        h: &FinishStep,
        tasks: Vec<FinishTask>,
    ) -> Result<Vec<Vec<Core>>, LowerError> {
        let res = tasks.iter().flat_map(|t| &t.jobs).map(|j| j.4.is_some());
        let res = match (res.clone().all(|r| r), res.clone().any(|r| r)) {
            (true, _) => true,
            (false, false) => false,
            (false, true) => {
                return Err(LowerError::Steps(
                    "finish: a program adds the stream in every job or in none".into(),
                ));
            }
        };
        let all = self.all_cores();
        let (mut pc, mut used, mut cw_max) = (PerCore::default(), Vec::new(), 1);
        for t in &tasks {
            let pool = t.sync.cores.as_deref().unwrap_or(&all);
            let n_grid = t.sync.cut.unwrap_or(pool.len()).max(1);
            let units = finish_units(h.unit_tiles, &t.jobs, n_grid);
            let n = units.len().min(n_grid);
            if pool.len() < n {
                return Err(LowerError::Steps(format!(
                    "finish: {} units, {} cores given",
                    units.len(),
                    pool.len()
                )));
            }
            let cores = &pool[..n];
            let mut mine: Vec<(Core, Vec<&Unit<'_>>)> =
                cores.iter().map(|&c| (c, Vec::new())).collect();
            for (i, u) in units.iter().enumerate() {
                mine[i % n].1.push(u);
            }
            for (core, work) in mine.into_iter().filter(|(_, w)| !w.is_empty()) {
                let (mut r, mut w) = (Words::default(), Words::default());
                let wait = t.sync.waits.get(&core).copied().unwrap_or(0);
                lits(&mut r, "finish task", &[wait, work.len()])?;
                lits(&mut w, "finish units", &[work.len()])?;
                // The compute's tasks are the units: a word each.
                let c = pc.cp.entry(core).or_default();
                for u in &work {
                    let (j, x, bias, out, stream) = u.job;
                    r.addr(*x).addr(*bias);
                    if let (true, Some(s)) = (res, stream) {
                        r.addr(*s);
                    }
                    lits(
                        &mut r,
                        "finish unit",
                        &[j.nt, u.row, u.c0, u.cw, j.k_split, j.mt],
                    )?;
                    c.push(vec![pair("cw, k split", u.cw, j.k_split)?]);
                    w.addr(*out);
                    lits(
                        &mut w,
                        "finish out",
                        &[(u.row + j.out_row0) * j.nt + u.c0, u.cw],
                    )?;
                }
                signal_words(&mut w, &t.sync.signal)?;
                pc.rd.entry(core).or_default().push(r);
                pc.wr.entry(core).or_default().push(w);
            }
            cw_max = units.iter().map(|u| u.cw).fold(cw_max, usize::max);
            used.push(cores.to_vec());
        }
        let pieces_max = tasks
            .iter()
            .flat_map(|t| &t.jobs)
            .map(|j| j.0.k_split)
            .max()
            .unwrap_or(1);
        let head = pair("pieces, columns", pieces_max, cw_max)?;
        let (rd, cp, wr) = pc.words([&[head], &[head], &[]]);
        let first = tasks.first().and_then(|t| t.jobs.first());
        let acc = first
            .map(|(_, x, b, out, s)| {
                let mut rd = vec![*x, *b];
                rd.extend(s.filter(|_| res));
                (rd, vec![*out])
            })
            .unwrap_or_default();
        let fin = "bias_act_rows.cpp";
        let y = if h.out_f32 { F32_PAGE } else { BF16_PAGE };
        let mut cbs = BTreeMap::from([
            (cb_id(fin, "cb_x"), (F32_PAGE.0, F32_PAGE.1, 2 * pieces_max)),
            (cb_id(fin, "cb_bias"), (F32_PAGE.0, F32_PAGE.1, cw_max)),
            (cb_id(fin, "cb_y"), (y.0, y.1, 2)),
        ]);
        if res {
            cbs.insert(cb_id(fin, "cb_res"), (F32_PAGE.0, F32_PAGE.1, 2));
        }
        let unpack = ["cb_x", "cb_bias", "cb_res"]
            .map(|n| cb_id(fin, n))
            .to_vec();
        self.three_kernels(&h.kernels, rd, wr, cp, acc, hifi4(unpack), cbs)?;
        Ok(used)
    }
}

/// One unit of a matmul's end: its job, tile row, first column and columns.
struct Unit<'a> {
    job: &'a (FinishJob, usize, usize, usize, Option<usize>),
    row: usize,
    c0: usize,
    cw: usize,
}

/// The units of a matmul's end: at most `unit_tiles` columns, a row cut into no more pieces
/// than `n_grid` cores share (`tt_blackhole::plan::program::finish_units` counts them, with the
/// same cut).
fn finish_units(
    unit_tiles: usize,
    jobs: &[(FinishJob, usize, usize, usize, Option<usize>)],
    n_grid: usize,
) -> Vec<Unit<'_>> {
    let mut units = Vec::new();
    for job in jobs {
        let (mt, nt) = (job.0.mt, job.0.nt);
        let cw = finish_unit_cols(mt, nt, unit_tiles, n_grid);
        for row in 0..mt {
            for c0 in (0..nt).step_by(cw) {
                units.push(Unit {
                    job,
                    row,
                    c0,
                    cw: cw.min(nt - c0),
                });
            }
        }
    }
    units
}
