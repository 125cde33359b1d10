//! The worker protocol as types: every request the runtime sends the ttnn worker
//! (`ttnn_worker.py`, `ttnn_graph.py`) and every answer it gets back. A graph's programs come
//! laid out (`program.rs`, lowered by `lower.rs`); the steps they are lowered from
//! (`graph_steps.rs`) are the builder's and never cross the boundary.
//!
//! Why types and a schema rather than `json!` literals: the worker reads its headers by key in
//! another language, so a renamed or misspelt key used to surface as a Python `KeyError` deep in
//! a program build (or, for an optional key read with `.get`, not at all). Here each message is
//! a struct; [`SCHEMA`] (`protocol.json`) describes the same messages once for the worker, which
//! checks every request it reads and every answer it writes against it (a mismatch is a
//! `schema` failure naming the key), and a test checks the schema against these types
//! (`protocol_tests.rs`). Answers are parsed with unknown fields refused, so a key the worker
//! adds or renames fails loudly on this side too.
//!
//! The wire frame itself is `worker.rs`'s; the request's `"op"` comes from [`WorkerOp::OP`].

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use super::registry::KernelSet;

/// The message schema the worker checks (`protocol.json`), shipped inside its source.
pub const SCHEMA: &str = include_str!("protocol.json");

/// The worker's ops, as the request's `"op"` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Open the device.
    Open,
    /// Write the arena's pages to device DRAM.
    Upload,
    /// Read a named device tensor back.
    Readback,
    /// Release a named device tensor.
    Free,
    /// Named device tensors kept for later graphs.
    Put,
    /// A sequence of programs over named device tensors.
    Graph,
    /// A kept graph run again.
    Replay,
    /// Close the device.
    Close,
}

impl Op {
    /// Every op, in the order `protocol.json` lists them.
    pub const ALL: [Op; 8] = [
        Op::Open,
        Op::Upload,
        Op::Readback,
        Op::Free,
        Op::Put,
        Op::Graph,
        Op::Replay,
        Op::Close,
    ];

    /// The name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Op::Open => "open",
            Op::Upload => "upload",
            Op::Readback => "readback",
            Op::Free => "free",
            Op::Put => "put",
            Op::Graph => "graph",
            Op::Replay => "replay",
            Op::Close => "close",
        }
    }

    /// Whether the op runs a device program (a `graph` or `replay` several); the others move
    /// data or manage the device.
    pub fn runs_program(self) -> bool {
        !matches!(
            self,
            Op::Open | Op::Upload | Op::Readback | Op::Free | Op::Put | Op::Close
        )
    }

    /// Whether the op boots the device (ttnn's import, the arena's upload): it gets the boot
    /// deadline.
    pub fn is_boot(self) -> bool {
        matches!(self, Op::Open | Op::Upload)
    }
}

/// A request of the worker protocol: its op and the answer it gets.
pub trait WorkerOp: Serialize {
    /// The request's `"op"`.
    const OP: Op;
    /// What the worker answers (without the envelope: [`Reply`]).
    type Answer: DeserializeOwned + AnswerRun;
}

/// What the runtime learns from an answer besides its own fields: the programs it ran.
pub trait AnswerRun {
    /// The graph run the answer reports (`graph`, a `replay` that ran), if any.
    fn run(&self) -> Option<&GraphRun> {
        None
    }
}

/// An answer with the envelope every successful answer carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply<A> {
    /// The op's own answer.
    pub answer: A,
    /// Bytes of task tables the op wrote to the device (host to device, like the payload).
    pub table_bytes: u64,
    /// Bytes of the request's header.
    pub request_bytes: u64,
}

/// Why the worker refused or failed a request (an answer's `"kind"` when `"ok"` is false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerFailure {
    /// The request did not match the schema (a key missing, unknown or of another type).
    Schema,
    /// The op raised (a ttnn or tt-metal exception, a shape the worker refuses).
    Op,
}

/// A dtype of a device activation tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActDtype {
    /// 32-bit float.
    F32,
    /// bfloat16.
    Bf16,
}

macro_rules! op {
    ($req:ty, $op:expr, $ans:ty) => {
        impl WorkerOp for $req {
            const OP: Op = $op;
            type Answer = $ans;
        }
    };
}

/// `open`: the device (`"sim"` or `"p150a"`, checked against `TT_METAL_SIMULATOR`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Open {
    /// `sim` or `p150a`.
    pub device: String,
}
op!(Open, Op::Open, super::backend::DeviceInfo);
impl AnswerRun for super::backend::DeviceInfo {}

/// `upload`: raw pages (the payload) as a named uint8 DRAM tensor, one page per row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upload {
    /// The tensor's name.
    pub name: String,
    /// Bytes per page.
    pub page_bytes: u64,
    /// Pages.
    pub pages: u64,
}
/// `upload`'s answer: the tensor as the device holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uploaded {
    /// Its DRAM address.
    pub address: u64,
    /// Its page size, as the device allocated it.
    pub page_bytes: u64,
    /// Its pages.
    pub pages: u64,
    /// Time taken, ms.
    pub ms: f64,
}
impl AnswerRun for Uploaded {}
op!(Upload, Op::Upload, Uploaded);

/// A request naming one device tensor (`readback`, `free`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Named {
    /// The tensor's name.
    pub name: String,
}
/// `readback`: a named tensor's bytes (the answer's payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Readback(pub Named);
op!(Readback, Op::Readback, Timed);
/// `free`: release a named tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Free(pub Named);
op!(Free, Op::Free, Empty);

/// `close`: close the device (the worker exits after answering).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Close {}
op!(Close, Op::Close, Empty);

/// An answer with nothing in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}
impl AnswerRun for Empty {}

