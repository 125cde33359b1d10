//! The core plan for the Blackhole p150a worker grid (11x10 = 110 Tensix cores on firmware
//! ≥ 19.5): which core does what, how every DiT weight is divided, the circular buffers and
//! the L1 they take, and each core's runtime args. Plain serde data: `serde_json` prints it.
//!
//! Roles (110 cores), each one the kernels play:
//! * 96 compute cores (x = 1..10, row-major from y = 0): the matmul shares. On each, a reader
//!   streams the core's share of every weight straight from the arena in DRAM
//!   (`reader_share.cpp`), `matmul_share.cpp` multiplies, `writer_partials.cpp` writes the fp32
//!   partials; in a program of several steps the core walks every matmul job of them in turn.
//! * 14 phase cores (column 0 and the last four of row 9): the LayerNorms, the attention and
//!   the matmul ends, shared out per program by [`program`] to its phase groups (a core runs one
//!   group's kernels over each of its phases), from the grid's last row backwards.
//!   On a larger grid (the simulator's 13 × 10) its other cores join them.
//!
//! The step's host side (the timestep embedding and SiLU, the Euler update between steps) is
//! not a core's role: only the step's tokens and SiLU(temb) go in and its output comes back.

pub mod program;
pub mod roofline;
pub mod stages;

use serde::{Deserialize, Serialize};

use crate::arena::layout::{ArenaIndex, arena_layout};
use crate::dims::{DitDims, WeightKind};
use crate::format::{ArenaDtype, DataFormat};
use crate::split::{MatmulSplit, split_matmul};
use crate::tile::tile_grid;

/// Worker grid in tt-metal logical coordinates.
pub const GRID_X: usize = 11;
/// Rows of the worker grid (see [`GRID_X`]).
pub const GRID_Y: usize = 10;
/// Cores that run matmuls and attention (the arena is split for exactly this many).
pub const COMPUTE_CORES: usize = crate::arena::layout::COMPUTE_CORES;
/// L1 per Tensix core.
pub const L1_BYTES: usize = 1536 * 1024;
/// Kept back for kernel binaries, runtime args and the firmware mailboxes.
pub const KERNEL_CONFIG_CUT: usize = 64 * 1024;
/// L1 a core's circular buffers may use: [`L1_BYTES`] minus [`KERNEL_CONFIG_CUT`].
pub const L1_BUDGET: usize = L1_BYTES - KERNEL_CONFIG_CUT;

/// What a core does: a role a kernel plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "role")]
pub enum CoreRole {
    /// Matmul shares: its reader streams the core's share of each weight from the arena in
    /// DRAM, its compute kernel multiplies, its writer writes the fp32 partials.
    Compute {
        /// Compute-core index (`0..COMPUTE_CORES`), the `core` of its
        /// [`WorkUnit`](crate::split::WorkUnit)s.
        index: usize,
    },
    /// LayerNorms, attention and matmul ends, shared out per program to its phase groups
    /// ([`program`]); its circular buffers are its group's, set per program.
    Phase,
}

/// One circular buffer on one core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircularBuffer {
    /// Circular-buffer index on the core (the CB id the kernels use).
    pub id: u8,
    /// What the buffer holds (`weights`, `act_in`, `attn_kv`, …), for reports and errors.
    pub name: String,
    /// Tile format of its pages.
    pub format: DataFormat,
    /// Bytes of one page: one tile in `format`.
    pub page_bytes: usize,
    /// Pages (tiles) the buffer holds.
    pub pages: usize,
    /// L1 bytes it takes: `page_bytes * pages`.
    pub total_bytes: usize,
}

impl CircularBuffer {
    fn new(id: u8, name: &str, format: DataFormat, pages: usize) -> Self {
        let page_bytes = format.tile_bytes();
        CircularBuffer {
            id,
            name: name.to_string(),
            format,
            page_bytes,
            pages,
            total_bytes: page_bytes * pages,
        }
    }
}

/// One named number of a core's share (e.g. `q_cross.n_start`): what the plan cut, for reports
/// and tests. The kernels do not read these: each program's matmul jobs carry the units
/// (`gr00t-runtime`'s `MatmulUnit`) and the worker writes them into the task tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arg {
    /// Name the plan and tests look the value up by.
    pub name: String,
    /// The value.
    pub value: u32,
}

