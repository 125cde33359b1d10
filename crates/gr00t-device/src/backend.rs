//! [`TtDevice`]: the DiT blocks of a denoise step on a Tenstorrent device (a p150a, or the
//! ttsim simulator of one) through the ttnn worker.
//!
//! * Boot: open the device, upload the arena's bytes as they are (one arena tile per DRAM page,
//!   pages interleaved over the banks: `tt_blackhole::dram::interleaved`), no conversion.
//! * A denoising step runs on the device whole (`super::graph`): one exchange per step runs
//!   every block's programs over device tensors (matmuls from the arena as the plan splits
//!   them, the K pieces summed on the device, LayerNorm/AdaLN, attention, GELU, residual adds
//!   with our SFPU library), so only the step's tokens go in and the stream after the last
//!   block comes back. The cross blocks' K/V are computed once per observation, every block's
//!   AdaLN rows once per timestep and device (SiLU(temb) goes in with them), and the worker
//!   keeps each step's graph for the next step with that timestep to replay
//!   ([`SfpuPlacement::Device`]). [`TtDevice::matmul_raw`] (one matmul, partials read back) is
//!   kept for the matmul tests.
//! * Every exchange is counted where it happens ([`TtDevice::stats`]: programs, bytes each way,
//!   per step and forward; `gr00t_megakernel::counters`), for `predict --stats-json` and `/info`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tt_blackhole::arena::ArenaIndex;
use tt_blackhole::device::{DeviceKind, DitDevice, DitRunError, DitStepInputs};
use tt_blackhole::dims::{DitDims, WeightKind};
use tt_blackhole::plan::{CoreRole, MegakernelPlan, build_plan, compute_coord};

use super::deadline::{DeadlineRule, ProgramDeadlines, program_roofline};
use super::graph::CrossKeys;
use super::graph_steps::{MatmulCbs, MatmulJob, MatmulShared, MatmulUnit};
use super::protocol::{self, AnswerRun, KernelSet, Reply, WorkerOp};
use super::task_table::with_task_table;
use super::watchdog::Liveness;
use super::worker::{TtnnWorker, WorkerConfig, WorkerError};
use gr00t_megakernel::counters::{DeviceCounters, DeviceStats};
use gr00t_megakernel::emulator::{StepMatmul, finish_matmul, recut_plan};
use gr00t_runtime::model::dit::DitWeights;
use steps::ObservationKey;

/// The step graphs' runs over a [`DeviceSteps`] (constants, observation, step).
mod device_steps;
/// The whole forward as one graph (the action head on the device).
mod forward;
/// A camera's image tokens from the device's vision tower and projector.
mod images;
/// A matmul's units cut to fit L1 at many activation rows.
mod l1_fit;
/// The prompt's VL context from the device's Qwen3 body and vlln.
mod llm;
#[cfg(test)]
pub(super) use llm::embed_table;
/// A matmul's program from the plan's cut.
mod spec;
pub(crate) use spec::{matmul_spec, packed_matmul_spec};
mod steps;

pub use device_steps::DeviceSteps;

/// Our device kernels (C++, JIT-compiled by tt-metal on first use), shipped in the binary.
pub const READER_KERNEL: &str = include_str!("kernels/reader_share.cpp");
/// The compute kernel: multiplies the streamed weight tiles on the FPU into an fp32 destination.
pub const COMPUTE_KERNEL: &str = include_str!("kernels/matmul_share.cpp");
/// The writer kernel: stores each work unit's fp32 partials for the host to sum.
pub const WRITER_KERNEL: &str = include_str!("kernels/writer_partials.cpp");

/// Where the SFPU steps (LayerNorm, softmax, GELU) run. A compile-time choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SfpuPlacement {
    /// On the host between device phases (the per-matmul path before issue 24).
    Host,
    /// On the device, inside the step's programs (our SFPU library); only SiLU(temb), one
    /// vector per step shared by every block, is still computed on the host.
    Device,
}

/// This build's placement.
pub const SFPU: SfpuPlacement = SfpuPlacement::Device;

