//! The DiT blocks on the device with their activations kept there: a denoising step is one
//! worker exchange (`op: graph`) that runs every block's programs back to back over named
//! device tensors, the residual stream included, so only the step's tokens go in and the last
//! block's stream comes back. The worker keeps the step's graph, and later steps replay it with
//! their tokens alone (`backend/steps.rs`, docs/blackhole.md §14–15).
//!
//! A matmul and its end (`kernels/bias_act_rows.cpp`: the K pieces summed, the bias, bf16, GELU
//! or the residual add) are one program, and so is the LayerNorm or attention before it when it
//! makes the matmul's input: the matmul kernels on the plan's cores, the others' on the
//! grid's other cores, and between the phases a barrier on the device (each core's writer
//! increments a semaphore on every core of the next phase once its writes are acknowledged; that
//! phase's reader waits for all of them). Independent matmuls (a self block's Q, K and V) share
//! it too.
//!
//! Every block's AdaLN rows depend on SiLU(temb) alone, so on the timestep alone: they are
//! computed once per timestep and device ([`ada_graph`]), and a step reads them. Per block (the
//! emulator's `run_step_with`, op for op): LayerNorm with the AdaLN modulation
//! (`kernels/layernorm_rows.cpp`, `GR00T_LN_ONE_PLUS_G`; its reader splits the `[scale | shift]`
//! row) → Q (and K, V for a self block, in the same program) → attention per head
//! (`kernels/attention_head.cpp`; its reader cuts the heads out of the `[tokens, D]`
//! projections, its writer puts them back) → the output projection, whose end adds the residual
//! stream (`GR00T_FINISH_RESIDUAL`) → the plain LayerNorm → FF-up with GELU → FF-down, whose end
//! adds the stream again. Every step holds a matmul: 4 per block (32 for the tiny
//! config's 8 blocks; 33 while the AdaLN matmuls were the step's first: the AdaLN LayerNorm with Q (K, V), attention with the output projection,
//! the plain LayerNorm with FF-up, FF-down). Consecutive steps run as ONE program while
//! the grid, the compute kernels' runtime args and the task tables hold them: the plan packs
//! them, shares the other cores out to the phase groups (each phase names its `group`: phases
//! with the same kernels, whose cores do each of them in turn) and gives every phase its cores
//! (`tt_blackhole::plan::program`, [`Graph::request`]); the worker runs them as given
//! (docs/blackhole.md §12–13): a whole denoising step is one program, the tiny config's and the
//! full-size one's. (Programs per tiny step before: 33 with a program per step, 57 with the
//! LayerNorms and attention programs of their own, 90 with each matmul's end too, 106 with the
//! residual adds too, 168 when relayouts and one matmul per program made them 24 and 18; a
//! full-size cross block's 5 steps were 2 while every phase had cores of its own.)
//!
//! The cross blocks' K and V depend only on the observation's context: [`observation_graph`]
//! computes them once per observation into device tensors the steps read.
//!
//! Tensor names: `c/…` live as long as the device (the scaler tile, the plain LayerNorm's
//! vectors, the biases, each timestep's AdaLN rows), `o/…` one observation, `a/…` one
//! timestep's graph, `t/…` one step (released at its end, or kept with the step's graph for
//! the next step to replay: [`step_inputs`]).

use serde_json::{Value, json};
use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::device::DitRunError;
use tt_blackhole::dims::WeightKind;
use tt_blackhole::plan::MegakernelPlan;
use tt_blackhole::plan::program::{FINISH_UNIT_TILES, ROW_CORES, end_kernels};

use super::attention::{
    ATTENTION_KERNEL, reader_attention_kernel, with_tile_columns, writer_merge_kernel,
};
use super::backend::TtDevice;
use super::rows::{BIAS_ACT_KERNEL, FINISH_RESIDUAL_DEFINE, LAYERNORM_KERNEL, READER_ROWS_KERNEL};
use super::sfpu::{WRITER_TILES_KERNEL, compose_compute};
use super::task_table::with_task_table;
use crate::model::dit::{BlockKind, DitWeights};

/// The column relayout between tensors (data movement only).
pub const RELAYOUT_KERNEL: &str = include_str!("kernels/relayout_tiles.cpp");
/// The reader of a matmul's end: a unit's bias, then each output tile's K-piece partials.
pub const READER_FINISH_KERNEL: &str = include_str!("kernels/reader_finish.cpp");
/// The writer of a matmul's end: runs of tiles, into one output tensor or several.
pub const WRITER_RUNS_KERNEL: &str = include_str!("kernels/writer_runs.cpp");

