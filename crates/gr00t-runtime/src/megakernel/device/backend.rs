//! [`TtDevice`]: the DiT blocks of a denoise step on a Tenstorrent device (a p150a, or the
//! ttsim simulator of one) through the ttnn worker.
//!
//! * Boot: open the device, upload the arena's bytes as they are (one arena tile per DRAM page,
//!   pages interleaved over the banks: `tt_blackhole::dram::interleaved`), no conversion.
//! * Every matmul of the plan's schedule is one device program over the compute cores the plan
//!   gives the weight (`tt_blackhole::plan::compute_coord` of each work unit): our reader
//!   streams the unit's weight tiles from the arena buffer in arena order, our compute kernel
//!   multiplies on the FPU (fp32 destination), our writer stores the fp32 partials; the K
//!   pieces of split columns are added in piece order on the host, then bias and the bf16
//!   pack ([`finish_matmul`]), exactly as the emulator does.
//! * The SFPU work (SiLU, LayerNorm, attention's softmax, GELU) runs on the host between device
//!   phases ([`SfpuPlacement::Host`], the only placement this build has: the simulator cannot
//!   run SFPU code and no SFPU kernels exist yet); `/info` names it in the stage.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;
use tt_blackhole::arena::ArenaIndex;
use tt_blackhole::device::{DeviceKind, DitDevice, DitRunError, DitStepInputs};
use tt_blackhole::dims::{DitDims, WeightKind};
use tt_blackhole::plan::{CoreRole, MegakernelPlan, build_plan, compute_coord};

use super::worker::{TtnnWorker, WorkerError};
use crate::megakernel::emulator::{StepMatmul, finish_matmul, recut_plan, run_step_with};
use crate::model::dit::DitWeights;

/// Our device kernels (C++, JIT-compiled by tt-metal on first use), shipped in the binary.
pub const READER_KERNEL: &str = include_str!("kernels/reader_share.cpp");
/// The compute kernel: multiplies the streamed weight tiles on the FPU into an fp32 destination.
pub const COMPUTE_KERNEL: &str = include_str!("kernels/matmul_share.cpp");
/// The writer kernel: stores each work unit's fp32 partials for the host to sum.
pub const WRITER_KERNEL: &str = include_str!("kernels/writer_partials.cpp");

/// Where the SFPU steps (SiLU, LayerNorm, softmax, GELU) run. A compile-time choice: only
/// `Host` exists in this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SfpuPlacement {
    /// On the host between device phases (what the simulator needs: it has no SFPU).
    Host,
}

/// This build's placement.
pub const SFPU: SfpuPlacement = SfpuPlacement::Host;

/// The name of the arena buffer on the device.
const ARENA: &str = "arena";

/// What the device said when it opened.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct DeviceInfo {
    /// Chip architecture as ttnn names it (e.g. `Arch.BLACKHOLE`).
    pub arch: String,
    /// Compute-with-storage grid size, `[x, y]` cores.
    pub grid: [usize; 2],
    /// Whether the device is the ttsim simulator (`TT_METAL_SIMULATOR` set) rather than a card.
    pub simulator: bool,
    /// Number of DRAM banks the arena pages are interleaved over.
    pub dram_banks: usize,
    /// Time to open the device, in milliseconds (worker side).
    pub open_ms: f64,
}

/// Time spent in device programs, per weight kind (for reports and benchmarks).
#[derive(Debug, Clone, Default)]
pub struct MatmulTimes {
    /// (kind, calls, total program time)
    pub by_kind: Vec<(WeightKind, usize, Duration)>,
}

impl MatmulTimes {
    fn add(&mut self, kind: WeightKind, d: Duration) {
        match self.by_kind.iter_mut().find(|(k, _, _)| *k == kind) {
            Some(e) => {
                e.1 += 1;
                e.2 += d;
            }
            None => self.by_kind.push((kind, 1, d)),
        }
    }
}

/// An open device holding the arena: the worker, and what it said when it opened.
pub struct TtDevice {
    kind: DeviceKind,
    /// What the device said when it opened.
    pub info: DeviceInfo,
    worker: Mutex<TtnnWorker>,
    /// Layout of the arena uploaded to the device's DRAM.
    pub index: ArenaIndex,
    times: Mutex<MatmulTimes>,
}

/// One observation's view of the device: the plan cut for its context length, the model's
/// DiT weights (biases, block kinds) for the host steps. The `DitDevice` the executor drives.
pub struct DeviceSteps<'a> {
    /// The open device the steps run on.
    pub dev: &'a TtDevice,
    /// The megakernel plan cut for this observation's context length.
    pub plan: MegakernelPlan,
    weights: &'a DitWeights,
}

