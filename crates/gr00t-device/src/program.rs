//! One device program as the worker launches it: every kernel with its cores, compile-time
//! args and per-core words (task tables or runtime args), every CB and semaphore, the tensors
//! it names. Built on this side from the graph's steps and the plan (`lower.rs`); the worker
//! (`ttnn_graph.py`) only resolves what it alone knows, a tensor's DRAM address and a core's
//! NOC coordinates, where the words say, and launches.

use serde::{Deserialize, Serialize};
use tt_blackhole::plan::program::Core;

use super::protocol::ActDtype;

/// One program of a `graph` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Program {
    /// Its label (its time is counted under it; its deadline is derived from it).
    pub label: String,
    /// The graph steps it runs (a chain's several, else 1).
    pub steps: usize,
    /// A chain's phases, in order: each one's kind (`rows`, `attention`, `matmul`, `end`) and
    /// cores; empty for a program of one step. The worker reports them as what ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<(String, u64)>,
    /// The tensors its words and accessors name, resolved by the worker in this order.
    pub tensors: Vec<ProgramTensor>,
    /// Its kernels.
    pub kernels: Vec<ProgramKernel>,
    /// Its circular buffers (the task tables' among them).
    pub cbs: Vec<CbSpec>,
    /// Its semaphores, by id: each one's cores (starting at 0).
    pub semaphores: Vec<Vec<Core>>,
}

/// A tensor a program names: the one the worker holds under `name` when the program is
/// built, or with `alloc` one it allocates under that name first (the one of that name when
/// it is alike, else a new one; the one it replaces is released after the launch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramTensor {
    /// Its name.
    pub name: String,
    /// The tensor to allocate: `(rows, cols, dtype)`, whole tiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc: Option<(usize, usize, ActDtype)>,
}

/// What a kernel is, as tt-metal configures it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum KernelConfig {
    /// A data-movement kernel on RISC-V 1 (NOC 0).
    Reader,
    /// A data-movement kernel on RISC-V 0 (NOC 1).
    Writer,
    /// The compute kernel: fp32 DST always.
    Compute {
        /// `HiFi4`, `LoFi`, ...
        fidelity: String,
        /// The CBs unpacked straight to the fp32 DST.
        unpack_to_dest: Vec<u8>,
    },
}

/// One kernel of a program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramKernel {
    /// Its source's name in the graph's `sources`.
    pub source: String,
    /// Reader, writer or compute.
    pub config: KernelConfig,
    /// The tensors (indices into the program's) whose accessor args open its compile-time
    /// args, in order (after a task table's own).
    pub accessors: Vec<usize>,
    /// The compile-time args after them.
    pub compile_args: Vec<u32>,
    /// `Some(width)`: its words are a task table, a row of `width` words a core in a uint32
    /// DRAM tensor, its runtime args `[table address, row]`; `None`: its words are its runtime
    /// args.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_width: Option<usize>,
    /// Its cores, each with its words (a table's rows in this order).
    pub cores: Vec<CoreWords>,
}

/// One core's words of a kernel: literal words, and where the worker writes what only it
/// knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreWords {
    /// The core (logical coordinates).
    pub core: Core,
    /// The words, 0 where the worker writes.
    pub words: Vec<u32>,
    /// `(word, tensor)`: the word holds the tensor's DRAM address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addrs: Vec<(usize, usize)>,
    /// `(word, x, y)`: the word holds the NOC coordinates of logical core `(x, y)`, `x | y << 16`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nocs: Vec<(usize, usize, usize)>,
}

/// A CB's page format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CbFormat {
    /// 32-bit float.
    F32,
    /// bfloat16.
    Bf16,
    /// Block float, 8-bit mantissas.
    Bfp8B,
    /// Block float, 4-bit mantissas.
    Bfp4B,
    /// Task-table words.
    Uint32,
}

impl CbFormat {
    /// The format of a weight dtype's tiles (`bfp8_b`, `bfp4_b`, `bf16`).
    pub fn of_weight(dtype: &str) -> Option<CbFormat> {
        match dtype {
            "bfp8_b" => Some(CbFormat::Bfp8B),
            "bfp4_b" => Some(CbFormat::Bfp4B),
            "bf16" => Some(CbFormat::Bf16),
            _ => None,
        }
    }
}

/// A circular buffer on a kernel's cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CbSpec {
    /// Its index (the registry's id).
    pub index: u8,
    /// Its pages' format.
    pub format: CbFormat,
    /// Bytes a page.
    pub page: usize,
    /// Pages.
    pub pages: usize,
    /// Its cores.
    pub cores: Vec<Core>,
}

/// A word being built: literal words and the places the worker fills.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Words {
    pub words: Vec<u32>,
    pub addrs: Vec<(usize, usize)>,
    pub nocs: Vec<(usize, usize, usize)>,
}

impl Words {
    /// A literal word (`v` must fit 32 bits: [`word`]).
    pub fn lit(&mut self, v: u32) -> &mut Self {
        self.words.push(v);
        self
    }

    /// A tensor's DRAM address.
    pub fn addr(&mut self, tensor: usize) -> &mut Self {
        self.addrs.push((self.words.len(), tensor));
        self.words.push(0);
        self
    }

    /// A logical core's NOC coordinates.
    pub fn noc(&mut self, (x, y): Core) -> &mut Self {
        self.nocs.push((self.words.len(), x, y));
        self.words.push(0);
        self
    }

    /// `other`'s words after these.
    pub fn append(&mut self, other: &Words) -> &mut Self {
        let at = self.words.len();
        self.words.extend_from_slice(&other.words);
        self.addrs
            .extend(other.addrs.iter().map(|&(i, t)| (i + at, t)));
        self.nocs
            .extend(other.nocs.iter().map(|&(i, x, y)| (i + at, x, y)));
        self
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// These words as `core`'s.
    pub fn on(self, core: Core) -> CoreWords {
        CoreWords {
            core,
            words: self.words,
            addrs: self.addrs,
            nocs: self.nocs,
        }
    }
}