/// A score's value for a key that may not be attended: its weight is 0.
const MASKED: f32 = -1.0e30;
/// LayerNorm's epsilon in the DiT (`norm1`, `norm3`: eps 1e-5, no affine).
const LN_EPS: f32 = 1e-5;
fn tiles(n: usize) -> usize {
    n.div_ceil(32)
}

/// A named device tensor with its values, for `put` and a graph's inputs.
pub(crate) struct Upload {
    specs: Vec<Value>,
    values: Vec<f32>,
}

impl Upload {
    pub(crate) fn new() -> Self {
        Upload {
            specs: Vec::new(),
            values: Vec::new(),
        }
    }

    /// `values` `[rows, cols]` (whole tiles) as `name`, stored as `dtype` ("f32" or "bf16").
    fn add(&mut self, name: &str, rows: usize, cols: usize, dtype: &str, values: &[f32]) {
        debug_assert_eq!(values.len(), rows * cols);
        self.specs
            .push(json!({"name": name, "rows": rows, "cols": cols, "dtype": dtype}));
        self.values.extend_from_slice(values);
    }

    /// `x` `[rows, cols]` as a `[rows_p, cols_p]` tensor: only the real values are sent, the
    /// worker zero-pads them.
    #[allow(clippy::too_many_arguments)]
    fn add_padded(
        &mut self,
        name: &str,
        x: &[f32],
        rows: usize,
        cols: usize,
        rows_p: usize,
        cols_p: usize,
        dtype: &str,
    ) {
        debug_assert_eq!(x.len(), rows * cols);
        self.specs.push(
            json!({"name": name, "rows": rows_p, "cols": cols_p, "dtype": dtype,
                               "real": [rows, cols]}),
        );
        self.values.extend_from_slice(x);
    }

    pub(crate) fn specs(&self) -> &[Value] {
        &self.specs
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
}

/// The device-lifetime constants: the reduce scaler tile, the plain LayerNorm's g (1 on the
/// real columns) and b (0), every block's biases replicated over 32 rows (bf16 values, as they
/// sit in L1; zero past the real columns, so padding columns stay 0 through every op).
pub(crate) fn constants(dev: &TtDevice, w: &DitWeights) -> Result<Upload, DitRunError> {
    let mut up = Upload::new();
    let mut scaler = vec![0f32; 32 * 32];
    scaler[..32].fill(1.0);
    scaler[16 * 32..17 * 32].fill(1.0);
    up.add("c/scaler", 32, 32, "f32", &scaler);
    let (d, dw) = (w.dim, tiles(w.dim) * 32);
    let mut ones = vec![0f32; 32 * dw];
    ones[..d].fill(1.0);
    up.add("c/ones", 32, dw, "f32", &ones);
    up.add("c/zeros", 32, dw, "f32", &vec![0f32; 32 * dw]);
    for (i, b) in w.blocks.iter().enumerate() {
        for (kind, lin) in [
            (WeightKind::AdaNorm, &b.ada),
            (WeightKind::Q, &b.q),
            (WeightKind::K, &b.k),
            (WeightKind::V, &b.v),
            (WeightKind::Out, &b.out),
            (WeightKind::FfUp, &b.ff1),
            (WeightKind::FfDown, &b.ff2),
        ] {
            let e = dev
                .index
                .entry(i, kind)
                .ok_or_else(|| DitRunError::Arena(format!("no block {i} {kind:?}")))?;
            let cols = e.tiles[1] * 32;
            let mut row = vec![0f32; cols];
            if let Some(bias) = &lin.b {
                for (r, v) in row.iter_mut().zip(bias) {
                    *r = round_to_bf16(*v);
                }
            }
            let rep: Vec<f32> = (0..32).flat_map(|_| row.iter().copied()).collect();
            up.add(&bias_name(i, kind), 32, cols, "f32", &rep);
        }
    }
    Ok(up)
}

fn bias_name(block: usize, kind: WeightKind) -> String {
    format!("c/bias/{block}/{kind:?}")
}

/// The key mask row (0: may attend; [`MASKED`]: padding or masked out) as `[32, np]`, row 0.
fn mask_tile(keep: &[bool], np: usize) -> Vec<f32> {
    let mut m = vec![0f32; 32 * np];
    for (j, v) in m[..np].iter_mut().enumerate() {
        *v = if keep.get(j).copied().unwrap_or(false) {
            0.0
        } else {
            MASKED
        };
    }
    m
}

/// What a matmul's end does after the bias (and the bf16 rounding).
#[derive(Clone, Copy)]
enum End<'a> {
    /// Nothing: the output as the next matmul or attention takes it (bf16 values).
    Plain,
    /// The FF-up's GELU (tanh form).
    Gelu,
    /// The residual add: the fp32 stream named here plus the output, kept fp32.
    Stream(&'a str),
}

/// One graph under construction: its steps and the kernel sources they name.
pub(crate) struct Graph<'a> {
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    steps: Vec<Value>,
    sources: serde_json::Map<String, Value>,
    /// The prefix of the matmuls' partials: `t` in a step's graph, `o` in the observation's,
    /// `a` in a timestep's (which must not take a kept step's tensors: `op_replay`).
    scratch: &'static str,
}

