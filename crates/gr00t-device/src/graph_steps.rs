//! The steps of a graph as the builder makes them: what each program of a graph does, before
//! it is laid out. Built by `graph.rs`, packed into chains by `graph_pack.rs`, lowered to the
//! programs a `graph` request carries by `lower.rs` (only those cross to the worker).

use serde::{Deserialize, Serialize};
use tt_blackhole::plan::program::{PhaseGroup, StepCores};

use super::protocol::{ActDtype, KernelSet};

/// One step of a graph, one program (a chain's steps one program between them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GraphStep {
    /// A LayerNorm no matmul of the graph follows.
    Rows(RowsStep),
    /// An attention no matmul of the graph follows.
    Attention(AttentionStep),
    /// A column relayout (data movement only).
    Relayout(RelayoutStep),
    /// A matmul's end alone (the kernel tests' `bias_act`).
    Finish(FinishStep),
    /// A matmul and its end, before packing (the worker gets them in chains). Boxed: it is
    /// twice the size of the others.
    MatmulEnd(Box<MatmulEndStep>),
    /// Matmul-and-end steps as one program, with the plan's cores for every phase.
    Chain(ChainStep),
}

/// The LayerNorm or attention that makes a matmul's input, in the matmul's program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BeforeStep {
    /// A LayerNorm.
    Rows(RowsStep),
    /// Attention per head.
    Attention(AttentionStep),
}

impl BeforeStep {
    /// The tensor it writes.
    pub fn out(&self) -> &str {
        match self {
            BeforeStep::Rows(r) => &r.out,
            BeforeStep::Attention(a) => &a.out,
        }
    }

    /// Its label (the kind when it has none).
    pub fn label(&self) -> &str {
        match self {
            BeforeStep::Rows(r) => &r.label,
            BeforeStep::Attention(_) => "attention",
        }
    }

    /// The name of its kernels (phases with the same kernels share cores).
    pub fn group(&self) -> &str {
        match self {
            BeforeStep::Rows(r) => &r.group,
            BeforeStep::Attention(a) => &a.group,
        }
    }
}

impl RowsStep {
    /// The L1 its CBs take on each of its cores ([`rows_l1_bytes`]).
    pub fn l1_bytes(&self) -> usize {
        rows_l1_bytes(self.wt, &self.work_cbs, self.out_f32)
    }
}

/// The L1 a row kernel's CBs take on each of its cores, as the worker sizes them: the x CB
/// (`wt` fp32 tiles, unless a work CB of the same index sizes it), the scaler tile, two output
/// tiles, the work CBs (fp32). The whole-row kernels hold whole rows: a wide norm outgrows L1.
pub fn rows_l1_bytes(wt: usize, work_cbs: &[(u8, usize)], out_f32: bool) -> usize {
    const F32: usize = 4096;
    let x_id = super::registry::cb_id("reader_rows.cpp", "cb_x");
    let x = if work_cbs.iter().any(|(id, _)| *id == x_id) {
        0
    } else {
        wt
    };
    let work: usize = work_cbs.iter().map(|(_, pages)| pages).sum();
    let out = if out_f32 { F32 } else { F32 / 2 };
    (x + 1 + work) * F32 + 2 * out
}

/// A LayerNorm over `row_tiles` tile rows of `wt` tiles (our `layernorm_rows.cpp`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowsStep {
    /// The fp32 input.
    pub x: String,
    /// The reduce scaler tile.
    pub scaler: String,
    /// The per-column scale's tensor.
    pub g: String,
    /// The per-column shift's tensor.
    pub b: String,
    /// The column of `b`'s row 0 its shift starts at (the AdaLN `[scale | shift]` row).
    pub b_col: usize,
    /// The vectors' real columns.
    pub vec_len: usize,
    /// The output (allocated by the worker).
    pub out: String,
    /// Whether the output is fp32 (else bf16).
    pub out_f32: bool,
    /// Tiles per row.
    pub wt: usize,
    /// Tile rows.
    pub row_tiles: usize,
    /// Tiles of each vector.
    pub vec_tiles: usize,
    /// Its program's label.
    pub label: String,
    /// The fp32 work CBs: (CB id, pages).
    pub work_cbs: Vec<(u8, usize)>,
    /// The CBs unpacked straight to the fp32 DST.
    pub unpack_to_dest: Vec<u8>,
    /// Cores it shares its rows over.
    pub cores: usize,
    /// Its kernels' name.
    pub group: String,
    /// Names of its kernels in the graph's sources.
    pub kernels: KernelSet,
}

