//! The megakernel as the model's DiT executor, and as a [`Policy`] backend.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::{
    ArenaIndex, ArenaKey, CacheOutcome, arena_layout, build_arena_bytes, open_or_build,
};
use tt_blackhole::device::{DeviceKind, DitDevice, DitRunError, DitStepInputs, select_device};

use super::arena_source::{CheckpointTensors, dit_dims};
use super::backbone_arena::BackboneArena;
use super::device_backend::{DeviceBackend, DeviceForward, DeviceOpener};
use super::device_encoders::{DeviceImages, DeviceLlm};
use super::emulator::{ArenaBytes, Emulator};
use super::flow_device::{FlowContext, FlowDevice};
use super::head_arena::HeadArena;
use gr00t_runtime::cpu::norms::silu;
use gr00t_runtime::model::dit::DitWeights;
use gr00t_runtime::model::{
    DitExecutor, Encoders, FlowInputs, Gr00tModel, ModelError, Taps, VlContext,
};
use gr00t_runtime::policy::{
    ActionChunk, DeviceStatus, DeviceSupervision, ForwardTiming, HostStages, ModelInputs, Policy,
    PolicyError, Stage,
};
use gr00t_runtime::weights::WeightSource;
use tt_blackhole::backbone::BACKBONE_DTYPE;

/// Context length the plan is first cut for; [`DitDevice::prepare`] re-cuts it per observation.
const NOMINAL_CTX: usize = 128;

/// [`DitExecutor`] over a [`DitDevice`]: the device runs the blocks, the output layer
/// (`proj_out_1`, norm, `proj_out_2`, not in the arena) runs on the host with the CPU model's
/// own code.
pub struct MegakernelDit<'a, D: DitDevice> {
    /// The device that runs the 32 blocks of each step.
    pub device: D,
    weights: &'a DitWeights,
    /// The action head's weights on the device, when the device runs the whole head
    /// ([`DitExecutor::run_flow`]); `None`: the host runs the loop.
    head: Option<&'a super::head_arena::HeadArena>,
    context: Vec<f32>,
    text_mask: Vec<bool>,
    image_mask: Vec<bool>,
    /// Whether a flow ran whole on the device ([`DitExecutor::run_flow`]).
    flow_on_device: bool,
}

impl<'a, D: DitDevice> MegakernelDit<'a, D> {
    /// Wraps `device`; the VL context is set per observation by [`DitExecutor::prepare`].
    pub fn new(device: D, weights: &'a DitWeights) -> Self {
        MegakernelDit {
            device,
            weights,
            head: None,
            context: Vec::new(),
            text_mask: Vec::new(),
            image_mask: Vec::new(),
            flow_on_device: false,
        }
    }
}

impl<'a, D: DitDevice> MegakernelDit<'a, D> {
    /// The device runs the whole action head with `head`'s weights (its embodiment's).
    pub fn with_head(mut self, head: &'a super::head_arena::HeadArena) -> Self {
        self.head = Some(head);
        self
    }
}

impl<D: DitDevice + FlowDevice> DitExecutor for MegakernelDit<'_, D> {
    fn prepare(&mut self, ctx: &VlContext<'_>) -> Result<(), ModelError> {
        self.context = ctx.vl_embeds.to_vec();
        self.image_mask = ctx.image_mask.to_vec();
        // Text blocks attend every non-image token (B = 1: attention_mask is all ones).
        self.text_mask = ctx.image_mask.iter().map(|m| !m).collect();
        Ok(self.device.prepare(ctx.seq)?)
    }

    fn run(
        &mut self,
        step: usize,
        sa: &[f32],
        tokens: usize,
        temb: &[f32],
        taps: &mut Taps<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        let w = self.weights;
        let d = w.dim;
        w.check_step_inputs(sa, tokens, temb)?;
        let inputs = DitStepInputs {
            tokens: sa,
            temb,
            context: &self.context,
            text_mask: &self.text_mask,
            image_mask: &self.image_mask,
        };
        let x = self.device.run_blocks(&inputs)?;
        if x.len() != tokens * d {
            return Err(ModelError::Length {
                what: "device output",
                got: x.len(),
                expected: tokens * d,
            });
        }
        let mut act = temb.to_vec();
        silu(&mut act);
        let p = w.proj_out_1.forward(&act, 1);
        let (shift, scale) = p.split_at(d);
        Ok(w.output_head(x, shift, scale, tokens, step, taps))
    }

    fn run_flow(
        &mut self,
        flow: &FlowInputs<'_>,
        _taps: &mut Taps<'_>,
    ) -> Option<Result<Vec<f32>, ModelError>> {
        // Only the embodiment whose head is on the device; another runs the host loop.
        let head = self.head.filter(|h| h.embodiment == flow.embodiment)?;
        let ctx = FlowContext {
            context: &self.context,
            text_mask: &self.text_mask,
            image_mask: &self.image_mask,
        };
        let out = self.device.run_flow(head, &ctx, flow)?;
        self.flow_on_device = out.is_ok();
        Some(out.map_err(ModelError::from))
    }

    /// Nothing of the head where the device ran the whole flow (the timestep rows it starts
    /// from are the host's, once per process); the whole loop where the host emulates the
    /// device; else all but the DiT blocks.
    fn host_stages(&self) -> HostStages {
        if self.flow_on_device {
            HostStages::NONE
        } else if self.device.kind() == DeviceKind::Emulator {
            HostStages::HEAD
        } else {
            HostStages::HEAD.without(Stage::Dit)
        }
    }
}

