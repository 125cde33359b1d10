//! The kernel registry: our device kernels as values, the one source of the ids the kernels
//! and the programs share. Per kernel its source file, the role it plays in a program, its
//! circular buffers (id and name) and whether it reads a task table (and into which CB). The
//! programs take their CB ids from here (`lower.rs`: the worker knows none); a kernel names its
//! CBs and the host pastes their ids in ([`with_cb_ids`], at the kernel's `//@@GR00T_CB_IDS <file>@@` line), except the few
//! kernels a program takes as they are, which declare the ids themselves (`registry_tests.rs`
//! checks those declarations, and every kernel's use of CB names, against the registry).

use serde::{Deserialize, Serialize};

/// The three kernels of a program kind: sources, or the names of a graph's `sources`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSet {
    /// The data-movement kernel that reads (NOC 0).
    pub reader: String,
    /// The compute kernel.
    pub compute: String,
    /// The data-movement kernel that writes (NOC 1).
    pub writer: String,
}

/// What a kernel does in a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads tensors into CBs (its work from a task table, or runtime args).
    Reader,
    /// Computes from CBs into CBs (its work in runtime args).
    Compute,
    /// Writes CBs out to tensors and signals the next phase.
    Writer,
}

/// A circular buffer as a kernel names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cb {
    /// The kernel's name for it (`cb_x`, ...).
    pub name: &'static str,
    /// Its index.
    pub id: u8,
}

/// One kernel of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Kernel {
    /// Its file under `kernels/`.
    pub file: &'static str,
    /// Its role.
    pub role: Role,
    /// Its CBs: pasted in as `constexpr uint32_t cb_… = id` ([`with_cb_ids`]), or declared so by
    /// the kernel itself.
    pub cbs: &'static [Cb],
    /// The CB its task-table row is read into (`TaskTable<id>`), if it reads one.
    pub table_cb: Option<u8>,
}

/// The CB a reader's task-table row is read into.
pub const READER_TABLE_CB: u8 = 30;
/// The CB a writer's task-table row is read into.
pub const WRITER_TABLE_CB: u8 = 31;

const fn cb(name: &'static str, id: u8) -> Cb {
    Cb { name, id }
}

