//! The norms of a [`Graph`]: LayerNorm with the AdaLN modulation, with γ/β of its own or
//! plain (our whole-row kernel, `kernels/layernorm_rows.cpp`), and where a row would not fit a
//! core's L1 the streaming kernel (`kernels/norm_stream.cpp`), whose RMS form is Qwen3's
//! RMSNorm, per row or per head.

use std::collections::BTreeMap;

use tt_blackhole::device::DitRunError;
use tt_blackhole::plan::L1_BUDGET;
use tt_blackhole::plan::program::ROW_CORES;

use super::graph::{LN_EPS, tiles};
use super::graph_builder::Graph;
use super::graph_steps::{GraphStep, RowsStep, rows_l1_bytes};
use super::protocol::KernelSet;
use super::registry::cb_id;
use super::rows::{
    LAYERNORM_KERNEL, READER_ROWS_KERNEL, StreamNorm, norm_stream_sources,
    norm_stream_unpack_to_dest, norm_stream_work_cbs,
};
use super::sfpu::{WRITER_TILES_KERNEL, compose_compute};
use super::task_table::with_task_table;
use gr00t_megakernel::head_layout::padded_head;

/// The work CBs of our LayerNorm kernel (`layernorm_rows.cpp`) over rows of `wt` tiles, by
/// index: γ, β and three rows of work whole, the mean and the rstd.
pub(super) fn layernorm_work_cbs(wt: usize) -> BTreeMap<u8, usize> {
    let cb = |n: &str| cb_id("layernorm_rows.cpp", n);
    [
        (cb("cb_g"), wt),
        (cb("cb_b"), wt),
        (cb("cb_w0"), wt),
        (cb("cb_w1"), wt),
        (cb("cb_mean"), 1),
        (cb("cb_rstd"), 1),
        (cb("cb_w2"), wt),
    ]
    .into()
}

