//! A graph's steps lowered to the programs the worker launches ([`Program`]): which core does
//! which task, every task-table and runtime-arg word, the CBs, the semaphores. The kinds' own
//! layouts (the words each kernel reads) are `lower_parts.rs`'s, a chain's line of phases
//! `lower_chain.rs`'s; here the program being built ([`Draft`]: the tensors it names, in the
//! order they are resolved and allocated), its typed failures, and the programs of one step.

use std::collections::BTreeMap;

use tt_blackhole::device::DitRunError;
use tt_blackhole::plan::program::{Core, MAX_ARGS, TABLE_WORDS};

use super::graph_steps::{AttentionStep, FinishStep, GraphStep, RelayoutStep, RowsStep};
use super::lower_parts::{AttnTask, FinishTask, RowsTask, Sync};
use super::program::{
    CbFormat, CbSpec, CoreWords, KernelConfig, Program, ProgramKernel, ProgramTensor, Words,
};
use super::protocol::{ActDtype, KernelSet};
use super::registry::{READER_TABLE_CB, WRITER_TABLE_CB, cb_id};

/// Why a graph's steps cannot be lowered to programs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LowerError {
    /// A value does not fit the word (or half word) the kernels read it from.
    #[error("{what} = {value} does not fit {bits} bits")]
    Overflow {
        /// What the value is.
        what: &'static str,
        /// The value.
        value: usize,
        /// The bits it has.
        bits: u32,
    },
    /// A data-movement kernel's task table is longer than a core's L1 holds.
    #[error("task table: {words} words on core {core:?}, the plan allows at most {TABLE_WORDS}")]
    Table {
        /// The core.
        core: Core,
        /// Its words.
        words: usize,
    },
    /// A kernel's runtime args are more than tt-metal takes.
    #[error("runtime args: {words} words on core {core:?}, tt-metal takes at most {MAX_ARGS}")]
    Args {
        /// The core.
        core: Core,
        /// Its words.
        words: usize,
    },
    /// The steps do not fit together (shapes, cores, a stream in some ends only).
    #[error("{0}")]
    Steps(String),
}

impl From<LowerError> for DitRunError {
    fn from(e: LowerError) -> Self {
        DitRunError::Input(format!("lowering a graph to programs: {e}"))
    }
}

/// `v` as a word.
pub(super) fn word(what: &'static str, v: usize) -> Result<u32, LowerError> {
    u32::try_from(v).map_err(|_| LowerError::Overflow {
        what,
        value: v,
        bits: 32,
    })
}

/// Two values < 2¹⁶ in one word, `lo` in the low half (the kernels' packed words).
pub(super) fn pair(what: &'static str, lo: usize, hi: usize) -> Result<u32, LowerError> {
    for v in [lo, hi] {
        if v >= 1 << 16 {
            return Err(LowerError::Overflow {
                what,
                value: v,
                bits: 16,
            });
        }
    }
    Ok((lo | hi << 16) as u32)
}

/// A program being built: its tensors (each name's latest entry), kernels, CBs.
pub(super) struct Draft {
    tensors: Vec<ProgramTensor>,
    latest: BTreeMap<String, usize>,
    pub kernels: Vec<ProgramKernel>,
    pub cbs: Vec<CbSpec>,
    /// The device's worker grid: a step without the plan's cores takes its first row (rows,
    /// attention) or all of it, row by row (a matmul's end).
    pub grid: [usize; 2],
}

impl Draft {
    pub fn new(grid: [usize; 2]) -> Self {
        Draft {
            tensors: Vec::new(),
            latest: BTreeMap::new(),
            kernels: Vec::new(),
            cbs: Vec::new(),
            grid,
        }
    }

    /// The tensor of that name as the program holds it so far: its latest allocation here, or
    /// the worker's.
    pub fn tensor(&mut self, name: &str) -> usize {
        if let Some(&i) = self.latest.get(name) {
            return i;
        }
        self.push(name, None)
    }

    /// A tensor allocated under `name` (`[rows, cols]`, whole tiles) from here on.
    pub fn alloc(&mut self, name: &str, rows: usize, cols: usize, dtype: ActDtype) -> usize {
        self.push(name, Some((rows, cols, dtype)))
    }

    fn push(&mut self, name: &str, alloc: Option<(usize, usize, ActDtype)>) -> usize {
        let i = self.tensors.len();
        self.tensors.push(ProgramTensor {
            name: name.to_string(),
            alloc,
        });
        self.latest.insert(name.to_string(), i);
        i
    }