/// Attention per head (our `attention_head.cpp`). Read through [`AttentionStepJson`]: a step
/// without `kv_heads` (or `causal`) is one of every head its own K and V (and not causal), as
/// before those keys were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "AttentionStepJson")]
pub struct AttentionStep {
    /// Queries `[mp, heads·hd]`.
    pub q: String,
    /// Keys `[np, kv_heads·hd]`.
    pub k: String,
    /// Values `[np, kv_heads·hd]`.
    pub v: String,
    /// The reduce scaler tile.
    pub scaler: String,
    /// The key mask row.
    pub mask: String,
    /// The output (allocated by the worker).
    pub out: String,
    /// Heads (query heads).
    pub heads: usize,
    /// K/V heads (grouped-query attention: query head h reads K/V head h / (heads / kv_heads));
    /// divides `heads`. `heads`: every head its own.
    pub kv_heads: usize,
    /// Query row i attends key rows j <= i only (a prompt's self attention), besides the mask.
    pub causal: bool,
    /// Query rows (whole tiles).
    pub mp: usize,
    /// Key rows (whole tiles).
    pub np: usize,
    /// Columns per head.
    pub hd: usize,
    /// Cores it shares its heads over.
    pub cores: usize,
    /// Its kernels' name (self, text and image attentions differ in their CBs).
    pub group: String,
    /// Names of its kernels in the graph's sources.
    pub kernels: KernelSet,
}

/// [`AttentionStep`] as a message holds it: `kv_heads` and `causal` may be left out (serde's
/// field defaults cannot name another field, hence this type: `kv_heads` defaults to `heads`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttentionStepJson {
    q: String,
    k: String,
    v: String,
    scaler: String,
    mask: String,
    out: String,
    heads: usize,
    #[serde(default)]
    kv_heads: Option<usize>,
    #[serde(default)]
    causal: bool,
    mp: usize,
    np: usize,
    hd: usize,
    cores: usize,
    group: String,
    kernels: KernelSet,
}

impl From<AttentionStepJson> for AttentionStep {
    fn from(j: AttentionStepJson) -> Self {
        AttentionStep {
            q: j.q,
            k: j.k,
            v: j.v,
            scaler: j.scaler,
            mask: j.mask,
            out: j.out,
            heads: j.heads,
            kv_heads: j.kv_heads.unwrap_or(j.heads),
            causal: j.causal,
            mp: j.mp,
            np: j.np,
            hd: j.hd,
            cores: j.cores,
            group: j.group,
            kernels: j.kernels,
        }
    }
}

/// Segments of columns from `src` to `dst` (our `relayout_tiles.cpp`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayoutStep {
    /// The source tensor.
    pub src: String,
    /// The destination (allocated by the worker).
    pub dst: String,
    /// Tile rows.
    pub rows: usize,
    /// The source's tiles per row.
    pub src_w: usize,
    /// The destination's.
    pub dst_w: usize,
    /// Both tensors' dtype.
    pub dtype: ActDtype,
    /// The segment progressions (see the kernel).
    pub progs: Vec<Vec<usize>>,
    /// The widest segment's tiles plus one (the staging CB).
    pub span: usize,
    /// Cores it shares its rows over.
    pub cores: usize,
    /// The kernel's name in the graph's sources.
    pub kernel: String,
    /// Its program's label (default: `relayout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A graph's independent matmuls, one program's phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulGroup {
    /// The arena, dtypes, kernels.
    #[serde(flatten)]
    pub shared: MatmulShared,
    /// The matmuls, each with its `act` and `out`.
    pub jobs: Vec<MatmulJob>,
}

/// One matmul's end: its K pieces summed, the bias, bf16, GELU or the residual add.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinishJob {
    /// The partials.
    pub x: String,
    /// The bias tile row.
    pub bias: String,
    /// The output (allocated by the worker).
    pub out: String,
    /// Tile rows.
    pub mt: usize,
    /// Tile columns.
    pub nt: usize,
    /// K pieces.
    pub k_split: usize,
    /// The fp32 stream to add, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub res: Option<String>,
    /// The output tensor's tile rows when it holds more than the `mt` this end writes (the
    /// action head's token tensor: the actions' rows written here, the state's row below them
    /// written by the state encoder and kept); `None`: `mt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_rows: Option<usize>,
    /// The output tensor's tile row the end's first tile row goes to (0: its first): one
    /// camera's image rows among every camera's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub out_row0: usize,
}