/// How the graphs run: settings `gr00t-server` reads once (`GR00T_MK_CHAIN`, `GR00T_MK_REPLAY`)
/// and passes down ([`TtDevice::with_options`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphOptions {
    /// Runs of matmul-and-end steps share programs as the plan packs them (`GR00T_MK_CHAIN`,
    /// default on; off: a program per step).
    pub chain: bool,
    /// The worker keeps each step's graph and later steps replay it (`GR00T_MK_REPLAY`,
    /// default on; off: every step sends its graph whole).
    pub replay: bool,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions {
            chain: true,
            replay: true,
        }
    }
}

/// The name of the arena buffer on the device.
const ARENA: &str = "arena";

/// What the device said when it opened (the worker's answer to `open`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
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

/// What the device's programs and the steps' host share cost (`TtDevice::times`).
mod times;
pub use times::{MatmulTimes, StepHost};

/// An open device holding the arena: the worker, and what it said when it opened.
///
/// The worker can be lost (it died, or missed a deadline and was killed): the device then
/// refuses every call at once, with the reason, until [`TtDevice::reopen`] starts a new worker,
/// opens the device and uploads the arena again.
pub struct TtDevice {
    kind: DeviceKind,
    /// What the device said when it first opened.
    pub info: DeviceInfo,
    /// The worker, `None` once lost.
    worker: Mutex<Option<TtnnWorker>>,
    /// The current worker's liveness, readable while an exchange holds `worker`.
    liveness: Mutex<Option<Liveness>>,
    /// Why the last worker was lost (its error, with its last lines).
    lost: Mutex<Option<String>>,
    config: WorkerConfig,
    reopened: AtomicU32,
    /// Layout of the arena uploaded to the device's DRAM.
    pub index: ArenaIndex,
    times: Mutex<MatmulTimes>,
    /// Programs and bytes of every exchange, per step and forward ([`TtDevice::stats`]).
    counters: DeviceCounters,
    /// Whether the graphs' device-lifetime tensors (biases, constants) are on this worker.
    constants: Mutex<bool>,
    /// The step graphs the worker keeps for replays (one per timestep slot), and what each
    /// was built for.
    kept_steps: Mutex<Vec<steps::KeptStep>>,
    /// The timesteps whose AdaLN rows are on the device, by slot.
    timesteps: Mutex<steps::Timesteps>,
    /// The head arena on the device and the forward graph the worker keeps
    /// (`forward::DeviceHead`).
    head: Mutex<forward::DeviceHead>,
    /// The backbone arena and constants on the device (`images::DeviceBackbone`).
    backbone: Mutex<images::DeviceBackbone>,
    /// What the graphs' programs are expected to take, for their deadlines (kept across
    /// reopens: a new worker runs the same programs).
    deadlines: Mutex<ProgramDeadlines>,
    /// How the graphs run.
    options: GraphOptions,
}

/// A worker error as the `DitDevice` seam's typed fault, for the request `op` (`request`: its
/// header shortened).
fn fault(e: WorkerError, op: &str, request: String) -> DitRunError {
    DitRunError::Fault(e.into_fault(op, request))
}

/// A worker error of a boot request.
fn boot_fault<R: WorkerOp>(e: WorkerError, request: &R) -> DitRunError {
    let header =
        protocol::header(request).map_or_else(|e| e.to_string(), |h| protocol::summary(&h));
    fault(e, R::OP.name(), header)
}