/// What runs the DiT blocks of a forward: the emulator, or a device's forward.
pub enum Engine<'a> {
    /// The CPU emulation of the megakernel.
    Emulator(Box<Emulator<'a>>),
    /// A Tenstorrent device (p150a or simulator): one observation's forward on it.
    Device(Box<dyn DeviceForward + 'a>),
}

impl DitDevice for Engine<'_> {
    fn kind(&self) -> DeviceKind {
        match self {
            Engine::Emulator(e) => e.kind(),
            Engine::Device(d) => d.kind(),
        }
    }

    fn prepare(&mut self, ctx_tokens: usize) -> Result<(), DitRunError> {
        match self {
            Engine::Emulator(e) => e.prepare(ctx_tokens),
            Engine::Device(d) => d.prepare(ctx_tokens),
        }
    }

    fn run_blocks(&self, inputs: &DitStepInputs<'_>) -> Result<Vec<f32>, DitRunError> {
        match self {
            Engine::Emulator(e) => e.run_blocks(inputs),
            Engine::Device(d) => d.run_blocks(inputs),
        }
    }
}

/// How the megakernel backend is set up: `gr00t-server` builds it from its settings (the
/// runtime reads no environment for it).
#[derive(Debug, Clone, PartialEq)]
pub struct MegakernelConfig {
    /// The arena's block-float dtype (`GR00T_MK_ARENA_DTYPE`).
    pub dtype: ArenaDtype,
    /// The arena cache directory (`GR00T_TT_CACHE`); `None`: built in memory.
    pub cache_dir: Option<PathBuf>,
    /// Where the DiT blocks run (`GR00T_MK_DEVICE`): `emulator`, `p150a`, `sim`.
    pub device: String,
    /// Deadline of each device exchange (`GR00T_MK_DEVICE_TIMEOUT_S`): a worker that misses
    /// it is killed and the device reopened.
    pub device_timeout: Duration,
    /// The ttnn worker's interpreter (`GR00T_TTNN_PYTHON`, else `$VIRTUAL_ENV/bin/python3`:
    /// the server's settings); `None`: `python3` on `PATH`.
    pub ttnn_python: Option<String>,
    /// A device graph's matmul-and-end steps run in the programs the plan packs
    /// (`GR00T_MK_CHAIN`, default); off: a program per step.
    pub chain: bool,
    /// The device's worker keeps each step's graph and replays it (`GR00T_MK_REPLAY`,
    /// default); off: every step sends its graph whole.
    pub replay: bool,
    /// The embodiment (projector index) whose whole action head runs on the device, one
    /// graph per forward (`GR00T_MK_HEAD=device`, the default on a device, with the server's
    /// embodiment); `None`: the host runs the flow loop and the device each step's DiT blocks.
    pub head_embodiment: Option<usize>,
    /// SigLIP2's tower and the projector run on the device (`GR00T_BACKBONE_BACKEND=device`);
    /// off: on the host. Only where a device runs (the emulator refuses it).
    pub backbone_on_device: bool,
}

impl Default for MegakernelConfig {
    /// bfp8_b, no cache, the emulator, a 30 s device deadline.
    fn default() -> Self {
        MegakernelConfig {
            dtype: ArenaDtype::Bfp8B,
            cache_dir: None,
            device: "emulator".into(),
            device_timeout: DEFAULT_DEVICE_TIMEOUT,
            ttnn_python: None,
            chain: true,
            replay: true,
            head_embodiment: None,
            backbone_on_device: false,
        }
    }
}

/// The default deadline of one device exchange: a card answers a DiT matmul in microseconds
/// and JIT-compiles our kernels in seconds, so 30 s only ever fires on a hang.
pub const DEFAULT_DEVICE_TIMEOUT: Duration = Duration::from_secs(30);