    /// The first row of the grid: where a phase without the plan's cores runs.
    pub fn first_row(&self) -> Vec<Core> {
        (0..self.grid[0]).map(|x| (x, 0)).collect()
    }

    /// Every core of the grid, row by row.
    pub fn all_cores(&self) -> Vec<Core> {
        (0..self.grid[1])
            .flat_map(|y| (0..self.grid[0]).map(move |x| (x, y)))
            .collect()
    }

    /// The three kernels of a program kind on the cores of `rd`: reader and writer reading
    /// task tables (`rd`, `wr`: their words a core), compute with runtime args `cp` (padded to
    /// one length, which its compile-time args carry); the accessor args of `acc_rd` and
    /// `acc_wr` after the tables'; the CBs `cbs` (index: format, page bytes, pages) on the
    /// same cores, with the tables'.
    #[allow(clippy::too_many_arguments)]
    pub fn three_kernels(
        &mut self,
        k: &KernelSet,
        rd: BTreeMap<Core, Words>,
        wr: BTreeMap<Core, Words>,
        cp: BTreeMap<Core, Vec<u32>>,
        (acc_rd, acc_wr): (Vec<usize>, Vec<usize>),
        compute: KernelConfig,
        cbs: BTreeMap<u8, (CbFormat, usize, usize)>,
    ) -> Result<(), LowerError> {
        let cores: Vec<Core> = rd.keys().copied().collect();
        self.table(&k.reader, KernelConfig::Reader, acc_rd, rd)?;
        self.table(&k.writer, KernelConfig::Writer, acc_wr, wr)?;
        let (cp, n) = padded_args(cp)?;
        let n = word("compute args", n)?;
        self.kernels
            .push(args_kernel(&k.compute, compute, Vec::new(), vec![n], cp)?);
        self.cbs.extend(
            cbs.into_iter()
                .map(|(i, (format, page, pages))| cb_on(i, format, page, pages, &cores)),
        );
        Ok(())
    }

    /// A writer reading its words from a task table ([`Draft::table`]).
    pub fn writer_table(
        &mut self,
        source: &str,
        accessors: Vec<usize>,
        per_core: BTreeMap<Core, Words>,
    ) -> Result<(), LowerError> {
        self.table(source, KernelConfig::Writer, accessors, per_core)
    }

    /// A data-movement kernel reading its words from a task table, and the CB (the registry's
    /// for its role) its row is read into, on its cores.
    fn table(
        &mut self,
        source: &str,
        config: KernelConfig,
        accessors: Vec<usize>,
        per_core: BTreeMap<Core, Words>,
    ) -> Result<(), LowerError> {
        let cb = match config {
            KernelConfig::Writer => WRITER_TABLE_CB,
            _ => READER_TABLE_CB,
        };
        let kernel = table_kernel(source, config, accessors, per_core)?;
        let cores: Vec<Core> = kernel.cores.iter().map(|c| c.core).collect();
        let width = kernel.table_width.unwrap_or(0);
        self.cbs
            .push(cb_on(cb, CbFormat::Uint32, width * 4, 1, &cores));
        self.kernels.push(kernel);
        Ok(())
    }

    /// The program: `label`, `steps` graph steps, a chain's `phases`, `semaphores`.
    pub fn finish(
        self,
        label: &str,
        steps: usize,
        phases: Vec<(String, u64)>,
        semaphores: Vec<Vec<Core>>,
    ) -> Program {
        Program {
            label: label.to_string(),
            steps,
            phases,
            tensors: self.tensors,
            kernels: self.kernels,
            cbs: self.cbs,
            semaphores,
        }
    }
}

pub(super) fn cb_on(
    index: u8,
    format: CbFormat,
    page: usize,
    pages: usize,
    cores: &[Core],
) -> CbSpec {
    CbSpec {
        index,
        format,
        page,
        pages,
        cores: cores.to_vec(),
    }
}

/// A data-movement kernel reading its words from a task table: a row a core (sorted), its
/// width a power of two of at least 16 words, so that few widths compile.
fn table_kernel(
    source: &str,
    config: KernelConfig,
    accessors: Vec<usize>,
    per_core: BTreeMap<Core, Words>,
) -> Result<ProgramKernel, LowerError> {
    let mut width = 16;
    for (&core, w) in &per_core {
        if w.len() > TABLE_WORDS {
            return Err(LowerError::Table {
                core,
                words: w.len(),
            });
        }
        width = width.max(w.len().next_power_of_two());
    }
    Ok(ProgramKernel {
        source: source.to_string(),
        config,
        accessors,
        compile_args: Vec::new(),
        table_width: Some(width),
        cores: per_core.into_iter().map(|(c, w)| w.on(c)).collect(),
    })
}

