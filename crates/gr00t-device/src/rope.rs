//! Rotary position embedding as a graph step (issue 40): Qwen3's NEOX RoPE (Hugging Face's
//! `apply_rotary_pos_emb`, `out = x·cos + rotate_half(x)·sin`) on the per-head-normed q and k,
//! by our kernels (`kernels/rope_rows.cpp`, read by `kernels/reader_rope.cpp`) in a
//! [`RowsStep`]: the worker runs it as it runs any row step, the slots' names notwithstanding
//! (x is x; the scaler, g and b slots carry cos, sin and the rotation tile).
//!
//! Layout: x is fp32 `[32·row_tiles, heads·hp]`, each head's `hd` columns padded to `hp` whole
//! tiles ([`padded_head`]); the output is bf16 in the same layout, its padding columns zero. The
//! step shares the view `[32·row_tiles·heads, hp]` (one head of one tile row a unit) over the
//! cores, as the per-head norm does: a decode's one tile row still spreads out.
//!
//! How a head is rotated depends on where its halves lie:
//! * `hd` a multiple of 64: each half is whole tiles, so rotate_half moves tiles; the kernel takes
//!   the partner tile (with the sign) on the SFPU, all in fp32. The rotation tile is not read.
//! * `hd ≤ 32`: the head is one tile, its halves columns of it; `x @ R` on the FPU with `R` the
//!   32×32 rotation ([`rope_rotation`], exact: entries 0 and ±1), then the same fp32 combine.
//!
//! Other widths (an odd number of tiles, or a head over 32 columns not whole tiles) are refused.

use tt_blackhole::device::DitRunError;
use tt_blackhole::plan::program::ROW_CORES;

use super::graph_builder::Graph;
use super::graph_steps::{GraphStep, RowsStep};
use super::protocol::KernelSet;
use super::registry::cb_id;
use super::sfpu::{WRITER_TILES_KERNEL, compose_compute};
use super::task_table::with_task_table;

/// The RoPE compute kernel (the SFPU library pasted in; the head's tiles and the matmul form
/// chosen by defines).
pub const ROPE_KERNEL: &str = include_str!("kernels/rope_rows.cpp");
/// Its reader: per head of a tile row, the head's tiles of x and the tile row's cos and sin.
pub const READER_ROPE_KERNEL: &str = include_str!("kernels/reader_rope.cpp");

/// The padded head width `hp` RoPE runs on: the device's head layout
/// ([`gr00t_megakernel::head_layout::padded_head`]) for the widths whose halves the kernel can rotate: an
/// even `hd ≤ 32` (one tile) or a multiple of 64 (whole tiles per half).
pub(crate) fn padded_head(hd: usize) -> Result<usize, DitRunError> {
    let refuse = |why: &str| {
        Err(DitRunError::Input(format!(
            "RoPE over heads of {hd} columns: {why}"
        )))
    };
    let Some(hp) = gr00t_megakernel::head_layout::padded_head(hd) else {
        return refuse("no device head layout");
    };
    if hd <= 32 && !hd.is_multiple_of(2) {
        return refuse("rotate_half needs an even width");
    }
    if hd > 32 && !hd.is_multiple_of(64) {
        return refuse("a head over one tile must be a multiple of 64 (whole tiles per half)");
    }
    Ok(hp)
}

/// cos and sin tables `[32·row_tiles, hp]` (fp32, row-major, zero past `hd` and for no row) for
/// positions `0..rows`: the CPU reference's (`gr00t_runtime::model::llm::rope_tables`), so the
/// device rotates by the very angles the reference does.
pub(crate) fn rope_tables(
    rows: usize,
    row_tiles: usize,
    hd: usize,
    theta: f64,
) -> Result<(Vec<f32>, Vec<f32>), DitRunError> {
    let hp = padded_head(hd)?;
    if rows > 32 * row_tiles {
        return Err(DitRunError::Input(format!(
            "RoPE tables for {rows} positions over {row_tiles} tile rows"
        )));
    }
    let (cos, sin) = gr00t_runtime::model::llm::rope_tables(rows, hd, theta);
    let pad = |t: &[f32]| {
        let mut out = vec![0f32; 32 * row_tiles * hp];
        for (dst, src) in out.chunks_exact_mut(hp).zip(t.chunks_exact(hd)) {
            dst[..hd].copy_from_slice(src);
        }
        out
    };
    Ok((pad(&cos), pad(&sin)))
}

/// The rotation tiles the kernel reads (row-major `[32, 32·n]`, here always one tile, n = 1):
/// for `hd ≤ 32`, `R` with `x @ R = rotate_half(x)` on the head's columns: −1 at
/// `(j + hd/2, j)` for `j < hd/2`, +1 at `(j − hd/2, j)` for `hd/2 ≤ j < hd`, zero elsewhere
/// (so the padding columns stay zero). For `hd` a multiple of 64 the kernel moves whole tiles
/// and reads no rotation: a zero tile, so the step still names a tensor in every slot.
pub(crate) fn rope_rotation(hd: usize) -> Result<Vec<f32>, DitRunError> {
    padded_head(hd)?;
    let mut r = vec![0f32; 32 * 32];
    if hd <= 32 {
        let half = hd / 2;
        for j in 0..half {
            r[(j + half) * 32 + j] = -1.0;
            r[j * 32 + j + half] = 1.0;
        }
    }
    Ok(r)
}