/// The megakernel backend: the CPU model for everything but the DiT blocks, which run on the
/// [`Emulator`] from the block-float arena (`megakernel-emulated`), or, with a device backend's
/// opener ([`DeviceOpener`]), on a p150a or its simulator from the same arena uploaded to device
/// DRAM (`megakernel-p150a` / `megakernel-sim`).
pub struct MegakernelPolicy {
    model: Gr00tModel,
    index: ArenaIndex,
    arena: ArenaBytes,
    /// How the arena was obtained (cache hit, or built and why).
    pub arena_outcome: CacheOutcome,
    kind: DeviceKind,
    /// The action head's weights on the device ([`MegakernelConfig::head_embodiment`]).
    head: Option<HeadArena>,
    /// The vision tower's and the projector's weights on the device
    /// ([`MegakernelConfig::backbone_on_device`]).
    backbone: Option<BackboneArena>,
    /// The open device, where one runs the blocks.
    device: Option<Box<dyn DeviceBackend>>,
}

impl MegakernelPolicy {
    /// Build the arena from `weights` (the model's checkpoint) in `dtype`. With `cache_dir`
    /// (`GR00T_TT_CACHE`) the arena is cached there under `weights_revision`; without, it is
    /// built in memory. `device` is the `GR00T_MK_DEVICE`-style choice: `emulator` here
    /// (`p150a` / `sim` need a backend's opener: [`MegakernelPolicy::with_config`]; without
    /// one they fail here, clearly).
    pub fn new(
        model: Gr00tModel,
        weights: &dyn WeightSource,
        dtype: ArenaDtype,
        cache_dir: Option<&Path>,
        weights_revision: &str,
        device: &str,
    ) -> Result<Self, ModelError> {
        let config = MegakernelConfig {
            dtype,
            cache_dir: cache_dir.map(Path::to_path_buf),
            device: device.to_string(),
            ..MegakernelConfig::default()
        };
        Self::with_config(model, weights, weights_revision, &config, None)
    }

    /// [`MegakernelPolicy::new`] as `config` says (dtype, cache, device and its worker);
    /// `devices` opens a `p150a` or `sim` device (the crate `gr00t-device`'s opener), and
    /// without it those are refused as not built in.
    pub fn with_config(
        model: Gr00tModel,
        weights: &dyn WeightSource,
        weights_revision: &str,
        config: &MegakernelConfig,
        devices: Option<&dyn DeviceOpener>,
    ) -> Result<Self, ModelError> {
        let (dtype, cache_dir, device) = (
            config.dtype,
            config.cache_dir.as_deref(),
            config.device.as_str(),
        );
        let kind = select_device(device, devices.is_some())?;
        let dims = dit_dims(&model.cfg.gr00t, NOMINAL_CTX);
        let layout = arena_layout(&dims, dtype);
        let source = CheckpointTensors {
            weights,
            layout: &layout,
        };
        let (index, arena, arena_outcome) = match cache_dir {
            Some(dir) => {
                let key = ArenaKey::new(weights_revision, dtype);
                let (a, outcome) = open_or_build(dir, &key, &layout, &source)?;
                (a.index.clone(), ArenaBytes::Mapped(a), outcome)
            }
            None => {
                let (index, data) = build_arena_bytes(&layout, &source)?;
                (
                    index,
                    ArenaBytes::Owned(data),
                    CacheOutcome::Built {
                        reason: "in memory (no cache dir)".into(),
                    },
                )
            }
        };
        let device = match (kind, devices) {
            (DeviceKind::Emulator, _) | (_, None) => None,
            (_, Some(opener)) => Some(
                opener
                    .open(kind, &index, arena.verified()?, config)
                    .map_err(|cause| ModelError::DeviceOpen {
                        device: device.to_string(),
                        cause,
                    })?,
            ),
        };
        // The head goes on the device only where one runs it (the emulator declines).
        let head = match config.head_embodiment {
            Some(emb) if kind != DeviceKind::Emulator => {
                Some(HeadArena::build(weights, &model.cfg.gr00t, emb, dtype)?)
            }
            _ => None,
        };
        let backbone = match (config.backbone_on_device, kind) {
            (false, _) => None,
            (true, DeviceKind::Emulator) => {
                return Err(ModelError::Input(
                    "GR00T_BACKBONE_BACKEND=device needs a device (GR00T_MK_DEVICE p150a or \
                     sim); the emulator runs the DiT blocks alone"
                        .into(),
                ));
            }
            (true, _) => {
                let g = &model.cfg.gr00t;
                Some(BackboneArena::whole(
                    weights,
                    &model.cfg.eagle,
                    g.select_layer,
                    g.use_vlln.then_some(g.backbone_embedding_dim),
                    BACKBONE_DTYPE,
                )?)
            }
        };
        Ok(MegakernelPolicy {
            model,
            index,
            arena,
            arena_outcome,
            kind,
            head,
            backbone,
            device,
        })
    }