impl<'a> Graph<'a> {
    pub(crate) fn new(dev: &'a TtDevice, plan: &'a MegakernelPlan) -> Self {
        Graph {
            dev,
            plan,
            steps: Vec::new(),
            sources: serde_json::Map::new(),
            scratch: "t",
        }
    }

    /// A kernel source, sent once per graph and named by its steps.
    fn source(&mut self, name: &str, src: impl FnOnce() -> String) -> String {
        if !self.sources.contains_key(name) {
            self.sources.insert(name.to_string(), Value::String(src()));
        }
        name.to_string()
    }

    /// For each job `(block, kind, act, m, out)`: `out` = ACT(bf16(act · W(block, kind) + bias)),
    /// `m` the real rows of `act` (its tile rows are read). The jobs are independent: one program
    /// does them all and their ends: the matmul kernels on the plan's cores (fp32 partials per K
    /// piece, each job its own), the ends on the grid's other cores once a semaphore says every
    /// partial is written (`out_f32`: kept as fp32, as LayerNorm's reader takes the AdaLN rows).
    /// `End::Stream(x)` (one job): `out` = x + that, the residual add in the end, fp32.
    fn matmuls(
        &mut self,
        jobs: &[(usize, WeightKind, &str, usize, String)],
        end: End<'_>,
        out_f32: bool,
    ) -> Result<(), DitRunError> {
        let (gelu, stream) = match end {
            End::Plain => (false, None),
            End::Gelu => (true, None),
            End::Stream(x) => (false, Some(x)),
        };
        debug_assert!(stream.is_none() || jobs.len() == 1);
        let (mut mm_jobs, mut ends, mut kinds) = (Vec::new(), Vec::new(), Vec::<String>::new());
        let mut mm = Value::Null;
        for (j, (block, kind, act, m, out)) in jobs.iter().enumerate() {
            let spec = self.dev.matmul_spec(self.plan, *block, *kind, *m)?;
            // A name of its own per step: the partials of the graph's matmuls never share a
            // tensor, so a kept graph's tensors are never re-allocated under it.
            let partials = format!("{}/partials/{}/{j}", self.scratch, self.steps.len());
            let mut h = spec.header;
            h["act"] = json!(act);
            h["out"] = json!(partials);
            let mut end = json!({
                "x": partials, "bias": bias_name(*block, *kind), "out": out,
                "mt": tiles(*m), "nt": spec.nt, "k_split": spec.k_split,
            });
            if let Some(x) = stream {
                end["res"] = json!(x);
            }
            ends.push(end);
            if mm.is_null() {
                mm = h.clone(); // the arena, dtypes and fidelity every job shares
                if let Some(o) = mm.as_object_mut() {
                    o.remove("units");
                }
            }
            mm_jobs.push(h);
            let k = format!("{kind:?}");
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        let kinds = kinds.join("+");
        mm["jobs"] = json!(mm_jobs);
        let names = [
            self.source("mm_reader", || {
                with_task_table(super::backend::READER_KERNEL)
            }),
            self.source("mm_compute", || super::backend::COMPUTE_KERNEL.into()),
            self.source("mm_writer", || {
                with_task_table(super::backend::WRITER_KERNEL)
            }),
        ];
        mm["kernels"] = json!({"reader": names[0], "compute": names[1], "writer": names[2]});
        let (act_name, act_row) = match (gelu, stream.is_some()) {
            (true, _) => ("finish_gelu", "gr00t_sfpu::gelu_tanh_row"),
            (false, false) => ("finish", "gr00t_sfpu::no_act"),
            (false, true) => ("finish_residual", "gr00t_sfpu::no_act"),
        };
        let compute = self.source(act_name, || {
            let mut defines = vec![("GR00T_ACT_ROW", act_row)];
            defines.extend(stream.map(|_| FINISH_RESIDUAL_DEFINE));
            compose_compute(BIAS_ACT_KERNEL, &defines)
        });
        let reader = match stream {
            None => self.source("finish_reader", || with_task_table(READER_FINISH_KERNEL)),
            Some(_) => self.source("finish_reader_residual", || {
                with_task_table(&compose_compute(
                    READER_FINISH_KERNEL,
                    &[FINISH_RESIDUAL_DEFINE],
                ))
            }),
        };
        let writer = self.source("writer_runs", || with_task_table(WRITER_RUNS_KERNEL));
        let label = match (gelu, stream) {
            (true, _) => format!("matmul {kinds} + GELU"),
            (false, None) => format!("matmul {kinds}"),
            (false, Some(_)) => format!("matmul {kinds} + residual"),
        };
        let finish = json!({
            // The cores its units are cut for come with the chain (`end_cut`, graph_pack.rs).
            "jobs": ends, "out_f32": out_f32 || stream.is_some(), "unit_tiles": FINISH_UNIT_TILES,
            "group": end_kernels(act_name, out_f32 || stream.is_some()),
            "kernels": {"reader": reader, "compute": compute, "writer": writer},
        });
        // One program: the matmul on the plan's cores, the ends on others, a semaphore between;
        // and the LayerNorm or attention that makes the matmul's input, when it is the step just
        // before, on other cores again, a semaphore between it and the matmul.
        let before = match self.steps.last() {
            Some(s)
                if (s["kind"] == "rows" || s["kind"] == "attention")
                    && jobs.iter().all(|j| s["out"].as_str() == Some(j.2)) =>
            {
                self.steps.pop()
            }
            _ => None,
        };
        let label = match &before {
            Some(b) => {
                let what = b["label"].as_str().or(b["kind"].as_str()).unwrap_or("rows");
                format!("{what} + {label}")
            }
            None => label,
        };
        self.steps.push(json!({
            "kind": "matmul_end", "before": before, "matmul": mm, "finish": finish, "label": label,
        }));
        Ok(())
    }

    /// One matmul and its end: [`Graph::matmuls`] with one job.
    fn matmul(
        &mut self,
        block: usize,
        kind: WeightKind,
        act: &str,
        m: usize,
        out: &str,
        end: End<'_>,
    ) -> Result<(), DitRunError> {
        self.matmuls(&[(block, kind, act, m, out.to_string())], end, false)
    }

    /// LayerNorm of the fp32 stream `x` (`row_tiles` tile rows, width `d`): with `ada`, the
    /// AdaLN modulation from the AdaLN matmul's `[scale | shift]` row `ada` as it is (the reader
    /// splits it); else the plain norm.
    fn layernorm(&mut self, x: &str, d: usize, row_tiles: usize, ada: Option<&str>, out: &str) {
        let wt = tiles(d);
        let float = |v: f32| format!("__builtin_bit_cast(float, {:#010x}u)", v.to_bits());
        let (name, g, b, b_col) = match ada {
            Some(t) => ("ln_ada", t, t, d),
            None => ("ln_plain", "c/ones", "c/zeros", 0),
        };
        let mut work = json!({"2": wt, "3": wt, "4": wt, "5": wt, "6": 1, "7": 1, "8": wt});
        if b_col % 32 != 0 {
            // The scratch the reader copies the shift's tiles through (tiny D; D = 1536 has none).
            work["9"] = json!(wt + 1);
        }
        let compute = self.source(name, || {
            let mut defs = vec![
                ("GR00T_LN_INV_D", float(1.0 / d as f32)),
                ("GR00T_LN_EPS", float(LN_EPS)),
            ];
            if ada.is_some() {
                defs.push(("GR00T_LN_ONE_PLUS_G", "1".into()));
            }
            let defs: Vec<(&str, &str)> = defs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            compose_compute(LAYERNORM_KERNEL, &defs)
        });
        let reader = self.source("reader_rows", || with_task_table(READER_ROWS_KERNEL));
        let writer = self.source("writer_tiles", || with_task_table(WRITER_TILES_KERNEL));
        self.steps.push(json!({
            "kind": "rows", "x": x, "scaler": "c/scaler", "g": g, "b": b, "b_col": b_col,
            "vec_len": d, "out": out, "out_f32": false, "wt": wt, "row_tiles": row_tiles,
            "vec_tiles": wt, "label": name, "work_cbs": work,
            "unpack_to_dest": [], "cores": ROW_CORES, "group": name,
            "kernels": {"reader": reader, "compute": compute, "writer": writer},
        }));
    }

    /// Segments of columns from `src` to `dst` (`rows` tile rows, `dst_w` tiles wide): each
    /// progression `[count, dr0, drs, dc0, dcs, sr0, srs, sc0, scs, len]` (see the kernel).
    #[allow(clippy::too_many_arguments)]
    fn relayout(
        &mut self,
        src: &str,
        src_w: usize,
        dst: &str,
        rows: usize,
        dst_w: usize,
        dtype: &str,
        progs: Vec<[usize; 10]>,
    ) {
        let span = progs.iter().map(|p| tiles(p[9]) + 1).max().unwrap_or(1);
        let kernel = self.source("relayout", || with_tile_columns(RELAYOUT_KERNEL));
        self.steps.push(json!({
            "kind": "relayout", "src": src, "dst": dst, "rows": rows, "src_w": src_w,
            "dst_w": dst_w, "dtype": dtype, "progs": progs, "span": span, "cores": ROW_CORES,
            "kernel": kernel,
        }));
    }

    /// `out` = attention per head over the projections' `[rows, heads·hd]` tensors (`mt` query
    /// tile rows, `nt` key tile rows): the heads are split in the reader, merged in the writer.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &mut self,
        q: &str,
        k: &str,
        v: &str,
        mask: &str,
        mt: usize,
        nt: usize,
        out: &str,
    ) {
        let dims = &self.plan.dims;
        let (heads, hd) = (dims.num_heads, dims.head_dim);
        let scale = (hd as f32).powf(-0.5);
        let compute = self.source("attention", || {
            compose_compute(
                ATTENTION_KERNEL,
                &[(
                    "GR00T_ATTN_SCALE",
                    &format!("__builtin_bit_cast(float, {:#010x}u)", scale.to_bits()),
                )],
            )
        });
        let reader = self.source("reader_attention", reader_attention_kernel);
        let writer = self.source("writer_merge_heads", writer_merge_kernel);
        self.steps.push(json!({
            "kind": "attention", "q": q, "k": k, "v": v, "scaler": "c/scaler", "mask": mask,
            "out": out, "heads": heads, "mp": mt * 32, "np": nt * 32, "hd": hd,
            "cores": ROW_CORES,
            // Self, text and image attentions differ in their keys' tiles, so in their CBs.
            "group": format!("attention/{}", mask.rsplit('/').next().unwrap_or(mask)),
            "kernels": {"reader": reader, "compute": compute, "writer": writer},
        }));
    }