/// Everything about one core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorePlan {
    /// Grid column (tt-metal logical coordinates).
    pub x: usize,
    /// Grid row (tt-metal logical coordinates).
    pub y: usize,
    /// What the core does.
    pub role: CoreRole,
    /// Its circular buffers, by CB id.
    pub cbs: Vec<CircularBuffer>,
    /// L1 the circular buffers take in total; at most [`L1_BUDGET`].
    pub l1_bytes: usize,
    /// The core's share of every weight class, by name (the plan's cut as numbers; no kernel's
    /// argument list: see [`Arg`]).
    pub share: Vec<Arg>,
}

impl CorePlan {
    /// A named number of the core's share.
    pub fn share(&self, name: &str) -> Option<u32> {
        self.share.iter().find(|a| a.name == name).map(|a| a.value)
    }
}

/// A weight class: the kind plus whether its block is a cross block (K/V shapes differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightClass {
    /// Which of the block's seven weights.
    pub kind: WeightKind,
    /// Whether the block cross-attends (even block index).
    pub cross: bool,
}

impl WeightClass {
    /// The fourteen classes (seven kinds in cross and in self blocks), in arg order. Shapes
    /// differ only for K and V, but every offset after V differs, so all kinds come twice.
    pub fn all() -> Vec<WeightClass> {
        [true, false]
            .into_iter()
            .flat_map(|cross| {
                WeightKind::STREAM_ORDER
                    .into_iter()
                    .map(move |kind| WeightClass { kind, cross })
            })
            .collect()
    }

    /// The class of a block's weight.
    pub fn of(block: usize, kind: WeightKind) -> Self {
        WeightClass {
            kind,
            cross: DitDims::is_cross(block),
        }
    }

    /// Arg-name prefix: the kind's snake_case name plus `_cross` or `_self` (e.g. `ff_up_self`).
    pub fn label(&self) -> String {
        let k = serde_json::to_value(self.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        format!("{k}_{}", if self.cross { "cross" } else { "self" })
    }
}

/// How one weight class is divided, and where it sits inside its block's arena range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassPlan {
    /// The weight class this entry plans.
    pub class: WeightClass,
    /// [`WeightClass::label`], the prefix of this class's runtime args.
    pub label: String,
    /// Activation rows (tokens) the matmul multiplies: 1 for AdaLN (temb), the context length
    /// for cross K/V, the 51 state+action tokens otherwise.
    pub m_tokens: usize,
    /// Tile offset of this weight from the start of its block in the arena.
    pub offset_in_block: usize,
    /// How the weight's tiles are divided among the compute cores.
    pub split: MatmulSplit,
}

/// One op of the per-step schedule (the same 32-block sequence every Euler step).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum StepOp {
    /// A matmul on the compute cores, its end (K pieces, bias, GELU or the residual add) on
    /// phase cores.
    Matmul {
        /// Block index.
        block: usize,
        /// Which of the block's weights is multiplied.
        weight: WeightKind,
        /// Activation rows (tokens) multiplied by the weight.
        m_tokens: usize,
    },
    /// LayerNorm over D (the AdaLN-modulated `norm1`, the plain `norm3`) on phase cores, a run
    /// of tile rows each.
    LayerNorm {
        /// Block index.
        block: usize,
        /// Which of the block's norms: 1 (`norm1`, before attention) or 3 (`norm3`, before
        /// the feed-forward).
        which: u8,
    },
    /// Attention per head (QKᵀ, the masked softmax, ·V) on phase cores, a run of heads each.
    Attention {
        /// Block index.
        block: usize,
        /// Whether the keys/values come from the VL context (cross block) or the tokens themselves.
        cross: bool,
        /// Key/value rows: the context length in cross blocks, `sa_tokens` otherwise.
        kv_tokens: usize,
    },
    /// Residual add into the fp32 token stream, done by the end of the matmul before it.
    Residual {
        /// Block index.
        block: usize,
        /// 1: after attention; 2: after the feed-forward.
        which: u8,
    },
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MegakernelPlan {
    /// `[GRID_X, GRID_Y]`.
    pub grid: [usize; 2],
    /// L1 per core ([`L1_BYTES`]).
    pub l1_bytes: usize,
    /// L1 the circular buffers may use per core ([`L1_BUDGET`]).
    pub l1_budget: usize,
    /// The DiT dimensions the plan was cut for.
    pub dims: DitDims,
    /// Storage format of the arena the readers stream.
    pub dtype: ArenaDtype,
    /// Tiles in the whole arena.
    pub arena_tiles: u64,
    /// Bytes of the whole arena (streamed once per step).
    pub arena_bytes: u64,
    /// Weight tiles of one cross block (its arena range length).
    pub cross_block_tiles: usize,
    /// Weight tiles of one self-attention block.
    pub self_block_tiles: usize,
    /// One entry per [`WeightClass`], in [`WeightClass::all`] order.
    pub classes: Vec<ClassPlan>,
    /// The ops of one denoise step, in execution order.
    pub schedule: Vec<StepOp>,
    /// Every core of the grid: column 0 top to bottom, then the other columns row by row.
    pub cores: Vec<CorePlan>,
}