/// [`TtDevice::open`]'s exchange deadline on the simulator: one full-size DiT matmul there took
/// up to 33 s on a loaded 2-core host (`docs/blackhole.md` §8).
pub const SIM_CALL_TIMEOUT: Duration = Duration::from_secs(600);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TtDevice {
    /// Start the worker with the default [`WorkerConfig`], open `kind` (P150a or Simulator)
    /// and upload `arena` (the bytes `index` describes) to device DRAM. On the simulator each
    /// exchange may take [`SIM_CALL_TIMEOUT`] (a full-size matmul takes tens of seconds there).
    pub fn open(kind: DeviceKind, index: &ArenaIndex, arena: &[u8]) -> Result<Self, DitRunError> {
        let mut config = WorkerConfig::new(super::DEFAULT_PYTHON);
        if kind == DeviceKind::Simulator {
            config = config.with_call_timeout(SIM_CALL_TIMEOUT);
        }
        Self::open_with(kind, index, arena, &config)
    }

    /// [`TtDevice::open`] with the worker started as `config` says (interpreter, deadlines).
    pub fn open_with(
        kind: DeviceKind,
        index: &ArenaIndex,
        arena: &[u8],
        config: &WorkerConfig,
    ) -> Result<Self, DitRunError> {
        let (worker, info) = start_worker(kind, index, arena, config)?;
        let counters = DeviceCounters::default();
        // The boot's arena upload (no program) is part of the totals since open.
        counters.record_exchange(false, arena.len(), 0);
        Ok(TtDevice {
            kind,
            info,
            liveness: Mutex::new(Some(worker.liveness())),
            worker: Mutex::new(Some(worker)),
            lost: Mutex::new(None),
            config: config.clone(),
            reopened: AtomicU32::new(0),
            index: index.clone(),
            times: Mutex::new(MatmulTimes::default()),
            counters,
            constants: Mutex::new(false),
            kept_steps: Mutex::new(Vec::new()),
            timesteps: Mutex::new(steps::Timesteps::default()),
            head: Mutex::new(forward::DeviceHead::default()),
            backbone: Mutex::new(images::DeviceBackbone::default()),
            deadlines: Mutex::new(ProgramDeadlines::new(DeadlineRule::for_device(
                kind == DeviceKind::Simulator,
                config.call_timeout,
            ))),
            options: GraphOptions::default(),
        })
    }

    /// `None` while the worker runs; else why the device cannot be used (the failure of the
    /// call that met it, else the watchdog's account: a missed deadline or an exit, with the
    /// worker's last lines).
    pub fn lost(&self) -> Option<String> {
        let loss = match lock(&self.liveness).as_ref() {
            Some(l) => l.loss()?,
            None => {
                return Some(
                    lock(&self.lost)
                        .clone()
                        .unwrap_or_else(|| "the ttnn worker was closed".into()),
                );
            }
        };
        Some(lock(&self.lost).clone().unwrap_or_else(|| loss.to_string()))
    }

    /// The running worker's process id.
    pub fn worker_pid(&self) -> Option<u32> {
        lock(&self.liveness)
            .as_ref()
            .filter(|l| l.is_alive())
            .map(Liveness::pid)
    }

    /// How many times [`TtDevice::reopen`] brought the device back.
    pub fn reopened(&self) -> u32 {
        self.reopened.load(Ordering::SeqCst)
    }

    /// The worker's deadlines and interpreter.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The device with its graphs run as `options` say.
    pub fn with_options(mut self, options: GraphOptions) -> Self {
        self.options = options;
        self
    }

    /// How its graphs run.
    pub fn options(&self) -> GraphOptions {
        self.options
    }

    /// After a loss: a new worker, the device opened, `arena` uploaded again. The lost worker
    /// is ended first (bounded); calls meanwhile fail at once.
    pub fn reopen(&self, arena: &[u8]) -> Result<(), DitRunError> {
        if let Some(old) = lock(&self.worker).take() {
            drop(old);
        }
        let (worker, _) = start_worker(self.kind, &self.index, arena, &self.config)?;
        *lock(&self.liveness) = Some(worker.liveness());
        *lock(&self.worker) = Some(worker);
        *lock(&self.lost) = None;
        *lock(&self.constants) = false;
        lock(&self.kept_steps).clear();
        self.counters.record_exchange(false, arena.len(), 0);
        self.reopened.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Close the device and end the worker (bounded: see [`TtnnWorker`]'s drop).
    pub fn close(&self) {
        let w = lock(&self.worker).take();
        *lock(&self.liveness) = None;
        *lock(&self.lost) = Some("the device was closed".into());
        drop(w);
    }

    /// The last finished forward's measured traffic (see [`gr00t_megakernel::counters`]);
    /// `None` before the first.
    pub fn stats(&self) -> Option<DeviceStats> {
        self.counters.stats()
    }

    /// The running traffic total since the device opened (boot upload included).
    pub fn traffic(&self) -> gr00t_megakernel::counters::Traffic {
        self.counters.total()
    }

    /// One worker op, for tests that need to change what the worker holds.
    #[cfg(test)]
    pub(crate) fn raw_call<R: WorkerOp>(
        &self,
        request: &R,
        payload: &[u8],
    ) -> Result<(Reply<R::Answer>, Vec<u8>), DitRunError> {
        self.call(request, payload)
    }

    pub(super) fn call<R: WorkerOp>(
        &self,
        request: &R,
        payload: &[u8],
    ) -> Result<(Reply<R::Answer>, Vec<u8>), DitRunError> {
        let answer = self.exchange(request, payload);
        // Counted when the worker answered: a failed op may have sent its payload but ran
        // no program the forward can use (and such a forward is not reported).
        if let Ok((reply, back)) = &answer {
            let run = reply.answer.run();
            // What each program took sets its next deadline.
            if let Some(run) = run {
                lock(&self.deadlines).learn(&run.by_label);
            }
            // A graph runs many programs in one exchange: its worker counts them as it launches.
            // A replay the worker refused ran nothing and wrote nothing to the device.
            let programs = match (R::OP, run) {
                (protocol::Op::Replay, None) => return answer,
                (_, Some(run)) => run.programs,
                (op, None) => u64::from(op.runs_program()),
            };
            // The task tables the worker wrote to the device go host to device too.
            let tables = reply.table_bytes as usize;
            self.counters
                .record(programs, payload.len() + tables, back.len());
            if let (Some(run), Ok(mut t)) = (run, self.times.lock()) {
                t.chains = run.chains.iter().map(|c| c.phases.clone()).collect();
                for (label, &(n, ms, _)) in &run.by_label {
                    let d = Duration::from_secs_f64(ms.max(0.0) / 1e3);
                    match t.graph.iter_mut().find(|(l, _, _)| l == label) {
                        Some(e) => {
                            e.1 += n;
                            e.2 += d;
                        }
                        None => t.graph.push((label.clone(), n, d)),
                    }
                }
            }
        }
        answer
    }

    fn exchange<R: WorkerOp>(
        &self,
        request: &R,
        payload: &[u8],
    ) -> Result<(Reply<R::Answer>, Vec<u8>), DitRunError> {
        let mut slot = lock(&self.worker);
        let Some(w) = slot.as_mut() else {
            return Err(DitRunError::Device(
                self.lost()
                    .unwrap_or_else(|| "the ttnn worker is gone".into()),
            ));
        };
        let called = match R::OP {
            protocol::Op::Graph | protocol::Op::Replay => {
                let programs = std::sync::Arc::new(lock(&self.deadlines).clone());
                w.call_programs(request, payload, programs)
            }
            _ => w.call(request, payload),
        };
        match called {
            Ok(answer) => Ok(answer),
            Err(e) => {
                if e.is_fatal() {
                    // The worker is dead, killed or confused: end it now (releasing the device
                    // for a reopen) and remember why, for health reports.
                    *lock(&self.lost) = Some(e.to_string());
                    let dead = slot.take();
                    drop(slot);
                    drop(dead);
                }
                let header = protocol::header(request)
                    .map_or_else(|e| e.to_string(), |h| protocol::summary(&h));
                Err(fault(e, R::OP.name(), header))
            }
        }
    }

    /// The arena's bytes as they sit in device DRAM (read back page by page).
    pub fn read_back_arena(&self) -> Result<Vec<u8>, DitRunError> {
        let name = protocol::Named { name: ARENA.into() };
        Ok(self.call(&protocol::Readback(name), &[])?.1)
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
        let spec = matmul_spec(&self.index, plan, block, kind, m)?;
        let (k, n, nt) = (spec.k, spec.n, spec.nt);
        if x.len() != m * k {
            return Err(DitRunError::Input(format!(
                "matmul {kind:?}: x has {} values, want {m}x{k}",
                x.len()
            )));
        }
        if m == 0 {
            // No rows (a cross block whose text or image mask is empty): the product is empty,
            // as on the emulator; no program runs.
            return Ok(Vec::new());
        }
        let mt = m.div_ceil(32);
        let (act, partials) = ("m/act", "m/partials");
        let mut up = super::graph::Upload::new();
        up.add_padded(
            act,
            x,
            m,
            k,
            mt * 32,
            spec.job.kt * 32,
            protocol::ActDtype::Bf16,
        );
        let program =
            super::lower::lone_matmul(&spec.shared, &spec.job, (act, partials), self.info.grid)?;
        let k = &spec.shared.kernels;
        let request = protocol::Graph {
            inputs: up.specs().to_vec(),
            programs: vec![program],
            outputs: vec![(partials.into(), spec.k_split * mt * 32, nt * 32)],
            free: vec![act.into(), partials.into()],
            sources: [
                ("reader", &k.reader),
                ("compute", &k.compute),
                ("writer", &k.writer),
            ]
            .into_iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect(),
            keep: None,
        };
        let (ans, out) = self.call(&request, &up.bytes())?;
        if let Ok(mut t) = self.times.lock() {
            let ms = ans
                .answer
                .by_label
                .get("matmul")
                .map_or(0.0, |l| l.1.max(0.0));
            t.add(kind, Duration::from_secs_f64(ms / 1e3));
        }
        let (rows, cols, k_split) = (mt * 32, nt * 32, spec.k_split);
        if out.len() != k_split * rows * cols * 4 {
            return Err(DitRunError::Device(format!(
                "matmul {kind:?}: device returned {} bytes, want {}",
                out.len(),
                k_split * rows * cols * 4
            )));
        }
        let at = |s: usize, r: usize, c: usize| {
            let i = ((s * rows + r) * cols + c) * 4;
            f32::from_le_bytes([out[i], out[i + 1], out[i + 2], out[i + 3]])
        };
        let mut y = vec![0f32; m * n];
        for s in 0..k_split {
            for r in 0..m {
                for c in 0..n {
                    y[r * n + c] += at(s, r, c);
                }
            }
        }
        Ok(y)
    }
}

/// Whether the worker op `op` runs a device program (the others move data or manage the
/// device: `open`, `upload`, `put`, `readback`, `free`, `close`); a `graph` runs several.
pub fn runs_program(op: &str) -> bool {
    serde_json::from_value::<protocol::Op>(serde_json::Value::String(op.into()))
        .is_ok_and(protocol::Op::runs_program)
}

/// Start a worker, open `kind` on it, check its grid and upload `arena`.
fn start_worker(
    kind: DeviceKind,
    index: &ArenaIndex,
    arena: &[u8],
    config: &WorkerConfig,
) -> Result<(TtnnWorker, DeviceInfo), DitRunError> {
    if arena.len() as u64 != index.total_bytes {
        return Err(DitRunError::Arena(format!(
            "arena holds {} bytes, its index says {}",
            arena.len(),
            index.total_bytes
        )));
    }
    let device = match kind {
        DeviceKind::Simulator => "sim",
        DeviceKind::P150a => "p150a",
        DeviceKind::Emulator => {
            return Err(DitRunError::Device(
                "the emulator is not a ttnn device".into(),
            ));
        }
    };
    let open = protocol::Open {
        device: device.into(),
    };
    let mut worker = TtnnWorker::start(config).map_err(|e| boot_fault(e, &open))?;
    let (reply, _) = worker.call(&open, &[]).map_err(|e| boot_fault(e, &open))?;
    let info = reply.answer;
    let (gx, gy) = (tt_blackhole::plan::GRID_X, tt_blackhole::plan::GRID_Y);
    if info.grid[0] < gx || info.grid[1] < gy {
        return Err(DitRunError::Device(format!(
            "the device's worker grid is {}x{}, the plan needs {gx}x{gy}",
            info.grid[0], info.grid[1]
        )));
    }
    // The arena's bytes as they are: one arena tile per DRAM page.
    let upload = protocol::Upload {
        name: ARENA.into(),
        page_bytes: index.tile_bytes as u64,
        pages: index.total_tiles,
    };
    worker
        .call(&upload, arena)
        .map_err(|e| boot_fault(e, &upload))?;
    Ok((worker, info))
}
