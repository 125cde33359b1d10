//! The `DitDevice` the executor drives: one observation's view of the open device.

// The backend's own types and helpers (its imports too): this is its second half.
use super::*;

/// One observation's view of the device: the plan cut for its context length, the model's
/// DiT weights (biases, block kinds) for the host steps. The `DitDevice` the executor drives.
pub struct DeviceSteps<'a> {
    /// The open device the steps run on.
    pub dev: &'a TtDevice,
    /// The megakernel plan cut for this observation's context length.
    pub plan: MegakernelPlan,
    pub(super) weights: &'a DitWeights,
    /// A step failed: the forward is not reported as the last one.
    pub(super) failed: AtomicBool,
    /// The observation whose cross K/V are on the device (its context and masks), and its key
    /// counts.
    pub(super) observation: Mutex<Option<(ObservationKey, CrossKeys)>>,
    /// The VL context the device's backbone made this forward (its values, read back): it is
    /// on the device for the observation's graph to gather from.
    pub(super) vl_on_device: Mutex<Option<Vec<f32>>>,
    /// Per camera, the image tokens this forward's vision graph made (their values, read
    /// back): they are on the device for the LLM graph to gather from.
    pub(super) image_on_device: Mutex<Vec<Option<Vec<f32>>>>,
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
        // On a card, a program no run has measured yet is expected within the roofline's
        // bound (the simulator's times have no bound: they are measured first).
        if dev.kind != DeviceKind::Simulator {
            lock(&dev.deadlines).set_roofline(program_roofline(&plan));
        }
        // One `DeviceSteps` is one observation's forward: its steps are counted as one.
        dev.counters.begin_forward();
        Ok(DeviceSteps {
            dev,
            plan,
            weights,
            failed: AtomicBool::new(false),
            observation: Mutex::new(None),
            vl_on_device: Mutex::new(None),
            image_on_device: Mutex::new(Vec::new()),
        })
    }
}

impl Drop for DeviceSteps<'_> {
    /// The forward is over: its steps become the device's last forward unless one failed.
    fn drop(&mut self) {
        self.dev
            .counters
            .end_forward(!self.failed.load(Ordering::SeqCst));
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

    /// One denoising step; what its exchanges moved is the step's window of the counters.
    fn run_blocks(&self, inputs: &DitStepInputs<'_>) -> Result<Vec<f32>, DitRunError> {
        // The device's constants, the observation's cross K/V and the timestep's AdaLN rows
        // first, outside the step.
        let keys = self
            .ensure_constants()
            .and_then(|()| self.ensure_observation(inputs))
            .and_then(|keys| Ok((keys, self.ensure_timestep(inputs.temb)?)));
        let (keys, slot) = match keys {
            Ok(k) => k,
            Err(e) => {
                self.failed.store(true, Ordering::SeqCst);
                return Err(e);
            }
        };
        let before = self.dev.counters.total();
        let out = self.run_step_graph(inputs, keys, slot);
        match &out {
            Ok(_) => self
                .dev
                .counters
                .record_step(before.until(self.dev.counters.total())),
            Err(_) => self.failed.store(true, Ordering::SeqCst),
        }
        out
    }
}