    /// The worker's request: `inputs` put first, then the steps; `outputs` read back; every
    /// `t/` tensor released at the end, unless the graph is kept under the name `keep` for the
    /// worker to run again (`op_replay`: a step's graph is the same step after step, only its
    /// inputs differ), which holds them. Runs of matmul-and-end steps go as programs of several
    /// steps, with the cores of every phase, as the plan packs them
    /// ([`tt_blackhole::plan::program::pack_programs`] on the device's grid; each step a program
    /// of its own when `GR00T_MK_CHAIN=0`). Also answers how many programs that is.
    /// `outputs`: (name, real rows, real columns).
    pub(crate) fn request(
        self,
        inputs: &Upload,
        outputs: &[(&str, usize, usize)],
        keep: Option<&str>,
    ) -> Result<(Value, usize), DitRunError> {
        let mut free: Vec<String> = self
            .steps
            .iter()
            .flat_map(|s| [s, &s["before"], &s["matmul"], &s["finish"]])
            .flat_map(|s| {
                let jobs = s["jobs"].as_array().map_or(&[][..], Vec::as_slice);
                std::iter::once(s).chain(jobs)
            })
            .filter_map(|s| s["out"].as_str().or(s["dst"].as_str()))
            .chain(inputs.specs.iter().filter_map(|s| s["name"].as_str()))
            .filter(|n| n.starts_with("t/") || n.starts_with("a/"))
            .map(str::to_string)
            .collect();
        free.sort();
        free.dedup();
        let chain = std::env::var("GR00T_MK_CHAIN").as_deref() != Ok("0");
        let (steps, programs) = super::graph_pack::pack(self.steps, self.dev.info.grid, chain)?;
        let mut request = json!({
            "op": "graph", "inputs": inputs.specs, "steps": steps, "outputs": outputs,
            "free": free, "sources": self.sources,
        });
        if let Some(name) = keep {
            request["keep"] = json!(name);
        }
        Ok((request, programs))
    }

