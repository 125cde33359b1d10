//! [`Graph`]: a graph of device programs under construction, step by step (a LayerNorm, a
//! matmul and its end, an attention, a relayout), as the worker's `graph` request
//! ([`super::protocol::Graph`]) holds them; `graph.rs` builds the DiT's graphs with it.

use std::collections::BTreeMap;

use tt_blackhole::arena::ArenaIndex;
use tt_blackhole::device::DitRunError;
use tt_blackhole::dims::WeightKind;
use tt_blackhole::plan::program::{FINISH_UNIT_TILES, ROW_CORES, end_kernels};
use tt_blackhole::plan::{L1_BUDGET, MegakernelPlan};

use super::attention::{
    ATTENTION_KERNEL, reader_attention_kernel, with_tile_columns, writer_merge_kernel,
};
use super::backend::{TtDevice, matmul_spec, packed_matmul_spec};
use super::graph::{
    READER_FINISH_KERNEL, RELAYOUT_KERNEL, Upload, WRITER_RUNS_KERNEL, bias_name, tiles,
};
use super::graph_steps::{
    AttentionStep, BeforeStep, FinishJob, FinishStep, GraphStep, MatmulEndStep, MatmulGroup,
    MatmulJob, MatmulShared, RelayoutStep,
};
use super::head_graph::HEAD_ARENA;
use super::protocol::{ActDtype, Graph as GraphRequest, KernelSet};
use super::rows::{BIAS_ACT_KERNEL, FINISH_RESIDUAL_DEFINE};
use super::sfpu::compose_compute;
use super::task_table::with_task_table;
use super::vision_graph::BACKBONE_ARENA;
use gr00t_megakernel::backbone_arena::{BackboneArena, BackboneWeight};
use gr00t_megakernel::head_arena::{HeadArena, HeadWeight};

/// What a matmul's end does after the bias (and the bf16 rounding).
#[derive(Clone, Copy)]
pub(super) enum End<'a> {
    /// Nothing: the output as the next matmul or attention takes it (bf16 values).
    Plain,
    /// The FF-up's GELU (tanh form).
    Gelu,
    /// The exact GELU (erf form): the Eagle projector's first Linear.
    GeluErf,
    /// ReLU (the state encoder's and the action decoder's first layers).
    Relu,
    /// SiLU (the action encoder's W2).
    Silu,
    /// The residual add: the fp32 tensor named here plus the output, kept fp32 (the DiT's
    /// stream; the action position embedding; the Euler update's chunk).
    Stream(&'a str),
    /// [`End::Stream`] rounded to bf16 (the Euler update's chunk as the next action encoder
    /// reads it: the same sum as the fp32 one, packed to bf16).
    StreamBf16(&'a str),
    /// The output times the fp32 tensor named here, packed to bf16: SwiGLU's
    /// `up(x) · SiLU(gate(x))`, the gate's own end ([`End::Silu`], fp32) having written it.
    Gated(&'a str),
}

impl End<'_> {
    /// The end's compute kernel name, its SFPU activation routine and its fp32 tensor to add.
    fn parts(&self) -> (&'static str, &'static str, Option<&str>) {
        match self {
            End::Plain => ("finish", "gr00t_sfpu::no_act", None),
            End::Gelu => ("finish_gelu", "gr00t_sfpu::gelu_tanh_row", None),
            End::GeluErf => ("finish_gelu_erf", "gr00t_sfpu::gelu_erf_row", None),
            End::Relu => ("finish_relu", "gr00t_sfpu::relu_row", None),
            End::Silu => ("finish_silu", "gr00t_sfpu::silu_row", None),
            End::Stream(x) | End::StreamBf16(x) => {
                ("finish_residual", "gr00t_sfpu::no_act", Some(x))
            }
            End::Gated(x) => ("finish_gated", "gr00t_sfpu::no_act", Some(x)),
        }
    }

    /// Whether the output is fp32 whatever the caller asks: the residual add's sum.
    fn forces_f32(&self) -> bool {
        matches!(self, End::Stream(_))
    }

    fn label(&self) -> &'static str {
        match self {
            End::Plain => "",
            End::Gelu => " + GELU",
            End::GeluErf => " + GELU(erf)",
            End::Relu => " + ReLU",
            End::Silu => " + SiLU",
            End::Stream(_) => " + residual",
            End::StreamBf16(_) => " + residual (bf16)",
            End::Gated(_) => " × gate",
        }
    }
}