/// Runtime args of a kernel whose length varies a core, each padded with zeros to the longest,
/// and that length: ttnn's program cache keys a program without its runtime args and writes
/// new ones into the cached vectors, which must be as long, so the length goes into the
/// compile-time args (the key).
fn padded_args(per_core: BTreeMap<Core, Vec<u32>>) -> Result<(Vec<CoreWords>, usize), LowerError> {
    let n = per_core.values().map(Vec::len).max().unwrap_or(0);
    if let Some((&core, _)) = per_core.iter().find(|(_, v)| v.len() > MAX_ARGS) {
        return Err(LowerError::Args { core, words: n });
    }
    let cores = per_core
        .into_iter()
        .map(|(core, mut words)| {
            words.resize(n, 0);
            CoreWords {
                core,
                words,
                ..CoreWords::default()
            }
        })
        .collect();
    Ok((cores, n))
}

/// A kernel whose words are its runtime args, as given.
pub(super) fn args_kernel(
    source: &str,
    config: KernelConfig,
    accessors: Vec<usize>,
    compile_args: Vec<u32>,
    per_core: Vec<CoreWords>,
) -> Result<ProgramKernel, LowerError> {
    if let Some(c) = per_core.iter().find(|c| c.words.len() > MAX_ARGS) {
        return Err(LowerError::Args {
            core: c.core,
            words: c.words.len(),
        });
    }
    Ok(ProgramKernel {
        source: source.to_string(),
        config,
        accessors,
        compile_args,
        table_width: None,
        cores: per_core,
    })
}

/// The graph's steps (packed: `graph_pack.rs`) as programs, one a step, on a device of worker
/// grid `grid`.
pub(crate) fn lower(steps: &[GraphStep], grid: [usize; 2]) -> Result<Vec<Program>, LowerError> {
    steps.iter().map(|st| lower_step(st, grid)).collect()
}

/// One step's program.
pub(crate) fn lower_step(st: &GraphStep, grid: [usize; 2]) -> Result<Program, LowerError> {
    let mut d = Draft::new(grid);
    match st {
        GraphStep::Rows(r) => {
            let t = rows_task(&mut d, r, Sync::default());
            d.rows_parts(r, vec![t])?;
            Ok(d.finish(&r.label, 1, Vec::new(), Vec::new()))
        }
        GraphStep::Attention(a) => {
            let t = attn_task(&mut d, a, Sync::default());
            d.attention_parts(a, vec![t])?;
            Ok(d.finish("attention", 1, Vec::new(), Vec::new()))
        }
        GraphStep::Finish(f) => {
            let sync = Sync {
                cut: f.cut,
                ..Sync::default()
            };
            let t = finish_task(&mut d, f, sync);
            d.finish_parts(f, vec![t])?;
            Ok(d.finish("finish", 1, Vec::new(), Vec::new()))
        }
        GraphStep::Relayout(r) => relayout(d, r),
        GraphStep::Chain(c) => super::lower_chain::chain(d, c),
        GraphStep::MatmulEnd(s) => Err(LowerError::Steps(format!(
            "step {}: a matmul and its end go to the worker packed in a chain",
            s.label
        ))),
    }
}

/// A LayerNorm's task: its output allocated first, then its inputs (a missing g or b is the
/// scaler, never read).
pub(super) fn rows_task(d: &mut Draft, r: &RowsStep, sync: Sync) -> RowsTask {
    let dtype = if r.out_f32 {
        ActDtype::F32
    } else {
        ActDtype::Bf16
    };
    let out = d.alloc(&r.out, r.row_tiles * 32, r.wt * 32, dtype);
    let or_scaler = |n: &str| {
        if n.is_empty() {
            r.scaler.clone()
        } else {
            n.to_string()
        }
    };
    RowsTask {
        x: d.tensor(&r.x),
        scaler: d.tensor(&r.scaler),
        g: d.tensor(&or_scaler(&r.g)),
        b: d.tensor(&or_scaler(&r.b)),
        out,
        step: r.clone(),
        sync,
    }
}