    /// How many steps the graph has (runs of them share programs: [`Graph::request`]).
    pub(crate) fn steps(&self) -> usize {
        self.steps.len()
    }
}

/// Rows of `x` (`[rows, d]`) where `mask` is true, and how many.
fn select_rows(x: &[f32], d: usize, mask: &[bool]) -> (Vec<f32>, usize) {
    let mut out = Vec::new();
    for (row, _) in x.chunks_exact(d).zip(mask).filter(|(_, k)| **k) {
        out.extend(row.iter().map(|v| round_to_bf16(*v)));
    }
    let n = out.len() / d.max(1);
    (out, n)
}

/// Key rows each cross kind attends (text, image), from the observation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CrossKeys {
    pub text: usize,
    pub image: usize,
}

/// The observation's graph: its context rows (bf16) and key masks put on the device, every
/// cross block's K and V computed there once, in the per-head layout the steps read.
pub(crate) fn observation_graph<'a>(
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    w: &DitWeights,
    context: &[f32],
    text_mask: &[bool],
    image_mask: &[bool],
) -> Result<(Graph<'a>, Upload, CrossKeys), DitRunError> {
    let dims = &plan.dims;
    let cross = dims.cross_dim;
    let cw = tiles(cross) * 32;
    let mut up = Upload::new();
    let mut g = Graph::new(dev, plan);
    g.scratch = "o";
    let mut keys = CrossKeys::default();
    let self_np = tiles(dims.sa_tokens) * 32;
    up.add(
        "o/mask/self",
        32,
        self_np,
        "f32",
        &mask_tile(&vec![true; dims.sa_tokens], self_np),
    );
    for (which, mask) in [("text", text_mask), ("image", image_mask)] {
        let (rows, n) = select_rows(context, cross, mask);
        let np = tiles(n.max(1)) * 32;
        up.add_padded(&format!("o/ctx/{which}"), &rows, n, cross, np, cw, "bf16");
        up.add(
            &format!("o/mask/{which}"),
            32,
            np,
            "f32",
            &mask_tile(&vec![true; n], np),
        );
        if which == "text" {
            keys.text = n;
        } else {
            keys.image = n;
        }
    }
    // Every cross block's K and V: independent matmuls, one program (and one for their ends).
    let mut jobs = Vec::new();
    for (i, b) in w.blocks.iter().enumerate() {
        let (ctx, n) = match b.kind {
            BlockKind::SelfAttn => continue,
            BlockKind::CrossText => ("o/ctx/text", keys.text),
            BlockKind::CrossImage => ("o/ctx/image", keys.image),
        };
        if n == 0 {
            continue; // no keys: the block's attention gives 0 without K and V
        }
        for (kind, name) in [(WeightKind::K, "k"), (WeightKind::V, "v")] {
            jobs.push((i, kind, ctx, n, format!("o/{name}/{i}")));
        }
    }
    if !jobs.is_empty() {
        g.matmuls(&jobs, End::Plain, false)?;
    }
    Ok((g, up, keys))
}

