//! The LLM's input rows on the device (issue 40): Qwen3's `inputs_embeds`, each token's row
//! gathered from the token-embedding table (a bf16 tensor uploaded once) or from the image
//! tokens' rows (the projector's fp32 output) by a per-forward ids tensor, into the fp32
//! residual stream the first layer reads. One program: our reader (`kernels/gather_rows.cpp`)
//! builds each output tile row from the source tiles, `kernels/pass_rows.cpp` hands it on, the
//! row programs' writer writes it. It is a [`RowsStep`] like the norms, so the worker's row
//! program runs it unchanged: x is the table, the scaler the ids, g the image rows, `vec_len`
//! the token count (the reader's task words are the row programs'; the kernel's header says
//! which it reads).

use tt_blackhole::device::DitRunError;
use tt_blackhole::plan::L1_BUDGET;
use tt_blackhole::plan::program::ROW_CORES;

use super::attention::with_tile_columns;
use super::graph::tiles;
use super::graph_builder::Graph;
use super::graph_steps::{GraphStep, RowsStep, rows_l1_bytes};
use super::protocol::KernelSet;
use super::registry::cb_id;
use super::sfpu::{WRITER_TILES_KERNEL, compose_compute};
use super::task_table::with_task_table;

/// The reader: the ids, then per output tile row each token's source row, half tiles at a time.
pub const GATHER_ROWS_KERNEL: &str = include_str!("kernels/gather_rows.cpp");
/// The compute kernel: cb_x to the output, tile for tile (bit-exact: unpacked to the fp32 DST).
pub const PASS_ROWS_KERNEL: &str = include_str!("kernels/pass_rows.cpp");

/// Column tiles the reader fetches for all 32 tokens of a tile row before one barrier: 128 reads
/// in flight, a scratch of 256 KB (a token's half tile per slot, 2 KB).
const GATHER_CHUNK: usize = 4;
/// Scratch pages (fp32, 4 KB) per column tile of a chunk: 32 tokens' 2 KB half tiles.
const SCRATCH_PAGES_PER_TILE: usize = 16;
/// Rows a token may name: below it every ids value `id` or `-(k+1)` is an integer the reader
/// decodes exactly (|v| < 2^24: f32's 24-bit significand).
const MAX_ROWS: usize = (1 << 24) - 1;

/// Where a token's input row comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenSource {
    /// Row `id` of the token-embedding table.
    Text(u32),
    /// Row `k` of the image tokens' rows (the projector's output, in order).
    Image(usize),
}

/// The ids tensor's values (row-major `[32, 32·⌈n/32⌉]` fp32): per token in row 0,
/// `Text(id)` → `id`, `Image(k)` → `-(k+1)`; the rest zero. Exact for the rows
/// [`check_tokens`] lets through.
pub(crate) fn ids_tile(tokens: &[TokenSource]) -> Vec<f32> {
    let cols = 32 * tiles(tokens.len()).max(1);
    let mut out = vec![0f32; 32 * cols];
    for (v, t) in out.iter_mut().zip(tokens) {
        *v = match *t {
            TokenSource::Text(id) => id as f32,
            TokenSource::Image(k) => -((k + 1) as f32),
        };
    }
    out
}

/// Whether every token names a row that is there (`vocab` table rows, `image_rows` image
/// rows) and that the ids tensor holds exactly: the device cannot tell (a row past a tensor's
/// end would be read from whatever lies beyond it).
pub(crate) fn check_tokens(
    tokens: &[TokenSource],
    vocab: usize,
    image_rows: usize,
) -> Result<(), DitRunError> {
    for (i, t) in tokens.iter().enumerate() {
        let (row, rows, what) = match *t {
            TokenSource::Text(id) => (id as usize, vocab, "table"),
            TokenSource::Image(k) => (k, image_rows, "image"),
        };
        if row >= rows.min(MAX_ROWS) {
            return Err(DitRunError::Input(format!(
                "token {i}: {what} row {row} of {rows} (the ids name rows below {MAX_ROWS})"
            )));
        }
    }
    Ok(())
}

