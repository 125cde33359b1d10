//! One of our programs run alone, as a `graph` of one step: what the kernel tests do with a
//! LayerNorm, a softmax or an attention (`rows.rs`, `attention.rs`). The worker has no op of
//! its own for each: the inputs go in as named tensors laid out here (padding, the vectors'
//! tiles, the scaler), the step is the one a denoising step's graph holds, and the output comes
//! back read as f32; the worker only puts, launches and reads back.

use std::collections::BTreeMap;

use tt_blackhole::plan::{GRID_X, GRID_Y};

use super::graph_steps::GraphStep;
use super::lower::{Draft, LowerError, args_kernel, cb_on, word};
use super::program::{CbFormat, KernelConfig, Program, Words};
use super::protocol::{ActDtype, Graph, KernelSet, TensorSpec};
use super::sfpu::{EltwiseRun, EltwiseSpec, SfpuError};
use super::worker::TtnnWorker;

/// The prefix of a lone program's tensors (released at its end).
pub(crate) const PREFIX: &str = "one/";

/// A lone program's inputs, in order.
#[derive(Default)]
pub(crate) struct Inputs {
    specs: Vec<TensorSpec>,
    values: Vec<f32>,
}

impl Inputs {
    /// `values` `[rows, cols]` (whole tiles) as `name` (under [`PREFIX`]), stored as `dtype`.
    pub(crate) fn add(&mut self, name: &str, rows: usize, cols: usize, dtype: ActDtype, v: &[f32]) {
        debug_assert_eq!(v.len(), rows * cols);
        self.specs.push(TensorSpec {
            name: format!("{PREFIX}{name}"),
            rows,
            cols,
            dtype,
            real: None,
            at: None,
        });
        self.values.extend_from_slice(v);
    }
}

/// The reduce scaler tile our row kernels read (1 in the first row of every face: plain sums
/// and maxima), `[32, 32]`.
pub(crate) fn scaler_tile() -> Vec<f32> {
    let mut s = vec![0f32; 32 * 32];
    s[..32].fill(1.0);
    s[16 * 32..17 * 32].fill(1.0);
    s
}

/// A per-column vector `[cols]` in row 0 of a `[32, cols]` tensor (what row broadcasts read).
pub(crate) fn row_tile(v: &[f32]) -> Vec<f32> {
    let mut t = vec![0f32; 32 * v.len()];
    t[..v.len()].copy_from_slice(v);
    t
}

/// Run `step` (its kernels named in `sources`) over `inputs`, read back its output `out`
/// (`[rows, cols]`, under [`PREFIX`]) as f32; `label` is the step's program label (its time
/// is the answer's `program_ms`). The step runs on the plan's grid (a device's is at least as
/// large), where a denoising step's would.
pub(crate) fn run(
    worker: &mut TtnnWorker,
    inputs: Inputs,
    step: GraphStep,
    sources: BTreeMap<String, String>,
    out: (&str, usize, usize),
    label: &str,
) -> Result<EltwiseRun, SfpuError> {
    let program = super::lower::lower_step(&step, [GRID_X, GRID_Y])?;
    run_program(worker, inputs, program, sources, out, label)
}

/// [`run`] of a program already laid out.
pub(crate) fn run_program(
    worker: &mut TtnnWorker,
    inputs: Inputs,
    program: Program,
    sources: BTreeMap<String, String>,
    out: (&str, usize, usize),
    label: &str,
) -> Result<EltwiseRun, SfpuError> {
    let (name, rows, cols) = (format!("{PREFIX}{}", out.0), out.1, out.2);
    let mut free: Vec<String> = inputs.specs.iter().map(|s| s.name.clone()).collect();
    free.push(name.clone());
    let payload = super::graph::payload(&inputs.specs, &inputs.values);
    let request = Graph {
        inputs: inputs.specs,
        programs: vec![program],
        outputs: vec![(name, rows, cols)],
        free,
        sources,
        keep: None,
    };
    let (reply, back) = worker.call(&request, &payload)?;
    if back.len() != rows * cols * 4 {
        return Err(SfpuError::Reply {
            op: label.into(),
            got: back.len(),
            want: rows * cols * 4,
        });
    }
    let program_ms = reply.answer.by_label.get(label).map_or(0.0, |t| t.1);
    Ok(EltwiseRun {
        values: back
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        program_ms,
    })
}

/// An element-wise op's program over `one/x` into `one/y` (both `[rows, cols]`, whole tiles):
/// the tiles cut into contiguous runs over up to `spec.cores` cores of the grid's first row,
/// our tile reader (runtime args: the input, first tile, count), the op's compute kernel
/// (runtime args: the count) and our tile writer (its task table: one task, no signal).
pub(crate) fn eltwise_program(spec: &EltwiseSpec, k: &KernelSet) -> Result<Program, LowerError> {
    let mut d = Draft::new([GRID_X, GRID_Y]);
    let x = d.tensor(&tensor("x"));
    let y = d.alloc(&tensor("y"), spec.rows, spec.cols, spec.output);
    let tiles = spec.rows * spec.cols / 1024;
    let n_cores = spec.cores.min(tiles).clamp(1, GRID_X);
    let (per, extra) = (tiles / n_cores, tiles % n_cores);
    let (mut rd, mut cp, mut wr, mut first) = (Vec::new(), Vec::new(), BTreeMap::new(), 0);
    for c in 0..n_cores {
        let n = per + usize::from(c < extra);
        let (f, count) = (word("first tile", first)?, word("tiles", n)?);
        let mut r = Words::default();
        r.addr(x).lit(f).lit(count);
        rd.push(r.on((c, 0)));
        cp.push(
            Words {
                words: vec![count],
                ..Words::default()
            }
            .on((c, 0)),
        );
        let mut w = Words::default();
        w.lit(1).addr(y).lit(f).lit(count).lit(0);
        wr.insert((c, 0), w);
        first += n;
    }
    let cores: Vec<_> = rd.iter().map(|c| c.core).collect();
    let format = |t| match t {
        ActDtype::F32 => (CbFormat::F32, 4096),
        ActDtype::Bf16 => (CbFormat::Bf16, 2048),
    };
    let es = "sfpu/eltwise_sfpu.cpp";
    let (cb_in, cb_out) = (
        super::registry::cb_id(es, "cb_in"),
        super::registry::cb_id(es, "cb_out"),
    );
    for (i, t) in [(cb_in, spec.input), (cb_out, spec.output)] {
        let (f, page) = format(t);
        d.cbs.push(cb_on(i, f, page, 2, &cores));
    }
    let unpack = if spec.input == ActDtype::F32 {
        vec![cb_in]
    } else {
        Vec::new()
    };
    let compute = KernelConfig::Compute {
        fidelity: "HiFi4".into(),
        unpack_to_dest: unpack,
    };
    d.kernels.push(args_kernel(
        &k.reader,
        KernelConfig::Reader,
        vec![x],
        Vec::new(),
        rd,
    )?);
    d.kernels.push(args_kernel(
        &k.compute,
        compute,
        Vec::new(),
        Vec::new(),
        cp,
    )?);
    d.writer_table(&k.writer, vec![y], wr)?;
    Ok(d.finish(&format!("{:?}", spec.op), 1, Vec::new(), Vec::new()))
}

/// The kernel sources of a step, named as its `kernels` names them.
pub(crate) fn sources(named: [(&str, String); 3]) -> BTreeMap<String, String> {
    named.into_iter().map(|(n, s)| (n.to_string(), s)).collect()
}

/// `name` under [`PREFIX`].
pub(crate) fn tensor(name: &str) -> String {
    format!("{PREFIX}{name}")
}