pub(super) fn attn_task(d: &mut Draft, a: &AttentionStep, sync: Sync) -> AttnTask {
    let out = d.alloc(
        &a.out,
        a.mp,
        (a.heads * a.hd).div_ceil(32) * 32,
        ActDtype::Bf16,
    );
    AttnTask {
        q: d.tensor(&a.q),
        k: d.tensor(&a.k),
        v: d.tensor(&a.v),
        scaler: d.tensor(&a.scaler),
        mask: d.tensor(&a.mask),
        out,
        step: a.clone(),
        sync,
    }
}

/// A matmul end's task: per job its partials, bias, output (allocated) and stream.
pub(super) fn finish_task(d: &mut Draft, f: &FinishStep, sync: Sync) -> FinishTask {
    let dtype = if f.out_f32 {
        ActDtype::F32
    } else {
        ActDtype::Bf16
    };
    let jobs = f
        .jobs
        .iter()
        .map(|j| {
            let x = d.tensor(&j.x);
            let bias = d.tensor(&j.bias);
            let out = d.alloc(&j.out, j.out_rows.unwrap_or(j.mt) * 32, j.nt * 32, dtype);
            let res = j.res.as_deref().map(|r| d.tensor(r));
            (j.clone(), x, bias, out, res)
        })
        .collect();
    FinishTask { jobs, sync }
}

/// Our `relayout_tiles.cpp` (data movement only): the destination's tile rows shared over up
/// to `cores` cores of the grid's first row, each given every segment progression.
fn relayout(mut d: Draft, st: &RelayoutStep) -> Result<Program, LowerError> {
    let (format, elem) = match st.dtype {
        ActDtype::F32 => (CbFormat::F32, 4),
        ActDtype::Bf16 => (CbFormat::Bf16, 2),
    };
    let src = d.tensor(&st.src);
    let dst = d.alloc(&st.dst, st.rows * 32, st.dst_w * 32, st.dtype);
    let n_cores = st.cores.min(st.rows).min(d.grid[0]).max(1);
    let (per, extra) = (st.rows / n_cores, st.rows % n_cores);
    let mut flat = Vec::new();
    for p in &st.progs {
        for &v in p {
            flat.push(word("relayout progression", v)?);
        }
    }
    let (mut per_core, mut first) = (Vec::new(), 0);
    for c in 0..n_cores {
        let count = per + usize::from(c < extra);
        let mut w = Words::default();
        w.addr(src).addr(dst);
        for v in [st.src_w, st.dst_w, elem, first, count, st.progs.len()] {
            w.lit(word("relayout arg", v)?);
        }
        w.words.extend_from_slice(&flat);
        per_core.push(w.on((c, 0)));
        first += count;
    }
    let cores: Vec<Core> = per_core.iter().map(|c| c.core).collect();
    let page = 1024 * elem;
    let rt = "relayout_tiles.cpp";
    d.cbs.push(cb_on(
        cb_id(rt, "cb_dst"),
        format,
        page,
        (per + usize::from(extra > 0)) * st.dst_w,
        &cores,
    ));
    d.cbs
        .push(cb_on(cb_id(rt, "cb_src"), format, page, st.span, &cores));
    let kernel = args_kernel(
        &st.kernel,
        KernelConfig::Reader,
        vec![src, dst],
        Vec::new(),
        per_core,
    )?;
    d.kernels.push(kernel);
    Ok(d.finish(
        st.label.as_deref().unwrap_or("relayout"),
        1,
        Vec::new(),
        Vec::new(),
    ))
}

/// One matmul alone (`TtDevice::matmul_raw`): its activation `act` (bf16) times its weight,
/// the fp32 partials allocated under `out`; its kernels named `reader`, `compute`, `writer`.
pub(crate) fn lone_matmul(
    shared: &super::graph_steps::MatmulShared,
    job: &super::graph_steps::MatmulJob,
    (act, out): (&str, &str),
    grid: [usize; 2],
) -> Result<Program, LowerError> {
    let mut d = Draft::new(grid);
    let shared = super::graph_steps::MatmulShared {
        kernels: KernelSet {
            reader: "reader".into(),
            compute: "compute".into(),
            writer: "writer".into(),
        },
        ..shared.clone()
    };
    let act = d.tensor(act);
    let out = d.alloc(out, job.k_split * job.mt * 32, job.nt * 32, ActDtype::F32);
    let arena = d.tensor(&shared.arena);
    let jobs = [super::lower_parts::MmJob {
        job,
        arena,
        act,
        out,
        phase: 0,
    }];
    d.matmul_parts(&shared, &jobs, &[(0, Vec::new())])?;
    Ok(d.finish("matmul", 1, Vec::new(), Vec::new()))
}