/// The plan does not fit the card.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    /// A core's circular buffers need more L1 than [`L1_BUDGET`].
    #[error(
        "core ({x},{y}) [{role}] needs {needed} B of L1 but the budget is {budget} B \
         (1.5 MiB minus the 64 KiB kernel-config cut); largest buffer: {largest}"
    )]
    L1Overflow {
        /// Grid column of the core.
        x: usize,
        /// Grid row of the core.
        y: usize,
        /// Its [`CoreRole`], debug-printed.
        role: String,
        /// Bytes its circular buffers need.
        needed: usize,
        /// Bytes allowed ([`L1_BUDGET`]).
        budget: usize,
        /// The biggest buffer, as `name = bytes B`.
        largest: String,
    },
    /// The dimensions have zero blocks.
    #[error("DiT config has no blocks")]
    Empty,
}

fn arg(name: impl Into<String>, value: usize) -> Arg {
    Arg {
        name: name.into(),
        value: value as u32,
    }
}

/// Grid position of each role (see the module docs): column 0 top to bottom, then the other
/// columns row by row.
pub fn core_roles() -> Vec<(usize, usize, CoreRole)> {
    let mut v: Vec<_> = (0..GRID_Y).map(|y| (0, y, CoreRole::Phase)).collect();
    for i in 0..GRID_Y * (GRID_X - 1) {
        let (x, y) = compute_coord(i);
        let role = if i < COMPUTE_CORES {
            CoreRole::Compute { index: i }
        } else {
            CoreRole::Phase
        };
        v.push((x, y, role));
    }
    v
}

/// Compute core `index` → its grid coordinates.
pub fn compute_coord(index: usize) -> (usize, usize) {
    (1 + index % (GRID_X - 1), index / (GRID_X - 1))
}

/// Build the plan for `dims` with the arena in `dtype`.
pub fn build_plan(dims: &DitDims, dtype: ArenaDtype) -> Result<MegakernelPlan, PlanError> {
    if dims.num_layers == 0 {
        return Err(PlanError::Empty);
    }
    let arena: ArenaIndex = arena_layout(dims, dtype);
    let wfmt = dtype.format();

    // Class splits and their tile offsets inside a block (cumulative in stream order).
    let mut classes = Vec::new();
    let (mut cross_block_tiles, mut self_block_tiles) = (0, 0);
    for class in WeightClass::all() {
        let [out, inp] = dims.torch_shape(if class.cross { 0 } else { 1 }, class.kind);
        let (kt, nt) = tile_grid(inp, out);
        let acc = if class.cross {
            &mut cross_block_tiles
        } else {
            &mut self_block_tiles
        };
        let offset_in_block = *acc;
        *acc += kt * nt;
        let m_tokens = match (class.kind, class.cross) {
            (WeightKind::AdaNorm, _) => 1,
            (WeightKind::K | WeightKind::V, true) => dims.ctx_tokens,
            _ => dims.sa_tokens,
        };
        let split = split_matmul(kt, nt, COMPUTE_CORES);
        classes.push(ClassPlan {
            class,
            label: class.label(),
            m_tokens,
            offset_in_block,
            split,
        });
    }

    let schedule = step_schedule(dims);
    let mut cores = Vec::new();
    for (x, y, role) in core_roles() {
        let (cbs, share) = match role {
            CoreRole::Compute { index } => compute_core(
                index,
                dims,
                &classes,
                wfmt,
                cross_block_tiles,
                self_block_tiles,
            ),
            CoreRole::Phase => (Vec::new(), Vec::new()),
        };
        let l1_bytes = cbs.iter().map(|c| c.total_bytes).sum();
        if l1_bytes > L1_BUDGET {
            let largest = cbs
                .iter()
                .max_by_key(|c| c.total_bytes)
                .map(|c| format!("{} = {} B", c.name, c.total_bytes))
                .unwrap_or_default();
            return Err(PlanError::L1Overflow {
                x,
                y,
                role: format!("{role:?}"),
                needed: l1_bytes,
                budget: L1_BUDGET,
                largest,
            });
        }
        cores.push(CorePlan {
            x,
            y,
            role,
            cbs,
            l1_bytes,
            share,
        });
    }
    Ok(MegakernelPlan {
        grid: [GRID_X, GRID_Y],
        l1_bytes: L1_BYTES,
        l1_budget: L1_BUDGET,
        dims: *dims,
        dtype,
        arena_tiles: arena.total_tiles,
        arena_bytes: arena.total_bytes,
        cross_block_tiles,
        self_block_tiles,
        classes,
        schedule,
        cores,
    })
}

