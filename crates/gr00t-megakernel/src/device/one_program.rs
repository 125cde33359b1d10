//! One of our programs run alone, as a `graph` of one step: what the kernel tests do with a
//! LayerNorm, a softmax or an attention (`rows.rs`, `attention.rs`). The worker has no op of
//! its own for each: the inputs go in as named tensors laid out here (padding, the vectors'
//! tiles, the scaler), the step is the one a denoising step's graph holds, and the output comes
//! back read as f32; the worker only puts, launches and reads back.

use std::collections::BTreeMap;

use super::protocol::{ActDtype, Graph, GraphStep, TensorSpec};
use super::sfpu::{EltwiseRun, SfpuError};
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
/// is the answer's `program_ms`).
pub(crate) fn run(
    worker: &mut TtnnWorker,
    inputs: Inputs,
    step: GraphStep,
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
        steps: vec![step],
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

/// The kernel sources of a step, named as its `kernels` names them.
pub(crate) fn sources(named: [(&str, String); 3]) -> BTreeMap<String, String> {
    named.into_iter().map(|(n, s)| (n.to_string(), s)).collect()
}

/// `name` under [`PREFIX`].
pub(crate) fn tensor(name: &str) -> String {
    format!("{PREFIX}{name}")
}