/// A step's inputs: `tokens` `[m, d]` (the fp32 stream) as `t/x0`; all a replay of the step's
/// kept graph sends (SiLU(temb) went in with its timestep's graph, [`ada_graph`]).
pub(crate) fn step_inputs(d: usize, tokens: &[f32]) -> Upload {
    let m = tokens.len() / d;
    let mut up = Upload::new();
    up.add_padded("t/x0", tokens, m, d, tiles(m) * 32, tiles(d) * 32, "f32");
    up
}

/// The name of block `block`'s AdaLN rows (`[scale | shift]`, fp32) for the timestep in `slot`.
fn ada_name(slot: usize, block: usize) -> String {
    format!("c/ada/{slot}/{block}")
}

/// A timestep's graph: SiLU(temb) (`act`, bf16 values) put as `c/temb/{slot}`, and every block's
/// AdaLN rows computed from it into `c/ada/{slot}/{block}` (the matmuls and their ends, one
/// program). They depend on the timestep alone, and a forward's timesteps are the same every
/// forward: computed once per timestep and device, they leave the steps' weight stream (the
/// AdaLN weights are about 14 % of the bytes a step streamed; docs/blackhole.md §4, §15).
pub(crate) fn ada_graph<'a>(
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    w: &DitWeights,
    act: &[f32],
    slot: usize,
) -> Result<(Graph<'a>, Upload), DitRunError> {
    let d = plan.dims.width();
    let temb = format!("c/temb/{slot}");
    let mut up = Upload::new();
    up.add_padded(&temb, act, 1, d, 32, tiles(d) * 32, "bf16");
    let mut g = Graph::new(dev, plan);
    g.scratch = "a";
    let ada: Vec<_> = (0..w.blocks.len())
        .map(|i| (i, WeightKind::AdaNorm, temb.as_str(), 1, ada_name(slot, i)))
        .collect();
    g.matmuls(&ada, End::Plain, true)?;
    Ok((g, up))
}