/// Error text for the `DitDevice` seam (String errors).
fn err(e: WorkerError) -> DitRunError {
    DitRunError::Device(e.to_string())
}

impl TtDevice {
    /// Start the worker, open `kind` (P150a or Simulator) and upload `arena` (the bytes
    /// `index` describes) to device DRAM.
    pub fn open(kind: DeviceKind, index: &ArenaIndex, arena: &[u8]) -> Result<Self, DitRunError> {
        if arena.len() as u64 != index.total_bytes {
            return Err(DitRunError::Arena(format!(
                "arena holds {} bytes, its index says {}",
                arena.len(),
                index.total_bytes
            )));
        }
        let mut worker = TtnnWorker::spawn().map_err(err)?;
        let device = match kind {
            DeviceKind::Simulator => "sim",
            DeviceKind::P150a => "p150a",
            DeviceKind::Emulator => {
                return Err(DitRunError::Device(
                    "the emulator is not a ttnn device".into(),
                ));
            }
        };
        let (ans, _) = worker
            .call(&json!({"op": "open", "device": device}), &[])
            .map_err(err)?;
        let info: DeviceInfo = serde_json::from_value(ans)
            .map_err(|e| DitRunError::Device(format!("the worker's open reply: {e}")))?;
        let (gx, gy) = (tt_blackhole::plan::GRID_X, tt_blackhole::plan::GRID_Y);
        if info.grid[0] < gx || info.grid[1] < gy {
            return Err(DitRunError::Device(format!(
                "the device's worker grid is {}x{}, the plan needs {gx}x{gy}",
                info.grid[0], info.grid[1]
            )));
        }
        let dev = TtDevice {
            kind,
            info,
            worker: Mutex::new(worker),
            index: index.clone(),
            times: Mutex::new(MatmulTimes::default()),
        };
        dev.upload_arena(arena)?;
        Ok(dev)
    }

    fn call(
        &self,
        header: &serde_json::Value,
        payload: &[u8],
    ) -> Result<(serde_json::Value, Vec<u8>), DitRunError> {
        let mut w = self
            .worker
            .lock()
            .map_err(|_| DitRunError::Device("device worker lock poisoned".into()))?;
        w.call(header, payload).map_err(err)
    }

    fn upload_arena(&self, arena: &[u8]) -> Result<(), DitRunError> {
        let page = self.index.tile_bytes;
        self.call(
            &json!({"op": "upload", "name": ARENA, "page_bytes": page,
                    "pages": self.index.total_tiles}),
            arena,
        )?;
        Ok(())
    }

    /// The arena's bytes as they sit in device DRAM (read back page by page).
    pub fn read_back_arena(&self) -> Result<Vec<u8>, DitRunError> {
        Ok(self.call(&json!({"op": "readback", "name": ARENA}), &[])?.1)
    }