/// Every kernel under `kernels/`, by file.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        file: "reader_share.cpp",
        role: Role::Reader,
        cbs: &[cb("cb_act", 0), cb("cb_w", 1)],
        table_cb: Some(READER_TABLE_CB),
    },
    Kernel {
        file: "matmul_share.cpp",
        role: Role::Compute,
        cbs: &[cb("cb_act", 0), cb("cb_w", 1), cb("cb_out", 2)],
        table_cb: None,
    },
    Kernel {
        file: "writer_partials.cpp",
        role: Role::Writer,
        cbs: &[cb("cb_out", 2)],
        table_cb: Some(WRITER_TABLE_CB),
    },
    Kernel {
        file: "reader_rows.cpp",
        role: Role::Reader,
        cbs: &[
            cb("cb_x", 0),
            cb("cb_scaler", 1),
            cb("cb_g", 2),
            cb("cb_b", 3),
            cb("cb_scratch", 9),
        ],
        table_cb: Some(READER_TABLE_CB),
    },
    Kernel {
        file: "layernorm_rows.cpp",
        role: Role::Compute,
        cbs: &[
            cb("cb_x", 0),
            cb("cb_scaler", 1),
            cb("cb_g", 2),
            cb("cb_b", 3),
            cb("cb_w0", 4),
            cb("cb_w1", 5),
            cb("cb_mean", 6),
            cb("cb_rstd", 7),
            cb("cb_w2", 8),
            cb("cb_y", 16),
        ],
        table_cb: None,
    },
    Kernel {
        file: "softmax_rows.cpp",
        role: Role::Compute,
        cbs: &[
            cb("cb_s", 0),
            cb("cb_scaler", 1),
            cb("cb_e", 4),
            cb("cb_max", 6),
            cb("cb_rsum", 7),
            cb("cb_p", 16),
        ],
        table_cb: None,
    },
    Kernel {
        file: "reader_rows_stream.cpp",
        role: Role::Reader,
        cbs: &[
            cb("cb_x", 0),
            cb("cb_scaler", 1),
            cb("cb_g", 2),
            cb("cb_b", 3),
        ],
        table_cb: Some(READER_TABLE_CB),
    },
    Kernel {
        file: "norm_stream.cpp",
        role: Role::Compute,
        cbs: &[
            cb("cb_x", 0),
            cb("cb_scaler", 1),
            cb("cb_g", 2),
            cb("cb_b", 3),
            cb("cb_w0", 4),
            cb("cb_w1", 5),
            cb("cb_mean", 6),
            cb("cb_rstd", 7),
            cb("cb_sum", 8),
            cb("cb_sumsq", 9),
            cb("cb_shift", 10),
            cb("cb_y", 16),
        ],
        table_cb: None,
    },
    Kernel {
        file: "reader_rope.cpp",
        role: Role::Reader,
        cbs: &[
            cb("cb_x", 0),
            cb("cb_cos", 1),
            cb("cb_sin", 2),
            cb("cb_rot", 3),
            cb("cb_xm", 4),
        ],
        table_cb: Some(READER_TABLE_CB),
    },
    Kernel {
        file: "rope_rows.cpp",
        role: Role::Compute,
        cbs: &[
            cb("cb_x", 0),
            cb("cb_cos", 1),
            cb("cb_sin", 2),
            cb("cb_rot", 3),
            cb("cb_xm", 4),
            cb("cb_w", 5),
            cb("cb_y", 16),
        ],
        table_cb: None,
    },
    Kernel {
        file: "writer_tiles.cpp",
        role: Role::Writer,
        cbs: &[cb("cb_out", 16)],
        table_cb: Some(WRITER_TABLE_CB),
    },
    Kernel {
        file: "reader_finish.cpp",
        role: Role::Reader,
        cbs: &[cb("cb_x", 0), cb("cb_bias", 2), cb("cb_res", 3)],
        table_cb: Some(READER_TABLE_CB),
    },
    Kernel {
        file: "bias_act_rows.cpp",
        role: Role::Compute,
        cbs: &[
            cb("cb_x", 0),
            cb("cb_bias", 2),
            cb("cb_res", 3),
            cb("cb_y", 16),
        ],
        table_cb: None,
    },
    Kernel {
        file: "writer_runs.cpp",
        role: Role::Writer,
        cbs: &[cb("cb_out", 16)],
        table_cb: Some(WRITER_TABLE_CB),
    },
    Kernel {
        file: "reader_attention.cpp",
        role: Role::Reader,
        cbs: &[
            cb("cb_q", 0),
            cb("cb_scaler", 1),
            cb("cb_k", 2),
            cb("cb_v", 3),
            cb("cb_zero", 4),
            cb("cb_mask", 5),
            cb("cb_scratch", 6),
            cb("cb_diag", 7),
        ],
        table_cb: Some(READER_TABLE_CB),
    },
    Kernel {
        file: "attention_head.cpp",
        role: Role::Compute,
        cbs: &[
            cb("cb_q", 0),
            cb("cb_scaler", 1),
            cb("cb_k", 2),
            cb("cb_v", 3),
            cb("cb_mask", 5),
            cb("cb_diag", 7),
            cb("cb_s", 8),
            cb("cb_s2", 9),
            cb("cb_e", 10),
            cb("cb_max", 11),
            cb("cb_rsum", 12),
            cb("cb_p", 13),
            cb("cb_o", 16),
        ],
        table_cb: None,
    },
    Kernel {
        file: "writer_merge_heads.cpp",
        role: Role::Writer,
        cbs: &[cb("cb_o", 16), cb("cb_asm", 17)],
        table_cb: Some(WRITER_TABLE_CB),
    },
    Kernel {
        file: "reader_tiles.cpp",
        role: Role::Reader,
        cbs: &[cb("cb_in", 0)],
        table_cb: None,
    },
    Kernel {
        file: "sfpu/eltwise_sfpu.cpp",
        role: Role::Compute,
        cbs: &[cb("cb_in", 0), cb("cb_out", 16)],
        table_cb: None,
    },
    Kernel {
        file: "relayout_tiles.cpp",
        role: Role::Reader,
        cbs: &[cb("cb_dst", 0), cb("cb_src", 1)],
        table_cb: None,
    },
    // The LLM's input rows (gather.rs), in the worker's row program: cb_x and cb_ids are its
    // x and scaler CBs (reader_rows.cpp's ids), cb_scratch one of the step's work CBs.
    Kernel {
        file: "gather_rows.cpp",
        role: Role::Reader,
        cbs: &[cb("cb_x", 0), cb("cb_ids", 1), cb("cb_scratch", 2)],
        table_cb: Some(READER_TABLE_CB),
    },
    Kernel {
        file: "pass_rows.cpp",
        role: Role::Compute,
        cbs: &[cb("cb_x", 0), cb("cb_y", 16)],
        table_cb: None,
    },
];