/// The weight a matmul streams: a DiT block's (the DiT arena), the action head's (the head
/// arena, `gr00t_megakernel::head_arena`) or the backbone's (`gr00t_megakernel::backbone_arena`).
#[derive(Clone, Copy, Debug)]
pub(super) enum Weight {
    /// Block `.0`'s `.1`.
    Dit(usize, WeightKind),
    /// The head's.
    Head(HeadWeight),
    /// The backbone's.
    Backbone(BackboneWeight),
}

/// The heads of an attention step ([`Graph::attention_heads`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct AttnHeads {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (GQA: `heads` a multiple of them; else `heads`).
    pub kv_heads: usize,
    /// Each head's width in the tensors.
    pub hd: usize,
    /// The head's own width, which the scores are scaled by (`1/√real_hd`): `hd`, or less
    /// when the heads are padded to whole tiles (`gr00t_megakernel::head_layout`; the padding is zero).
    pub real_hd: usize,
    /// Query row i attends keys j ≤ i only (a prompt's self-attention).
    pub causal: bool,
}

/// One matmul of a [`Graph::jobs`] step: `out` = END(bf16(`act` · W + `bias`)).
pub(super) struct Job {
    pub weight: Weight,
    /// The activation tensor (bf16) and its real rows (its tile rows are read).
    pub act: String,
    pub m: usize,
    pub out: String,
    /// The bias tensor (a row replicated over 32 rows, fp32).
    pub bias: String,
    /// The output tensor's tile rows when it holds more than this matmul writes
    /// ([`FinishJob::out_rows`]).
    pub out_rows: Option<usize>,
    /// The output's tile row this matmul's first goes to ([`FinishJob::out_row0`]).
    pub out_row0: usize,
}

/// One graph under construction: its steps and the kernel sources they name.
pub(crate) struct Graph<'a> {
    /// The DiT arena's index (its matmuls' weights).
    index: &'a ArenaIndex,
    /// The device's worker grid (the packer's).
    grid: [usize; 2],
    pub(super) plan: &'a MegakernelPlan,
    /// The action head's packed weights, for [`Weight::Head`] matmuls.
    pub(super) head: Option<&'a HeadArena>,
    /// The backbone's packed weights, for [`Weight::Backbone`] matmuls.
    pub(super) backbone: Option<&'a BackboneArena>,
    pub(super) steps: Vec<GraphStep>,
    sources: BTreeMap<String, String>,
    /// The prefix of the matmuls' partials: `t` in a step's graph, `o` in the observation's,
    /// `a` in a timestep's, `v` in the vision graph's, `l` in the LLM's (which must not take a
    /// kept graph's tensors: `op_replay`).
    pub(super) scratch: &'static str,
}

impl<'a> Graph<'a> {
    pub(crate) fn new(dev: &'a TtDevice, plan: &'a MegakernelPlan) -> Self {
        Graph::for_arena(&dev.index, dev.info.grid, plan)
    }

    /// A graph over the DiT arena `index` for a device of worker grid `grid`: what a graph is
    /// built from (no device is needed to build one, only to run it).
    pub(crate) fn for_arena(
        index: &'a ArenaIndex,
        grid: [usize; 2],
        plan: &'a MegakernelPlan,
    ) -> Self {
        Graph {
            index,
            grid,
            plan,
            head: None,
            backbone: None,
            steps: Vec::new(),
            sources: BTreeMap::new(),
            scratch: "t",
        }
    }

    /// A kernel source, sent once per graph and named by its steps.
    pub(super) fn source(&mut self, name: &str, src: impl FnOnce() -> String) -> String {
        if !self.sources.contains_key(name) {
            self.sources.insert(name.to_string(), src());
        }
        name.to_string()
    }