    /// Where the DiT blocks run.
    pub fn device_kind(&self) -> DeviceKind {
        self.kind
    }

    /// The open device (`GR00T_MK_DEVICE=p150a|sim`).
    pub fn device(&self) -> Option<&dyn DeviceBackend> {
        self.device.as_deref()
    }

    /// Load a checkpoint directory and set the backend up as `config` says, a device opened
    /// by `devices` ([`MegakernelPolicy::with_config`]). The cache key's weights revision is
    /// [`checkpoint_revision`].
    pub fn load(
        model_dir: &Path,
        config: &MegakernelConfig,
        devices: Option<&dyn DeviceOpener>,
    ) -> Result<Self, ModelError> {
        let model = Gr00tModel::load(model_dir)?;
        let ws = gr00t_runtime::weights::WeightStore::open_dir(model_dir)?;
        let rev = checkpoint_revision(model_dir)?;
        Self::with_config(model, &ws, &rev, config, devices)
    }

    /// The CPU model whose code runs everything outside the DiT blocks.
    pub fn model(&self) -> &Gr00tModel {
        &self.model
    }

    /// Layout of the arena: each weight's place, shape and block-float dtype.
    pub fn arena_index(&self) -> &ArenaIndex {
        &self.index
    }

    /// The arena bytes (what a device holds in DRAM).
    pub fn arena_bytes(&self) -> &[u8] {
        self.arena.bytes()
    }

    /// A DiT executor over the emulator or the device (borrowing this policy's model, arena
    /// and device).
    pub fn executor(&self) -> Result<MegakernelDit<'_, Engine<'_>>, ModelError> {
        let dims = dit_dims(&self.model.cfg.gr00t, NOMINAL_CTX);
        if let Some(dev) = &self.device {
            let steps = dev.forward(&self.model.head.dit, &dims)?;
            return Ok(self.executor_on(steps));
        }
        let emu = Emulator::new(&self.model.head.dit, &self.index, &self.arena, &dims)?;
        Ok(MegakernelDit::new(
            Engine::Emulator(Box::new(emu)),
            &self.model.head.dit,
        ))
    }

    /// The device's DiT executor over `steps` (one forward's).
    fn executor_on<'a>(
        &'a self,
        steps: Box<dyn DeviceForward + 'a>,
    ) -> MegakernelDit<'a, Engine<'a>> {
        let dit = MegakernelDit::new(Engine::Device(steps), &self.model.head.dit);
        match &self.head {
            Some(h) => dit.with_head(h),
            None => dit,
        }
    }

    /// One forward whose backbone's vision tower and projector run on the device before its
    /// action head (the same forward's steps: its counters cover both).
    fn predict_with_device_images(
        &self,
        inputs: &ModelInputs,
    ) -> Result<(ActionChunk, ForwardTiming), PolicyError> {
        let (Some(dev), Some(backbone)) = (&self.device, &self.backbone) else {
            return self
                .model
                .predict_timed(inputs, Encoders::default(), || self.executor());
        };
        let dims = dit_dims(&self.model.cfg.gr00t, NOMINAL_CTX);
        let steps = dev
            .forward(&self.model.head.dit, &dims)
            .map_err(ModelError::from)?;
        let steps = std::cell::RefCell::new(Some(steps));
        let images = DeviceImages {
            steps: &steps,
            arena: backbone,
            vision: &self.model.cfg.eagle.vision_config,
        };
        let llm = DeviceLlm {
            steps: &steps,
            arena: backbone,
            text: &self.model.cfg.eagle.text_config,
            layers: self.model.cfg.gr00t.select_layer,
        };
        // The arena holds the body when the whole backbone is to run on the device.
        let enc = Encoders {
            images: Some(&images),
            llm: backbone.llm_layers().gt(&0).then_some(&llm as _),
        };
        self.model.predict_timed(inputs, enc, || {
            let steps = steps.borrow_mut().take().ok_or(ModelError::NotPrepared(
                "the forward's device steps were taken twice",
            ))?;
            Ok(self.executor_on(steps))
        })
    }

    /// Full forward with the emulated DiT.
    pub fn forward(
        &self,
        inputs: &ModelInputs,
        taps: &mut Taps<'_>,
    ) -> Result<ActionChunk, ModelError> {
        let mut dit = self.executor()?;
        self.model.forward_with(inputs, &mut dit, taps)
    }
}