/// Whether heads of `hd` columns take the matmul form (one tile: `x @ R`).
fn rotates_in_tile(hd: usize) -> bool {
    hd <= 32
}

/// The defines both kernels take: the head's tiles and, for one-tile heads, the matmul form.
fn rope_defines(n: usize, in_tile: bool) -> Vec<(&'static str, String)> {
    let mut defs = vec![("GR00T_ROPE_HEAD_TILES", n.to_string())];
    if in_tile {
        defs.push(("GR00T_ROPE_MATMUL", "1".into()));
    }
    defs
}

/// The (reader, compute) sources for heads of `n` tiles (`in_tile`: the matmul form), composed
/// (task table, CB ids, the SFPU library and the compute pieces).
pub(crate) fn rope_sources(n: usize, in_tile: bool) -> (String, String) {
    let defs = rope_defines(n, in_tile);
    let defs: Vec<(&str, &str)> = defs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let reader = with_task_table(&compose_compute(READER_ROPE_KERNEL, &defs));
    (reader, compose_compute(ROPE_KERNEL, &defs))
}

/// The kernel's fp32 work CBs `(id, pages)` for a [`RowsStep`]: x, cos and sin two heads' tiles
/// each (a head's `n` pushed at a time, so a head never straddles a CB's wrap); for the matmul
/// form the rotation tile, x's matmul copy and `x @ R`.
pub(crate) fn rope_work_cbs(n: usize, in_tile: bool) -> Vec<(u8, usize)> {
    let mut cbs = vec![("cb_x", 2 * n), ("cb_cos", 2 * n), ("cb_sin", 2 * n)];
    if in_tile {
        cbs.extend([("cb_rot", 1), ("cb_xm", 2), ("cb_w", 2)]);
    }
    cbs.into_iter()
        .map(|(name, pages)| (cb_id("rope_rows.cpp", name), pages))
        .collect()
}

/// The CBs the kernel unpacks straight to the fp32 DST (what the SFPU combines: no 19-bit FPU
/// operands); the matmul's operands (`cb_xm`, `cb_rot`) are not among them.
pub(crate) fn rope_unpack_to_dest(in_tile: bool) -> Vec<u8> {
    let mut names = vec!["cb_x", "cb_cos", "cb_sin"];
    if in_tile {
        names.push("cb_w");
    }
    names
        .into_iter()
        .map(|name| cb_id("rope_rows.cpp", name))
        .collect()
}

impl Graph<'_> {
    /// `out` (bf16) = RoPE(`x`) per `hd`-wide head: `x` fp32 `[32·row_tiles, heads·hp]` (heads
    /// padded to [`padded_head`]); `tables` = the names of the cos and sin tables
    /// ([`rope_tables`], for this `row_tiles`) and of the rotation tile ([`rope_rotation`]).
    /// The output is written as the head-by-head view `[32·row_tiles·heads, hp]`, page for page
    /// the same tensor as `[32·row_tiles, heads·hp]`.
    pub(super) fn rope(
        &mut self,
        x: &str,
        [heads, hd, row_tiles]: [usize; 3],
        [cos, sin, rot]: [&str; 3],
        out: &str,
    ) -> Result<(), DitRunError> {
        let n = padded_head(hd)? / 32;
        if heads == 0 || row_tiles == 0 {
            return Err(DitRunError::Input(format!(
                "RoPE over {heads} heads and {row_tiles} tile rows"
            )));
        }
        let in_tile = rotates_in_tile(hd);
        let name = if in_tile {
            "rope/in_tile".to_string()
        } else {
            format!("rope/t{n}")
        };
        let compute = self.source(&name, || rope_sources(n, in_tile).1);
        let reader = self.source(&format!("reader_rope/{name}"), || {
            rope_sources(n, in_tile).0
        });
        let writer = self.source("writer_tiles", || with_task_table(WRITER_TILES_KERNEL));
        self.steps.push(GraphStep::Rows(RowsStep {
            x: x.into(),
            scaler: cos.into(),
            g: sin.into(),
            b: rot.into(),
            b_col: 0,
            // The reader's heads (it finds a view row's tile row of the tables by them).
            vec_len: heads,
            out: out.into(),
            out_f32: false,
            wt: n,
            row_tiles: row_tiles * heads,
            vec_tiles: n,
            label: "rope".into(),
            work_cbs: rope_work_cbs(n, in_tile),
            unpack_to_dest: rope_unpack_to_dest(in_tile),
            cores: ROW_CORES,
            group: name,
            kernels: KernelSet {
                reader,
                compute,
                writer,
            },
        }));
        Ok(())
    }
}