/// The table as the device holds it: `[⌈vocab/32⌉·32, ⌈hidden/32⌉·32]` row-major, its values
/// rounded to bf16 (to nearest even, as the upload rounds them: so the device's values are
/// these), zero padded. `table` is `[vocab, hidden]` row-major.
#[cfg(test)]
pub(crate) fn table_rows(table: &[f32], vocab: usize, hidden: usize) -> Vec<f32> {
    assert_eq!(table.len(), vocab * hidden, "the table is [vocab, hidden]");
    let cols = 32 * tiles(hidden);
    let mut out = vec![0f32; 32 * tiles(vocab) * cols];
    for (dst, src) in out.chunks_exact_mut(cols).zip(table.chunks_exact(hidden)) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = tt_blackhole::bf16::round_to_bf16(*s);
        }
    }
    out
}

/// The work CBs of a gather over rows of `wt` tiles: the output rows (two tile rows when they
/// fit, so the reader builds the next while the last goes out; else one) and the scratch.
/// `None` when not even one tile row fits a core's L1.
fn gather_work_cbs(wt: usize) -> Option<Vec<(u8, usize)>> {
    let scratch = (
        cb_id("gather_rows.cpp", "cb_scratch"),
        SCRATCH_PAGES_PER_TILE * GATHER_CHUNK.min(wt),
    );
    let x = cb_id("gather_rows.cpp", "cb_x");
    [2 * wt, wt]
        .into_iter()
        .map(|pages| vec![(x, pages), scratch])
        .find(|cbs| rows_l1_bytes(wt, cbs, true) <= L1_BUDGET)
}

impl Graph<'_> {
    /// out (fp32 `[32·⌈n/32⌉, ⌈hidden/32⌉·32]`) = the source row of each of the `n` tokens of
    /// `ids` (the [`ids_tile`] tensor, fp32 `[32, 32·⌈n/32⌉]`), rows past `n` zero: `table` is
    /// the bf16 token-embedding table (the [`table_rows`] tensor), `image` the image tokens'
    /// fp32 rows; both `⌈hidden/32⌉·32` columns (`image` may name any such fp32 tensor when no
    /// token is an image token). The tokens are not seen here: [`check_tokens`] them.
    pub(super) fn gather_rows(
        &mut self,
        ids: &str,
        n: usize,
        sources: [&str; 2],
        hidden: usize,
        out: &str,
    ) -> Result<(), DitRunError> {
        self.gather_rows_to(ids, n, sources, hidden, (out, true))
    }

    /// [`Graph::gather_rows`] into `out.0`, fp32 or (`out.1` false) bf16: the observation's
    /// context rows as the cross blocks' K/V matmuls read them.
    pub(super) fn gather_rows_to(
        &mut self,
        ids: &str,
        n: usize,
        [table, image]: [&str; 2],
        hidden: usize,
        (out, out_f32): (&str, bool),
    ) -> Result<(), DitRunError> {
        if n == 0 || hidden == 0 {
            return Err(DitRunError::Input(format!(
                "gather_rows: {n} tokens of {hidden} columns"
            )));
        }
        let wt = tiles(hidden);
        let work_cbs = gather_work_cbs(wt).ok_or_else(|| {
            DitRunError::Input(format!(
                "gather_rows: a tile row of {hidden} columns does not fit a core's L1"
            ))
        })?;
        let reader = self.source("gather_rows", || {
            with_task_table(&with_tile_columns(GATHER_ROWS_KERNEL))
        });
        let compute = self.source("pass_rows", || compose_compute(PASS_ROWS_KERNEL, &[]));
        let writer = self.source("writer_tiles", || with_task_table(WRITER_TILES_KERNEL));
        self.steps.push(GraphStep::Rows(RowsStep {
            x: table.into(),
            scaler: ids.into(),
            g: image.into(),
            b: ids.into(),
            b_col: 0,
            vec_len: n,
            out: out.into(),
            out_f32,
            wt,
            row_tiles: tiles(n),
            vec_tiles: 0,
            label: "gather_rows".into(),
            work_cbs,
            // The copy is exact only if cb_x skips the FPU's 19-bit source registers.
            unpack_to_dest: vec![cb_id("pass_rows.cpp", "cb_x")],
            cores: ROW_CORES,
            group: "gather_rows".into(),
            kernels: KernelSet {
                reader,
                compute,
                writer,
            },
        }));
        Ok(())
    }
}