    /// Program time per weight kind so far.
    pub fn times(&self) -> MatmulTimes {
        self.times.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// The device program of one matmul: work units → cores, runtime args and CB sizes from the
    /// plan. Returns the fp32 product `[m, n]` before bias, K pieces added in piece order.
    pub fn matmul_raw(
        &self,
        plan: &MegakernelPlan,
        block: usize,
        kind: WeightKind,
        x: &[f32],
        m: usize,
    ) -> Result<Vec<f32>, DitRunError> {
        let e = self
            .index
            .entry(block, kind)
            .ok_or_else(|| DitRunError::Arena(format!("no block {block} {kind:?}")))?;
        let [k, n] = e.kn_shape;
        let [kt, nt] = e.tiles;
        if x.len() != m * k || m == 0 {
            return Err(DitRunError::Input(format!(
                "matmul {kind:?}: x has {} values, want {m}x{k}",
                x.len()
            )));
        }
        let class = plan.class(block, kind);
        let split = &class.split;
        let mt = m.div_ceil(32);
        let block_first = e.first_tile as usize;
        let mut units = Vec::with_capacity(split.units.len());
        let (mut act_pages, mut w_pages, mut out_pages) = (0, 0, 0);
        for u in &split.units {
            let (cx, cy) = compute_coord(u.core);
            let core = plan
                .cores
                .iter()
                .find(|c| (c.x, c.y) == (cx, cy) && matches!(c.role, CoreRole::Compute { .. }))
                .ok_or_else(|| {
                    DitRunError::Device(format!("plan has no compute core at ({cx},{cy})"))
                })?;
            let cb = |name: &str| {
                core.cbs
                    .iter()
                    .find(|c| c.name == name)
                    .map_or(0, |c| c.pages)
            };
            // The plan sized these for its own M; a larger M here would overflow them.
            let (need_act, need_w) = (mt * u.k_count, u.k_count);
            if need_act > cb("act_in") || need_w > cb("weights") {
                return Err(DitRunError::Input(format!(
                    "matmul {kind:?} M={m}: core ({cx},{cy}) needs {need_act} activation and \
                     {need_w} weight pages, the plan gives {} and {}",
                    cb("act_in"),
                    cb("weights")
                )));
            }
            act_pages = act_pages.max(cb("act_in"));
            w_pages = w_pages.max(cb("weights"));
            out_pages = out_pages.max(cb("partials_f32")).max(2);
            units.push(json!({
                "x": cx, "y": cy,
                "first_tile": block_first + u.first_tile,
                "n_start": u.n_start, "n_count": u.n_count,
                "k_start": u.k_start, "k_count": u.k_count,
                "piece": if split.k_split > 1 { u.core % split.k_split } else { 0 },
            }));
        }
        let xbytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let header = json!({
            "op": "matmul", "arena": ARENA, "m": m, "k": k, "kt": kt, "nt": nt,
            "k_split": split.k_split, "units": units,
            "weight_dtype": self.index.dtype.to_string(), "weight_page": self.index.tile_bytes,
            "cbs": {"act": act_pages, "weights": w_pages, "out": out_pages},
            "kernels": {"reader": READER_KERNEL, "compute": COMPUTE_KERNEL, "writer": WRITER_KERNEL},
        });
        let (ans, out) = self.call(&header, &xbytes)?;
        if let Some(ms) = ans["program_ms"].as_f64()
            && let Ok(mut t) = self.times.lock()
        {
            t.add(kind, Duration::from_secs_f64(ms / 1e3));
        }
        let (rows, cols) = (mt * 32, nt * 32);
        if out.len() != split.k_split * rows * cols * 4 {
            return Err(DitRunError::Device(format!(
                "matmul {kind:?}: device returned {} bytes, want {}",
                out.len(),
                split.k_split * rows * cols * 4
            )));
        }
        let at = |s: usize, r: usize, c: usize| {
            let i = ((s * rows + r) * cols + c) * 4;
            f32::from_le_bytes([out[i], out[i + 1], out[i + 2], out[i + 3]])
        };
        let mut y = vec![0f32; m * n];
        for s in 0..split.k_split {
            for r in 0..m {
                for c in 0..n {
                    y[r * n + c] += at(s, r, c);
                }
            }
        }
        Ok(y)
    }
}

impl<'a> DeviceSteps<'a> {
    /// `dims.ctx_tokens` is the context length the plan is first cut for.
    pub fn new(
        dev: &'a TtDevice,
        weights: &'a DitWeights,
        dims: &DitDims,
    ) -> Result<Self, DitRunError> {
        if weights.blocks.len() != dims.num_layers || weights.dim != dims.width() {
            return Err(DitRunError::Arena(
                "its dims do not match the model's DiT".into(),
            ));
        }
        let plan = build_plan(dims, dev.index.dtype)?;
        Ok(DeviceSteps { dev, plan, weights })
    }
}

impl StepMatmul for DeviceSteps<'_> {
    fn matmul(
        &self,
        block: usize,
        kind: WeightKind,
        x: &[f32],
        m: usize,
        bias: Option<&[f32]>,
    ) -> Result<Vec<f32>, DitRunError> {
        let n = self
            .dev
            .index
            .entry(block, kind)
            .map_or(0, |e| e.kn_shape[1]);
        let mut y = self.dev.matmul_raw(&self.plan, block, kind, x, m)?;
        finish_matmul(&mut y, n, bias);
        Ok(y)
    }
}

impl DitDevice for DeviceSteps<'_> {
    fn kind(&self) -> DeviceKind {
        self.dev.kind
    }

    /// Re-cut the plan for this context length (fails when it does not fit L1).
    fn prepare(&mut self, ctx_tokens: usize) -> Result<(), DitRunError> {
        recut_plan(&mut self.plan, ctx_tokens, self.dev.index.dtype)
    }

    fn run_blocks(&self, inputs: &DitStepInputs<'_>) -> Result<Vec<f32>, DitRunError> {
        run_step_with(self, self.weights, &self.plan, inputs)
    }
}