/// The rows of a norm the streaming kernel takes ([`Graph::stream_norm`]).
struct StreamRows<'a> {
    x: &'a str,
    d: usize,
    row_tiles: usize,
    /// γ and β (β unread by an RMSNorm).
    affine: [&'a str; 2],
    /// The output and whether it is fp32.
    out: (&'a str, bool),
    eps: f32,
}

/// Where a LayerNorm's γ and β come from.
#[derive(Clone, Copy)]
enum Affine<'a> {
    /// None: the plain norm.
    None,
    /// The AdaLN `[scale | shift]` row named (γ = 1 + scale, β = shift).
    Ada(&'a str),
    /// Tensors of their own.
    Own { gamma: &'a str, beta: &'a str },
}

impl Graph<'_> {
    /// LayerNorm of the fp32 stream `x` (`row_tiles` tile rows, width `d`): with `ada`, the
    /// AdaLN modulation from the AdaLN matmul's `[scale | shift]` row `ada` as it is (the reader
    /// splits it); else the plain norm.
    pub(super) fn layernorm(
        &mut self,
        x: &str,
        d: usize,
        row_tiles: usize,
        ada: Option<&str>,
        out: &str,
    ) {
        self.layernorm_eps(x, d, row_tiles, ada, out, LN_EPS);
    }

    /// [`Graph::layernorm`] with epsilon `eps` (the DiT's output norm: 1e-6).
    pub(super) fn layernorm_eps(
        &mut self,
        x: &str,
        d: usize,
        row_tiles: usize,
        ada: Option<&str>,
        out: &str,
        eps: f32,
    ) {
        let affine = match ada {
            Some(t) => Affine::Ada(t),
            None => Affine::None,
        };
        self.norm_rows(x, d, row_tiles, affine, (out, false), eps);
    }

    /// LayerNorm of the fp32 stream `x` with its own γ and β (fp32 `[32, d]` tensors, the
    /// values in row 0): the backbone's norms; the output bf16, or fp32 with `out_f32`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn layernorm_affine(
        &mut self,
        x: &str,
        d: usize,
        row_tiles: usize,
        [gamma, beta]: [&str; 2],
        out: &str,
        eps: f32,
        out_f32: bool,
    ) {
        let affine = Affine::Own { gamma, beta };
        self.norm_rows(x, d, row_tiles, affine, (out, out_f32), eps);
    }

    fn norm_rows(
        &mut self,
        x: &str,
        d: usize,
        row_tiles: usize,
        affine: Affine<'_>,
        (out, out_f32): (&str, bool),
        eps: f32,
    ) {
        let wt = tiles(d);
        let float = |v: f32| format!("__builtin_bit_cast(float, {:#010x}u)", v.to_bits());
        let ada = matches!(affine, Affine::Ada(_));
        let (name, g, b, b_col) = match affine {
            Affine::Ada(t) => ("ln_ada", t, t, d),
            Affine::None => ("ln_plain", "c/ones", "c/zeros", 0),
            // The plain norm's kernel: only its vectors differ.
            Affine::Own { gamma, beta } => ("ln_plain", gamma, beta, 0),
        };
        let mut work_cbs = layernorm_work_cbs(wt);
        if b_col % 32 != 0 {
            // The scratch the reader copies the shift's tiles through (tiny D; D = 1536 has none).
            work_cbs.insert(cb_id("reader_rows.cpp", "cb_scratch"), wt + 1);
        }
        // Our whole-row kernel holds a row's tiles several times over: a row too wide for a
        // core's L1 takes the streaming one (the AdaLN norms, the DiT's width, always fit).
        let work_cbs: Vec<(u8, usize)> = work_cbs.into_iter().collect();
        let whole_l1 = rows_l1_bytes(wt, &work_cbs, out_f32);
        if !ada && whole_l1 > L1_BUDGET {
            let rows = StreamRows {
                x,
                d,
                row_tiles,
                affine: [g, b],
                out: (out, out_f32),
                eps,
            };
            self.stream_norm(rows, StreamNorm::Layer);
            return;
        }
        // The kernel's source differs with its width and epsilon: so does its name (the DiT's
        // own keep the bare one).
        let mut source = name.to_string();
        if d != self.plan.dims.num_heads * self.plan.dims.head_dim {
            source.push_str(&format!("/d{d}"));
        }
        if eps != LN_EPS {
            source.push_str(&format!("/eps{eps:e}"));
        }
        let compute = self.source(&source, || {
            let mut defs = vec![
                ("GR00T_LN_INV_D", float(1.0 / d as f32)),
                ("GR00T_LN_EPS", float(eps)),
            ];
            if ada {
                defs.push(("GR00T_LN_ONE_PLUS_G", "1".into()));
            }
            let defs: Vec<(&str, &str)> = defs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            compose_compute(LAYERNORM_KERNEL, &defs)
        });
        let reader = self.source("reader_rows", || with_task_table(READER_ROWS_KERNEL));
        let writer = self.source("writer_tiles", || with_task_table(WRITER_TILES_KERNEL));
        self.steps.push(GraphStep::Rows(RowsStep {
            x: x.into(),
            scaler: "c/scaler".into(),
            g: g.into(),
            b: b.into(),
            b_col,
            vec_len: d,
            out: out.into(),
            out_f32,
            wt,
            row_tiles,
            vec_tiles: wt,
            label: name.into(),
            work_cbs,
            unpack_to_dest: Vec::new(),
            cores: ROW_CORES,
            group: source.clone(),
            kernels: KernelSet {
                reader,
                compute,
                writer,
            },
        }));
    }

    /// RMSNorm of the fp32 stream `x` (`row_tiles` tile rows, width `d`) with γ `gamma` (an
    /// fp32 `[32, d]` tensor, the values in row 0): Qwen3's input and post-attention norms
    /// and its final one. Our streaming kernel's RMS form, at any width.
    pub(super) fn rms_norm(
        &mut self,
        x: &str,
        [d, row_tiles]: [usize; 2],
        gamma: &str,
        (out, out_f32): (&str, bool),
        eps: f32,
    ) {
        let rows = StreamRows {
            x,
            d,
            row_tiles,
            affine: [gamma, gamma],
            out: (out, out_f32),
            eps,
        };
        self.stream_norm(rows, StreamNorm::Rms);
    }

    /// RMSNorm of each `hd`-wide head of each row of `x` (fp32 `[32·row_tiles, heads·hp]`,
    /// each head in `hp` whole-tile columns: `gr00t_megakernel::head_layout`) alone, with γ shared by the
    /// heads: Qwen3's q_norm and k_norm. A TILE tensor's pages are its tiles in row-major
    /// order, so `[32·row_tiles, heads·hp]` is page for page `[32·row_tiles·heads, hp]`: the
    /// row norm runs over that view, and its output is read back the same way by what reads
    /// `[.., heads·hp]`.
    pub(super) fn head_rms_norm(
        &mut self,
        x: &str,
        [heads, hd, row_tiles]: [usize; 3],
        gamma: &str,
        (out, out_f32): (&str, bool),
        eps: f32,
    ) -> Result<(), DitRunError> {
        // Heads narrower than a tile are padded to one (`gr00t_megakernel::head_layout`): the view's rows
        // are then one tile wide, their real `hd` columns what the norm averages over.
        if padded_head(hd).is_none() {
            return Err(DitRunError::Input(format!(
                "a per-head norm over heads of {hd} columns: the view needs heads in whole tiles"
            )));
        }
        self.rms_norm(x, [hd, row_tiles * heads], gamma, (out, out_f32), eps);
        Ok(())
    }

    /// A norm of rows too wide for the whole-row kernel: our streaming kernel
    /// (`kernels/norm_stream.cpp`, `rows::norm_stream_sources`), which reads each row twice
    /// from DRAM a few tiles at a time (its statistics, then the normalisation), so its L1 is
    /// the same at any width. LayerNorm, or RMSNorm (`StreamNorm::Rms`: γ alone).
    fn stream_norm(&mut self, r: StreamRows<'_>, norm: StreamNorm) {
        let (d, eps) = (r.d, r.eps);
        let kind = match norm {
            StreamNorm::Layer => "ln_stream",
            StreamNorm::Rms => "rms_stream",
        };
        // Both kernels take the defines (1/d, eps, the kind): a source per set.
        let name = format!("{kind}/d{d}/eps{eps:e}");
        let reader_name = format!("reader_rows_stream/{name}");
        let compute = self.source(&name, || norm_stream_sources(d, eps, norm).1);
        let reader = self.source(&reader_name, || norm_stream_sources(d, eps, norm).0);
        let writer = self.source("writer_tiles", || with_task_table(WRITER_TILES_KERNEL));
        let wt = tiles(d);
        let [g, b] = r.affine;
        self.steps.push(GraphStep::Rows(RowsStep {
            x: r.x.into(),
            scaler: "c/scaler".into(),
            g: g.into(),
            b: b.into(),
            b_col: 0,
            vec_len: d,
            out: r.out.0.into(),
            out_f32: r.out.1,
            wt,
            row_tiles: r.row_tiles,
            vec_tiles: wt,
            label: kind.into(),
            work_cbs: norm_stream_work_cbs(norm),
            unpack_to_dest: norm_stream_unpack_to_dest(norm),
            cores: ROW_CORES,
            group: name,
            kernels: KernelSet {
                reader,
                compute,
                writer,
            },
        }));
    }
}