/// An answer that says how long the op took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timed {
    /// Time taken, ms.
    pub ms: f64,
}
impl AnswerRun for Timed {}

/// A named device tensor and the values that fill it (the payload's next `real` values, each as
/// the tensor stores it: bf16, 2 bytes, or f32, 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorSpec {
    /// Its name (`c/…`, `o/…`, `a/…`, `t/…`: graph.rs).
    pub name: String,
    /// Rows (whole tiles).
    pub rows: usize,
    /// Columns (whole tiles).
    pub cols: usize,
    /// Its dtype.
    pub dtype: ActDtype,
    /// The values sent, `[rows, cols]`, when fewer (the worker zero-pads them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real: Option<[usize; 2]>,
    /// The tensor's row and column where the values sent start (default its first: `[0, 0]`):
    /// a row of its own put alone, the rest zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<[usize; 2]>,
}

/// `put`: named tensors kept for later graphs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Put {
    /// The tensors, their values in the payload in order.
    pub tensors: Vec<TensorSpec>,
}
op!(Put, Op::Put, Timed);

/// `graph`: a sequence of programs over named device tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Graph {
    /// Put first, their values in the payload.
    pub inputs: Vec<TensorSpec>,
    /// The programs, in order (the graph's steps lowered: `lower.rs`).
    pub programs: Vec<super::program::Program>,
    /// Read back: (name, real rows, real columns), f32, in order.
    pub outputs: Vec<(String, usize, usize)>,
    /// Released at the end (unless kept).
    pub free: Vec<String>,
    /// The kernel sources the steps name.
    pub sources: BTreeMap<String, String>,
    /// Kept for `replay` under this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<String>,
}
op!(Graph, Op::Graph, GraphRun);

/// `replay`: the graph kept under `name` run again over new inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    /// The kept graph.
    pub name: String,
    /// Its inputs (the same specs it was kept with), their values in the payload.
    pub inputs: Vec<TensorSpec>,
}
/// `replay`'s answer: whether it ran, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replayed {
    /// False: nothing ran (no such graph, other inputs, a tensor released); send it whole.
    pub replayed: bool,
    /// What ran, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<GraphRun>,
}
impl AnswerRun for Replayed {
    fn run(&self) -> Option<&GraphRun> {
        self.run.as_ref()
    }
}
op!(Replay, Op::Replay, Replayed);

/// A label's programs in one run: how many, their total and their slowest time (ms).
pub type LabelTimes = (u64, f64, f64);

/// One chain's phases as the worker ran them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainRun {
    /// Graph steps in the chain.
    pub steps: u64,
    /// Each phase's kind (`rows`, `attention`, `matmul`, `end`) and cores.
    pub phases: Vec<(String, u64)>,
}

/// What a `graph` (or a `replay` that ran) did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRun {
    /// Programs launched.
    pub programs: u64,
    /// Graph steps run.
    pub steps: u64,
    /// Each chain's phases.
    pub chains: Vec<ChainRun>,
    /// Per label: programs, total ms, slowest ms.
    pub by_label: BTreeMap<String, LabelTimes>,
    /// The whole op, ms.
    pub total_ms: f64,
    /// The worker's host share of it (building, putting, reading back), ms.
    pub host_ms: f64,
}
impl AnswerRun for GraphRun {
    fn run(&self) -> Option<&GraphRun> {
        Some(self)
    }
}

/// A request as its wire header: its fields and its `"op"`.
pub fn header<R: WorkerOp>(request: &R) -> Result<serde_json::Value, serde_json::Error> {
    let mut v = serde_json::to_value(request)?;
    match v.as_object_mut() {
        Some(o) => {
            o.insert("op".into(), serde_json::Value::String(R::OP.name().into()));
        }
        None => {
            return Err(serde::ser::Error::custom(format!(
                "request `{}` is not an object",
                R::OP.name()
            )));
        }
    }
    Ok(v)
}

/// A successful answer's body parsed as `A`, its envelope (`ok`, `table_bytes`,
/// `request_bytes`) taken off first; unknown or missing fields are errors.
pub fn parse_reply<A: DeserializeOwned>(answer: serde_json::Value) -> Result<Reply<A>, String> {
    let serde_json::Value::Object(mut o) = answer else {
        return Err("the answer is not an object".into());
    };
    o.remove("ok");
    let mut count = |k: &str| -> Result<u64, String> {
        o.remove(k)
            .ok_or_else(|| format!("the answer has no `{k}`"))?
            .as_u64()
            .ok_or_else(|| format!("the answer's `{k}` is not a count"))
    };
    let (table_bytes, request_bytes) = (count("table_bytes")?, count("request_bytes")?);
    let answer = serde_json::from_value(serde_json::Value::Object(o)).map_err(|e| e.to_string())?;
    Ok(Reply {
        answer,
        table_bytes,
        request_bytes,
    })
}

/// A request header as an error message carries it: kernel sources and other long strings
/// shortened to their length, the whole bounded.
pub fn summary(header: &serde_json::Value) -> String {
    fn short(v: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value as V;
        match v {
            V::String(s) if s.len() > 96 => V::String(format!("<{} chars>", s.len())),
            V::Array(a) => V::Array(a.iter().map(short).collect()),
            V::Object(o) => V::Object(o.iter().map(|(k, v)| (k.clone(), short(v))).collect()),
            other => other.clone(),
        }
    }
    let mut s = short(header).to_string();
    if s.len() > SUMMARY_CHARS {
        let cut = (0..=SUMMARY_CHARS)
            .rev()
            .find(|i| s.is_char_boundary(*i))
            .unwrap_or(0);
        s.truncate(cut);
        s.push_str(" …");
    }
    s
}

/// The most characters of a request an error keeps.
const SUMMARY_CHARS: usize = 2000;