    /// For each job `(block, kind, act, m, out)`: `out` = ACT(bf16(act · W(block, kind) + bias)),
    /// `m` the real rows of `act` (its tile rows are read). The jobs are independent: one program
    /// does them all and their ends: the matmul kernels on the plan's cores (fp32 partials per K
    /// piece, each job its own), the ends on the grid's other cores once a semaphore says every
    /// partial is written (`out_f32`: kept as fp32, as LayerNorm's reader takes the AdaLN rows).
    /// `End::Stream(x)` (one job): `out` = x + that, the residual add in the end, fp32.
    pub(super) fn matmuls(
        &mut self,
        jobs: &[(usize, WeightKind, &str, usize, String)],
        end: End<'_>,
        out_f32: bool,
    ) -> Result<(), DitRunError> {
        let jobs: Vec<Job> = jobs
            .iter()
            .map(|(block, kind, act, m, out)| Job {
                weight: Weight::Dit(*block, *kind),
                act: act.to_string(),
                m: *m,
                out: out.clone(),
                bias: bias_name(*block, *kind),
                out_rows: None,
                out_row0: 0,
            })
            .collect();
        self.jobs(&jobs, end, out_f32)
    }

    /// [`Graph::matmuls`] over [`Job`]s: any arena's weights, any bias tensor.
    pub(super) fn jobs(
        &mut self,
        jobs: &[Job],
        end: End<'_>,
        out_f32: bool,
    ) -> Result<(), DitRunError> {
        let (act_name, act_row, stream) = end.parts();
        debug_assert!(stream.is_none() || jobs.len() == 1);
        let (mut mm_jobs, mut ends, mut kinds) = (Vec::new(), Vec::new(), Vec::<String>::new());
        let mut shared = None;
        for (j, job) in jobs.iter().enumerate() {
            let spec = match job.weight {
                Weight::Dit(block, kind) => matmul_spec(self.index, self.plan, block, kind, job.m)?,
                Weight::Head(w) => {
                    let head = self.head.ok_or_else(|| {
                        DitRunError::Arena(format!("no head arena for the head's {w:?}"))
                    })?;
                    packed_matmul_spec(HEAD_ARENA, &head.weights, w, job.m)?
                }
                Weight::Backbone(w) => {
                    let bb = self.backbone.ok_or_else(|| {
                        DitRunError::Arena(format!("no backbone arena for the backbone's {w:?}"))
                    })?;
                    packed_matmul_spec(BACKBONE_ARENA, &bb.weights, w, job.m)?
                }
            };
            // A name of its own per step: the partials of the graph's matmuls never share a
            // tensor, so a kept graph's tensors are never re-allocated under it.
            let partials = format!("{}/partials/{}/{j}", self.scratch, self.steps.len());
            ends.push(FinishJob {
                x: partials.clone(),
                bias: job.bias.clone(),
                out: job.out.clone(),
                mt: tiles(job.m),
                nt: spec.nt,
                k_split: spec.k_split,
                res: stream.map(str::to_string),
                out_rows: job.out_rows,
                out_row0: job.out_row0,
            });
            // The arena, dtypes and fidelity every job shares (one arena per step).
            if let Some(s) = &shared {
                let s: &MatmulShared = s;
                if s.arena != spec.shared.arena {
                    return Err(DitRunError::Arena(
                        "one matmul step reads one arena: DiT and head weights mixed".into(),
                    ));
                }
            }
            shared.get_or_insert(spec.shared);
            mm_jobs.push(MatmulJob {
                act: Some(job.act.clone()),
                out: Some(partials),
                ..spec.job
            });
            let k = match job.weight {
                Weight::Dit(_, kind) => format!("{kind:?}"),
                Weight::Head(w) => format!("{w:?}"),
                Weight::Backbone(w) => format!("{w:?}"),
            };
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        let Some(mut shared) = shared else {
            return Ok(());
        };
        let kinds = kinds.join("+");
        shared.kernels = KernelSet {
            reader: self.source("mm_reader", || {
                with_task_table(super::backend::READER_KERNEL)
            }),
            compute: self.source("mm_compute", || {
                compose_compute(super::backend::COMPUTE_KERNEL, &[])
            }),
            writer: self.source("mm_writer", || {
                with_task_table(super::backend::WRITER_KERNEL)
            }),
        };
        let compute = self.source(act_name, || {
            let mut defines = vec![("GR00T_ACT_ROW", act_row)];
            defines.extend(stream.map(|_| FINISH_RESIDUAL_DEFINE));
            if matches!(end, End::Gated(_)) {
                defines.push(("GR00T_FINISH_MUL", "1"));
            }
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
        let label = format!("matmul {kinds}{}", end.label());
        let finish = FinishStep {
            // The cores its units are cut for come with the chain (`end_cut`, graph_pack.rs).
            jobs: ends,
            out_f32: out_f32 || end.forces_f32(),
            unit_tiles: FINISH_UNIT_TILES,
            group: end_kernels(act_name, out_f32 || end.forces_f32()),
            kernels: KernelSet {
                reader,
                compute,
                writer,
            },
            cut: None,
        };
        // One program: the matmul on the plan's cores, the ends on others, a semaphore between;
        // and the LayerNorm or attention that makes the matmul's input, when it is the step just
        // before, on other cores again, a semaphore between it and the matmul.
        let feeds = |out: &str| jobs.iter().all(|j| out == j.act);
        let before = match self.steps.pop() {
            Some(GraphStep::Rows(r)) if feeds(&r.out) => Some(BeforeStep::Rows(r)),
            Some(GraphStep::Attention(a)) if feeds(&a.out) => Some(BeforeStep::Attention(a)),
            Some(other) => {
                self.steps.push(other);
                None
            }
            None => None,
        };
        let label = match &before {
            Some(b) => format!("{} + {label}", b.label()),
            None => label,
        };
        self.steps
            .push(GraphStep::MatmulEnd(Box::new(MatmulEndStep {
                before,
                matmul: MatmulGroup {
                    shared,
                    jobs: mm_jobs,
                },
                finish,
                label,
            })));
        Ok(())
    }

    /// One matmul and its end: [`Graph::matmuls`] with one job.
    pub(super) fn matmul(
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

    /// Segments of columns from `src` to `dst` (`rows` tile rows, `dst_w` tiles wide): each
    /// progression `[count, dr0, drs, dc0, dcs, sr0, srs, sc0, scs, len]` (see the kernel).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn relayout(
        &mut self,
        src: &str,
        src_w: usize,
        dst: &str,
        rows: usize,
        dst_w: usize,
        dtype: ActDtype,
        progs: Vec<[usize; 10]>,
    ) {
        let span = progs.iter().map(|p| tiles(p[9]) + 1).max().unwrap_or(1);
        let kernel = self.source("relayout", || with_tile_columns(RELAYOUT_KERNEL));
        self.steps.push(GraphStep::Relayout(RelayoutStep {
            src: src.into(),
            dst: dst.into(),
            rows,
            src_w,
            dst_w,
            dtype,
            progs: progs.iter().map(|p| p.to_vec()).collect(),
            span,
            cores: ROW_CORES,
            kernel,
            label: None,
        }));
    }

    /// `out` = attention per head over the projections' `[rows, heads·hd]` tensors (`mt` query
    /// tile rows, `nt` key tile rows): the heads are split in the reader, merged in the writer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attention(
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
        let shape = AttnHeads {
            heads,
            kv_heads: heads,
            hd,
            real_hd: hd,
            causal: false,
        };
        self.attention_heads(q, k, v, mask, [mt, nt], out, shape);
    }

    /// [`Graph::attention`] with heads of the caller's (`shape`: the tower's, Qwen3's GQA and
    /// causal ones), not the DiT's: `[mt, nt]` query and key tile rows; K and V
    /// `[.., kv_heads·hd]`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attention_heads(
        &mut self,
        q: &str,
        k: &str,
        v: &str,
        mask: &str,
        [mt, nt]: [usize; 2],
        out: &str,
        shape: AttnHeads,
    ) {
        let AttnHeads {
            heads,
            kv_heads,
            hd,
            real_hd,
            causal,
        } = shape;
        let scale = (real_hd as f32).powf(-0.5);
        // The scale is compiled in: a head width of its own is a source of its own.
        let name = if real_hd == self.plan.dims.head_dim {
            "attention".to_string()
        } else {
            format!("attention/hd{real_hd}")
        };
        let compute = self.source(&name, || {
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
        self.steps.push(GraphStep::Attention(AttentionStep {
            q: q.into(),
            k: k.into(),
            v: v.into(),
            scaler: "c/scaler".into(),
            mask: mask.into(),
            out: out.into(),
            heads,
            kv_heads,
            causal,
            mp: mt * 32,
            np: nt * 32,
            hd,
            cores: ROW_CORES,
            // Self, text and image attentions differ in their keys' tiles, so in their CBs; a
            // grouped or causal one in its task words too.
            group: {
                let keys = mask.rsplit('/').next().unwrap_or(mask);
                match (kv_heads == heads, causal) {
                    (true, false) => format!("attention/{keys}"),
                    _ => format!("attention/{keys}/kv{kv_heads}/causal{causal}"),
                }
            },
            kernels: KernelSet {
                reader,
                compute,
                writer,
            },
        }));
    }

    /// The worker's request: `inputs` put first, then the steps; `outputs` read back; every
    /// `t/` tensor released at the end, unless the graph is kept under the name `keep` for the
    /// worker to run again (`op_replay`: a step's graph is the same step after step, only its
    /// inputs differ), which holds them. Runs of matmul-and-end steps go as programs of several
    /// steps, with the cores of every phase, as the plan packs them
    /// ([`tt_blackhole::plan::program::pack_programs`] on the device's grid; each step a program
    /// of its own unless `chain`: `GR00T_MK_CHAIN`, [`super::GraphOptions`]). Also answers how
    /// many programs that is. `outputs`: (name, real rows, real columns).
    pub(crate) fn request(
        self,
        inputs: &Upload,
        outputs: &[(&str, usize, usize)],
        keep: Option<&str>,
        chain: bool,
    ) -> Result<(GraphRequest, usize), DitRunError> {
        let (request, _) = self.lowered(inputs, outputs, keep, chain)?;
        let programs = request.programs.len();
        Ok((request, programs))
    }

    /// [`Graph::request`] and the packed steps its programs were lowered from.
    pub(crate) fn lowered(
        self,
        inputs: &Upload,
        outputs: &[(&str, usize, usize)],
        keep: Option<&str>,
        chain: bool,
    ) -> Result<(GraphRequest, Vec<GraphStep>), DitRunError> {
        let mut free: Vec<String> = self
            .steps
            .iter()
            .flat_map(GraphStep::outputs)
            .chain(inputs.specs().iter().map(|s| s.name.as_str()))
            .filter(|n| ["t/", "a/", "v/", "l/"].iter().any(|p| n.starts_with(p)))
            .map(str::to_string)
            .collect();
        free.sort();
        free.dedup();
        // A norm too wide for a core's L1 is refused here, by name, not by the device's
        // allocator mid-graph.
        for st in &self.steps {
            let rows = match st {
                GraphStep::Rows(r) => Some(r),
                GraphStep::MatmulEnd(m) => match &m.before {
                    Some(BeforeStep::Rows(r)) => Some(r),
                    _ => None,
                },
                _ => None,
            };
            if let Some(r) = rows.filter(|r| r.l1_bytes() > L1_BUDGET) {
                return Err(DitRunError::Input(format!(
                    "{} over {} columns needs {} B of L1 per core, more than the {L1_BUDGET} B \
                     a core's CBs may take: our row kernels hold whole rows (a norm this wide \
                     needs a streaming one)",
                    r.label,
                    r.vec_len.max(32 * r.wt),
                    r.l1_bytes()
                )));
            }
        }
        let (steps, programs) = super::graph_pack::pack(self.steps, self.grid, chain)?;
        let lowered = super::lower::lower(&steps, self.grid)?;
        debug_assert_eq!(lowered.len(), programs, "a program a packed step");
        let request = GraphRequest {
            inputs: inputs.specs().to_vec(),
            programs: lowered,
            outputs: outputs
                .iter()
                .map(|(n, r, c)| (n.to_string(), *r, *c))
                .collect(),
            free,
            sources: self.sources,
            keep: keep.map(str::to_string),
        };
        Ok((request, steps))
    }

    /// How many steps the graph has (runs of them share programs: [`Graph::request`]).
    pub(crate) fn steps(&self) -> usize {
        self.steps.len()
    }
}
