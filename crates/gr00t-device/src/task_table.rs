//! The task tables our data-movement kernels read their work from (`kernels/task_table.h`):
//! a program's per-core work lists live in a DRAM tensor the worker writes, not in runtime args,
//! since tt-metal takes at most 341 of those a kernel a core and one program for a whole
//! denoising step gives a matmul core about a thousand words (the plan bounds a table at
//! [`tt_blackhole::plan::program::TABLE_WORDS`]).

use super::registry::with_cb_ids;

/// The header every reader and writer pastes in: it reads this kernel's row of the table.
const TASK_TABLE: &str = include_str!("kernels/task_table.h");
/// The line a data-movement kernel marks the place of [`TASK_TABLE`] with.
const TASK_TABLE_MARKER: &str = "//@@GR00T_TASK_TABLE@@";

/// `kernel` with the task-table reader pasted in at its marker, as the JIT compiles it (it
/// takes one source string per kernel, so a shared header travels inside each), and its CB ids
/// (the registry's, [`with_cb_ids`]: every data-movement kernel's source passes through here or
/// through the tile-columns paste).
pub fn with_task_table(kernel: &str) -> String {
    debug_assert!(kernel.contains(TASK_TABLE_MARKER), "no task-table marker");
    with_cb_ids(&kernel.replacen(TASK_TABLE_MARKER, TASK_TABLE, 1))
}