impl Policy for MegakernelPolicy {
    fn backend_name(&self) -> &str {
        match self.kind {
            DeviceKind::Emulator => "megakernel-emulated",
            DeviceKind::P150a => "megakernel-p150a",
            DeviceKind::Simulator => "megakernel-sim",
        }
    }

    fn dims(&self) -> (usize, usize, usize) {
        self.model.policy_dims()
    }

    fn predict(&self, inputs: &ModelInputs) -> Result<(ActionChunk, ForwardTiming), PolicyError> {
        // A lost device refuses at once (no backbone forward first), and a forward that lost
        // it says so (also when the supervisor already reopened it): both are the device's
        // state, not a fault of the request.
        let Some(dev) = Policy::device(self) else {
            return self
                .model
                .predict_timed(inputs, Encoders::default(), || self.executor());
        };
        let before = dev.status();
        if !before.usable {
            return Err(PolicyError::DeviceUnavailable {
                device: before.device,
                reason: before.lost.unwrap_or_default(),
            });
        }
        let run = self.predict_with_device_images(inputs);
        run.map_err(|e| {
            let now = dev.status();
            if now.usable && now.reopened == before.reopened {
                return e;
            }
            PolicyError::DeviceUnavailable {
                device: now.device,
                reason: now.lost.unwrap_or_else(|| e.to_string()),
            }
        })
    }

    fn device(&self) -> Option<&dyn DeviceSupervision> {
        self.device.as_ref().map(|_| self as _)
    }
}

impl DeviceSupervision for MegakernelPolicy {
    fn status(&self) -> DeviceStatus {
        let name = match self.kind {
            DeviceKind::Emulator => "emulator",
            DeviceKind::P150a => "p150a",
            DeviceKind::Simulator => "sim",
        };
        if let Some(dev) = &self.device {
            let lost = dev.lost();
            return DeviceStatus {
                device: name.into(),
                usable: lost.is_none(),
                lost,
                worker_pid: dev.worker_pid(),
                reopened: dev.reopened(),
            };
        }
        DeviceStatus {
            device: name.into(),
            usable: true,
            lost: None,
            worker_pid: None,
            reopened: 0,
        }
    }

    fn reopen(&self) -> Result<(), PolicyError> {
        if let Some(dev) = &self.device {
            let bytes = self
                .arena
                .verified()
                .map_err(|e| PolicyError::DeviceUnavailable {
                    device: self.status().device,
                    reason: format!("reopening failed: {e}"),
                })?;
            return dev
                .reopen(bytes)
                .map_err(|e| PolicyError::DeviceUnavailable {
                    device: self.status().device,
                    reason: format!("reopening failed: {e}"),
                });
        }
        Ok(())
    }

    fn close(&self) {
        if let Some(dev) = &self.device {
            dev.close();
        }
    }

    fn stats(&self) -> Option<super::counters::DeviceStats> {
        self.device.as_ref()?.stats()
    }

    fn step_host(&self) -> Option<serde_json::Value> {
        Some(self.device.as_ref()?.step_host())
    }
}

/// A revision string for a checkpoint directory: SHA-256 over every `*.safetensors` file's
/// name, length, modification time and safetensors header (names, dtypes, shapes, offsets).
/// It changes when any weight file is replaced; reading only headers keeps boot cheap (hashing
/// 6.5 GB of values would cost seconds). A caller that knows the Hub revision should pass that
/// to [`MegakernelPolicy::new`] instead.
pub fn checkpoint_revision(dir: &Path) -> Result<String, ModelError> {
    use tt_blackhole::checksum::Hasher;
    let io = |p: &Path, e: std::io::Error| ModelError::Input(format!("{}: {e}", p.display()));
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    let mut h = Hasher::new();
    for p in &files {
        let meta = std::fs::metadata(p).map_err(|e| io(p, e))?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        h.update(
            p.file_name()
                .map(|n| n.as_encoded_bytes())
                .unwrap_or_default(),
        );
        h.update(&meta.len().to_le_bytes());
        h.update(&mtime.to_le_bytes());
        let mut f = std::fs::File::open(p).map_err(|e| io(p, e))?;
        let mut len = [0u8; 8];
        std::io::Read::read_exact(&mut f, &mut len).map_err(|e| io(p, e))?;
        let n = u64::from_le_bytes(len).min(100 << 20);
        let mut header = vec![0u8; n as usize];
        std::io::Read::read_exact(&mut f, &mut header).map_err(|e| io(p, e))?;
        h.update(&header);
    }
    Ok(h.hex())
}