/// One denoising step's graph: `tokens` `[sa_tokens, D]` (fp32 stream) in, the AdaLN rows of
/// the timestep in `slot` ([`ada_graph`]) read on the device, the name of the stream after the
/// last block out.
pub(crate) fn step_graph<'a>(
    dev: &'a TtDevice,
    plan: &'a MegakernelPlan,
    w: &DitWeights,
    tokens: &[f32],
    slot: usize,
    keys: CrossKeys,
) -> Result<(Graph<'a>, Upload, String), DitRunError> {
    let dims = &plan.dims;
    let d = dims.width();
    let m = tokens.len() / d;
    let (mt, wt) = (tiles(m), tiles(d));
    let up = step_inputs(d, tokens);
    let mut g = Graph::new(dev, plan);
    let mut x = "t/x0".to_string();
    for (i, b) in w.blocks.iter().enumerate() {
        let (xa, xb) = (format!("t/x{}", 2 * i + 1), format!("t/x{}", 2 * i + 2));
        g.layernorm(&x, d, mt, Some(&ada_name(slot, i)), "t/h");
        let (k, v, mask, n) = match b.kind {
            BlockKind::SelfAttn => {
                // Q, K and V all read h: one program (and one for the ends).
                let qkv = [
                    (WeightKind::Q, "t/q"),
                    (WeightKind::K, "t/k"),
                    (WeightKind::V, "t/v"),
                ]
                .map(|(kind, name)| (i, kind, "t/h", m, name.to_string()));
                g.matmuls(&qkv, End::Plain, false)?;
                ("t/k".into(), "t/v".into(), "o/mask/self".to_string(), m)
            }
            BlockKind::CrossText | BlockKind::CrossImage => {
                g.matmul(i, WeightKind::Q, "t/h", m, "t/q", End::Plain)?;
                let (mask, n) = if b.kind == BlockKind::CrossText {
                    ("o/mask/text", keys.text)
                } else {
                    ("o/mask/image", keys.image)
                };
                (format!("o/k/{i}"), format!("o/v/{i}"), mask.to_string(), n)
            }
        };
        if n == 0 {
            // Attention over no keys is 0 (the emulator's), a zero-filled relayout.
            g.relayout("t/q", wt, "t/a", mt, wt, "bf16", Vec::new());
        } else {
            g.attention("t/q", &k, &v, &mask, mt, tiles(n), "t/a");
        }
        g.matmul(i, WeightKind::Out, "t/a", m, &xa, End::Stream(&x))?;
        g.layernorm(&xa, d, mt, None, "t/h");
        g.matmul(i, WeightKind::FfUp, "t/h", m, "t/f", End::Gelu)?;
        g.matmul(i, WeightKind::FfDown, "t/f", m, &xb, End::Stream(&xa))?;
        x = xb;
    }
    Ok((g, up, x))
}