/// Arena tile index where block `b` starts (even blocks are cross blocks).
pub fn block_base(b: usize, cross_block_tiles: usize, self_block_tiles: usize) -> usize {
    (b / 2) * (cross_block_tiles + self_block_tiles) + (b % 2) * cross_block_tiles
}

fn step_schedule(dims: &DitDims) -> Vec<StepOp> {
    let mut s = Vec::new();
    for block in 0..dims.num_layers {
        let cross = DitDims::is_cross(block);
        let kv_tokens = if cross {
            dims.ctx_tokens
        } else {
            dims.sa_tokens
        };
        let mm = |weight, m_tokens| StepOp::Matmul {
            block,
            weight,
            m_tokens,
        };
        s.push(mm(WeightKind::AdaNorm, 1));
        s.push(StepOp::LayerNorm { block, which: 1 });
        s.push(mm(WeightKind::Q, dims.sa_tokens));
        s.push(mm(WeightKind::K, kv_tokens));
        s.push(mm(WeightKind::V, kv_tokens));
        s.push(StepOp::Attention {
            block,
            cross,
            kv_tokens,
        });
        s.push(mm(WeightKind::Out, dims.sa_tokens));
        s.push(StepOp::Residual { block, which: 1 });
        s.push(StepOp::LayerNorm { block, which: 3 });
        s.push(mm(WeightKind::FfUp, dims.sa_tokens));
        s.push(mm(WeightKind::FfDown, dims.sa_tokens));
        s.push(StepOp::Residual { block, which: 2 });
    }
    s
}

#[allow(clippy::too_many_arguments)]
fn compute_core(
    index: usize,
    dims: &DitDims,
    classes: &[ClassPlan],
    wfmt: DataFormat,
    cross_block_tiles: usize,
    self_block_tiles: usize,
) -> (Vec<CircularBuffer>, Vec<Arg>) {
    let mut args = vec![
        arg("compute_index", index),
        arg("num_layers", dims.num_layers),
        arg("cross_block_tiles", cross_block_tiles),
        arg("self_block_tiles", self_block_tiles),
    ];
    let (mut act_pages, mut w_pages, mut out_pages) = (0, 0, 0);
    for c in classes {
        let l = &c.label;
        let unit = c.split.units.iter().find(|u| u.core == index);
        let (ns, nc, ks, kc, ft) = unit.map_or((0, 0, 0, 0, 0), |u| {
            (u.n_start, u.n_count, u.k_start, u.k_count, u.first_tile)
        });
        args.push(arg(format!("{l}.offset_in_block"), c.offset_in_block));
        args.push(arg(format!("{l}.first_tile"), ft));
        args.push(arg(format!("{l}.n_start"), ns));
        args.push(arg(format!("{l}.n_count"), nc));
        args.push(arg(format!("{l}.k_start"), ks));
        args.push(arg(format!("{l}.k_count"), kc));
        args.push(arg(format!("{l}.k_split"), c.split.k_split));
        let m_rows = c.m_tokens.max(1).div_ceil(32);
        act_pages = act_pages.max(m_rows * kc);
        w_pages = w_pages.max(2 * kc);
        out_pages = out_pages.max(m_rows * nc);
    }
    // What the matmul program allocates on the core (the device backend sizes its CBs from
    // these): the activation's K slice, the weight strip double-buffered, the fp32 partials.
    let cbs = vec![
        CircularBuffer::new(0, "act_in", DataFormat::Float16B, act_pages),
        CircularBuffer::new(1, "weights", wfmt, w_pages),
        CircularBuffer::new(2, "partials_f32", DataFormat::Float32, out_pages),
    ];
    (cbs, args)
}

impl MegakernelPlan {
    /// The plan of `kind` for `block` (cross or self class by the block's parity).
    pub fn class(&self, block: usize, kind: WeightKind) -> &ClassPlan {
        let c = WeightClass::of(block, kind);
        // `classes` holds every class, so the lookup cannot fail.
        self.classes
            .iter()
            .find(|p| p.class == c)
            .unwrap_or(&self.classes[0])
    }

    /// Arena tile index where block `b` starts.
    pub fn block_base(&self, b: usize) -> usize {
        block_base(b, self.cross_block_tiles, self.self_block_tiles)
    }

    /// The plan as pretty-printed JSON (empty if serialization fails, which plain data does not).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