/// The kernel in `file` (under `kernels/`).
pub fn kernel(file: &str) -> Option<&'static Kernel> {
    KERNELS.iter().find(|k| k.file == file)
}

/// The id of the CB `name` of the kernel in `file`; panics when the registry has no such CB
/// (a programming error the registry tests catch).
pub fn cb_id(file: &str, name: &str) -> u8 {
    kernel(file)
        .and_then(|k| k.cbs.iter().find(|c| c.name == name))
        .map(|c| c.id)
        .unwrap_or_else(|| panic!("the kernel registry has no CB `{name}` in `{file}`"))
}

/// The start of the line a kernel marks the place of its CB ids with: the marker goes on with the
/// kernel's own file and `@@` (`//@@GR00T_CB_IDS attention_head.cpp@@`), so the registry's ids
/// are pasted in wherever the kernel's source is composed, without the caller naming the kernel.
pub const CB_IDS_MARKER: &str = "//@@GR00T_CB_IDS ";

/// The C++ declarations of `k`'s CB ids (file scope, one `constexpr` a CB).
pub fn cb_id_decls(k: &Kernel) -> String {
    let mut out = format!(
        "// {}'s CBs, from the kernel registry (registry.rs).\nnamespace {{\n",
        k.file
    );
    for c in k.cbs {
        out.push_str(&format!("constexpr uint32_t {} = {};\n", c.name, c.id));
    }
    out.push_str("}  // namespace\n");
    out
}

/// `src` with each CB-ids marker line replaced by the declarations of the kernel it names
/// ([`cb_id_decls`]); a source without one comes back as it is. Panics on a marker that names no
/// registered kernel or lacks its closing `@@` (a programming error the registry tests catch).
pub fn with_cb_ids(src: &str) -> String {
    let mut out = String::with_capacity(src.len() + 512);
    let mut rest = src;
    while let Some(at) = rest.find(CB_IDS_MARKER) {
        out.push_str(&rest[..at]);
        let after = &rest[at + CB_IDS_MARKER.len()..];
        let end = after
            .find("@@")
            .unwrap_or_else(|| panic!("a CB-ids marker without its closing `@@`"));
        let file = &after[..end];
        let k = kernel(file)
            .unwrap_or_else(|| panic!("a CB-ids marker names `{file}`, no registered kernel"));
        out.push_str(&cb_id_decls(k));
        let line_end = &after[end + 2..];
        rest = line_end.strip_prefix('\n').unwrap_or(line_end);
    }
    out.push_str(rest);
    out
}