fn is_zero(v: &usize) -> bool {
    *v == 0
}

/// The ends of a group of matmuls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinishStep {
    /// One per matmul.
    pub jobs: Vec<FinishJob>,
    /// Whether the outputs are fp32.
    pub out_f32: bool,
    /// Output tiles per unit.
    pub unit_tiles: usize,
    /// Its kernels' name.
    pub group: String,
    /// Names of its kernels in the graph's sources.
    pub kernels: KernelSet,
    /// Alone ([`GraphStep::Finish`]): the cores its units are cut for (in a chain the plan's
    /// `end_cut` says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<usize>,
}

/// A matmul, its end and the step that makes its input when it is the one before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatmulEndStep {
    /// The LayerNorm or attention before it, in its program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<BeforeStep>,
    /// The matmuls.
    pub matmul: MatmulGroup,
    /// Their ends.
    pub finish: FinishStep,
    /// Its label.
    pub label: String,
}

/// Matmul-and-end steps as ONE program, the cores of every phase as the plan packed them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainStep {
    /// The steps, in order.
    pub steps: Vec<MatmulEndStep>,
    /// Each step's cores.
    pub cores: Vec<StepCores>,
    /// The program's phase groups.
    pub groups: Vec<PhaseGroup>,
    /// Its program's label.
    pub label: String,
}

impl GraphStep {
    /// The tensors the step (and those inside it) writes.
    pub fn outputs(&self) -> Vec<&str> {
        fn end(s: &MatmulEndStep) -> impl Iterator<Item = &str> {
            s.before
                .iter()
                .map(BeforeStep::out)
                .chain(s.matmul.jobs.iter().filter_map(|j| j.out.as_deref()))
                .chain(s.finish.jobs.iter().map(|j| j.out.as_str()))
        }
        match self {
            GraphStep::Rows(r) => vec![&r.out],
            GraphStep::Attention(a) => vec![&a.out],
            GraphStep::Relayout(r) => vec![&r.dst],
            GraphStep::Finish(f) => f.jobs.iter().map(|j| j.out.as_str()).collect(),
            GraphStep::MatmulEnd(s) => end(s).collect(),
            GraphStep::Chain(c) => c.steps.iter().flat_map(end).collect(),
        }
    }
}

/// One work unit of a matmul on one core (the plan's split).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatmulUnit {
    /// The core's logical x.
    pub x: usize,
    /// The core's logical y.
    pub y: usize,
    /// The unit's first weight tile in the arena.
    pub first_tile: usize,
    /// First output tile column.
    pub n_start: usize,
    /// Output tile columns.
    pub n_count: usize,
    /// First K tile.
    pub k_start: usize,
    /// K tiles.
    pub k_count: usize,
    /// Its K piece (the partials it writes).
    pub piece: usize,
}

/// Pages of a matmul core's CBs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatmulCbs {
    /// The activation CB.
    pub act: usize,
    /// The weight CB.
    pub weights: usize,
    /// The partials CB.
    pub out: usize,
}

/// What every matmul job of one program shares: the arena, its dtype, the fidelity, the
/// kernels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulShared {
    /// The arena tensor's name.
    pub arena: String,
    /// The weight tiles' dtype (`bfp8_b`, `bfp4_b`, `bf16`).
    pub weight_dtype: String,
    /// Bytes per weight tile.
    pub weight_page: u64,
    /// `LoFi`, `HiFi2`, ...: the roofline's.
    pub math_fidelity: String,
    /// The kernels (sources, or names of a graph's `sources`).
    pub kernels: KernelSet,
}

/// One matmul: the activation's shape, the weight's tiles, the plan's units and CBs; in a
/// graph also its input and output tensors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatmulJob {
    /// The activation's real rows.
    pub m: usize,
    /// Its tile rows.
    pub mt: usize,
    /// The weight's K.
    pub k: usize,
    /// Its K tiles.
    pub kt: usize,
    /// Its N tiles.
    pub nt: usize,
    /// K pieces (partials summed by the end).
    pub k_split: usize,
    /// The units, one per core.
    pub units: Vec<MatmulUnit>,
    /// The CBs' pages.
    pub cbs: MatmulCbs,
    /// In a graph: the activation tensor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<String>,
    /// In a graph: the partials tensor (allocated by the worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
}
