//! [`DeviceSteps::run_forward`]: the whole action head as one graph per forward
//! (`super::super::head_graph`): the head arena and its constants put once per worker and
//! embodiment, the observation's cross K/V once per observation, each timestep's rows once per
//! timestep, then one exchange per forward: the forward's graph, kept by the worker, and after
//! that a replay of it with the state and the noise alone.

use std::time::Instant;

use tt_blackhole::device::DitRunError;

use super::super::head_graph::{
    HEAD_ARENA, HeadRows, forward_graph, forward_inputs, head_constants,
};
use super::super::protocol::Replay;
use super::super::vision_graph::arena_upload;
use super::steps::{check_ran, stream_of};
use super::{DeviceSteps, lock};
use gr00t_megakernel::device_backend::ForwardInputs;
use gr00t_megakernel::head_arena::{HeadArena, HeadWeight};

/// What of the head is on the device: the arena and constants of one embodiment on one
/// worker, and the forward graph the worker keeps.
#[derive(Default)]
pub(in super::super) struct DeviceHead {
    /// (worker, embodiment, horizon) whose arena and constants are there.
    on: Option<(u32, usize, usize)>,
    kept: Option<KeptForward>,
}

/// A forward graph the worker keeps (`op_replay`, under [`KEPT_FORWARD`]), and what it was
/// built for: the worker, the embodiment, the observation's key counts, the timestep slots.
#[derive(Clone, PartialEq)]
struct KeptForward {
    worker: u32,
    embodiment: usize,
    keys: super::CrossKeys,
    slots: Vec<usize>,
    steps: usize,
    programs: usize,
}

/// The worker's name of the kept forward graph.
const KEPT_FORWARD: &str = "forward";

impl DeviceSteps<'_> {
    /// The whole action head on the device for one observation: the state encoder, then each
    /// denoising step's action encoder, DiT blocks, output layer, decoder and Euler update, in
    /// one exchange (one graph; as few programs as the plan packs it in). Answers the
    /// normalised chunk `[horizon, max_action_dim]`.
    pub fn run_forward(
        &self,
        head: &HeadArena,
        inp: &ForwardInputs<'_>,
    ) -> Result<Vec<f32>, DitRunError> {
        let out = self.forward_inner(head, inp);
        if out.is_err() {
            self.failed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        out
    }

    fn forward_inner(
        &self,
        head: &HeadArena,
        inp: &ForwardInputs<'_>,
    ) -> Result<Vec<f32>, DitRunError> {
        let d = self.weights.dim;
        let (ad, sd) = (
            head.entry(HeadWeight::ActW1).kn_shape[0],
            head.entry(HeadWeight::StateL1).kn_shape[0],
        );
        let hz = inp.noise.len() / ad.max(1);
        let rows = HeadRows::new(hz);
        if inp.noise.len() != hz * ad
            || hz == 0
            || inp.state.len() != sd
            || inp.pos.len() != hz * d
            || inp.temb.len() != inp.tau_enc.len()
            || inp.temb.is_empty()
            || inp.temb.iter().chain(inp.tau_enc).any(|v| v.len() != d)
        {
            return Err(DitRunError::Input(format!(
                "forward: noise {} (want rows of {ad}), state {} (want {sd}), position rows {} \
                 (want {hz}x{d}), {} timestep embeddings and {} encodings of width {d}",
                inp.noise.len(),
                inp.state.len(),
                inp.pos.len(),
                inp.temb.len(),
                inp.tau_enc.len()
            )));
        }
        self.ensure_constants()?;
        self.ensure_head(head, rows, inp.pos)?;
        let keys = self.ensure_observation_of(inp.context, inp.text_mask, inp.image_mask)?;
        let slots = inp
            .temb
            .iter()
            .zip(inp.tau_enc)
            .map(|(temb, enc)| self.ensure_timestep_with(temb, Some((head, enc))))
            .collect::<Result<Vec<_>, _>>()?;
        // The host's share of the forward from here: its request built (and sent).
        let t0 = Instant::now();
        let worker = self.dev.reopened();
        let up = forward_inputs(rows, inp.state, inp.noise, ad);
        let replays = self.dev.options().replay;
        let kept = lock(&self.dev.head).kept.clone().filter(|k| {
            replays
                && k.worker == worker
                && k.embodiment == head.embodiment
                && k.keys == keys
                && k.slots == slots
        });
        let steps_n = slots.len();
        if let Some(k) = kept {
            let request = Replay {
                name: KEPT_FORWARD.into(),
                inputs: up.specs().to_vec(),
            };
            let build = t0.elapsed();
            let (reply, back) = self.dev.call(&request, &up.bytes())?;
            if let Some(run) = &reply.answer.run {
                check_ran(run, k.steps, k.programs)?;
                lock(&self.dev.times).replayed.add_steps(
                    build,
                    run,
                    reply.request_bytes,
                    steps_n as u64,
                );
                self.dev.counters.record_forward(steps_n);
                return stream_of(&back, hz * ad);
            }
            lock(&self.dev.head).kept = None;
        }
        // The DiT's matmuls read the token tensor's every tile row: the plan is cut for them.
        let mut dims = self.plan.dims;
        dims.sa_tokens = rows.token_m();
        let plan = tt_blackhole::plan::build_plan(&dims, self.dev.index.dtype)?;
        let (g, out) = forward_graph(self.dev, &plan, head, self.weights, rows, &slots, keys)?;
        let steps = g.steps();
        let keep = replays.then_some(KEPT_FORWARD);
        let (request, programs) =
            g.request(&up, &[(&out, hz, ad)], keep, self.dev.options().chain)?;
        let build = t0.elapsed();
        let (reply, back) = self.dev.call(&request, &up.bytes())?;
        check_ran(&reply.answer, steps, programs)?;
        lock(&self.dev.times).built.add_steps(
            build,
            &reply.answer,
            reply.request_bytes,
            steps_n as u64,
        );
        if replays {
            lock(&self.dev.head).kept = Some(KeptForward {
                worker,
                embodiment: head.embodiment,
                keys,
                slots,
                steps,
                programs,
            });
        }
        self.dev.counters.record_forward(steps_n);
        stream_of(&back, hz * ad)
    }

    /// The head arena of `head`'s embodiment and the head's constants on this worker, put
    /// once per worker, embodiment and horizon (another replaces them).
    fn ensure_head(
        &self,
        head: &HeadArena,
        rows: HeadRows,
        pos: &[f32],
    ) -> Result<(), DitRunError> {
        let want = (self.dev.reopened(), head.embodiment, rows.hz);
        let mut h = lock(&self.dev.head);
        if h.on == Some(want) {
            return Ok(());
        }
        h.kept = None;
        let upload = arena_upload(HEAD_ARENA, &head.weights);
        self.dev.call(&upload, &head.weights.bytes)?;
        let up = head_constants(head, rows, self.weights.dim, pos);
        self.dev.call(&up.put(), &up.bytes())?;
        h.on = Some(want);
        Ok(())
    }
}
