//! [`DeviceSteps`]' on-device step: the device-lifetime constants put once per worker, the
//! observation's cross K/V once per observation, then one exchange per step: the step's graph
//! (`super::super::graph` builds it), kept by the worker, and after that a replay of it with
//! the step's inputs alone, until the worker no longer holds it as it was.

use std::time::Instant;

use tt_blackhole::device::{DitRunError, DitStepInputs};

use super::super::graph::{
    Context, CrossKeys, Upload, ada_graph, observation_graph, step_graph, step_inputs,
};
use super::super::head_graph::head_timestep;
use super::super::protocol::{GraphRun, Replay};
use super::{DeviceSteps, GraphOptions, lock};
use gr00t_megakernel::head_arena::HeadArena;

/// How many timesteps' AdaLN rows the device keeps (a forward has `num_inference_timesteps`
/// of them, 4 in N1.6); past that, the oldest slot is computed again for the new one.
pub(in super::super) const TIMESTEP_SLOTS: usize = 8;

/// A step graph the worker keeps (`op_replay`, under `step/{slot}`), and what it was built
/// for: a step's graph depends on the device's weights and grid (fixed for a
/// [`super::TtDevice`]), the observation's key counts (the plan is cut for its context length),
/// the step's tokens and the slot of its timestep's AdaLN rows, nothing else.
#[derive(Clone, PartialEq)]
pub(in super::super) struct KeptStep {
    worker: u32,
    keys: CrossKeys,
    tokens: usize,
    slot: usize,
    steps: usize,
    programs: usize,
}

/// The timesteps whose AdaLN rows are on the device: each slot's SiLU(temb) (bf16 values), on
/// which worker.
#[derive(Default)]
pub(in super::super) struct Timesteps {
    worker: u32,
    slots: Vec<Vec<f32>>,
    next: usize,
    /// The slots whose head rows (the action encoder's time half, the output layer's
    /// modulation) are on the device too, and for which embodiment.
    pub(super) head_rows: Vec<(usize, usize)>,
}

impl Timesteps {
    /// The slot for `act` (SiLU(temb)) on `worker`, and whether its rows must be computed: a
    /// timestep already there keeps its slot; a new one takes an empty slot (one whose graph
    /// failed), else a new slot up to [`TIMESTEP_SLOTS`], else the oldest in turn. A slot holds no timestep until
    /// [`Timesteps::computed`] says its graph ran.
    fn slot_for(&mut self, worker: u32, act: &[f32]) -> (usize, bool) {
        if self.worker != worker {
            *self = Timesteps {
                worker,
                ..Timesteps::default()
            };
        }
        if let Some(slot) = self.slots.iter().position(|s| s == act) {
            return (slot, false);
        }
        let slot = if let Some(empty) = self.slots.iter().position(Vec::is_empty) {
            empty
        } else if self.slots.len() < TIMESTEP_SLOTS {
            self.slots.push(Vec::new());
            self.slots.len() - 1
        } else {
            let oldest = self.next;
            self.next = (oldest + 1) % TIMESTEP_SLOTS;
            oldest
        };
        self.slots[slot].clear();
        self.head_rows.retain(|(s, _)| *s != slot);
        (slot, true)
    }

    /// The rows of `act` are in `slot` now.
    fn computed(&mut self, slot: usize, act: Vec<f32>) {
        self.slots[slot] = act;
    }
}

/// SiLU(temb), packed to bf16, as the emulator computes it.
fn silu_bf16(temb: &[f32]) -> Vec<f32> {
    let mut act = temb.to_vec();
    gr00t_runtime::cpu::norms::silu(&mut act);
    act.iter_mut()
        .for_each(|v| *v = tt_blackhole::bf16::round_to_bf16(*v));
    act
}

/// What the cross K/V on the device were computed from, and on which worker (a reopened
/// device holds none of them).
#[derive(PartialEq)]
pub(super) struct ObservationKey {
    worker: u32,
    context: Vec<f32>,
    text_mask: Vec<bool>,
    image_mask: Vec<bool>,
}

impl DeviceSteps<'_> {
    /// The graphs' device-lifetime tensors (biases, the scaler tile, the plain LayerNorm's
    /// vectors), put once per worker.
    pub(super) fn ensure_constants(&self) -> Result<(), DitRunError> {
        let mut done = lock(&self.dev.constants);
        if !*done {
            let up = super::super::graph::constants(self.dev, self.weights)?;
            self.dev.call(&up.put(), &up.bytes())?;
            *done = true;
        }
        Ok(())
    }

    /// The observation's context, masks and cross K/V on the device, once per observation
    /// (again only when a step brings another context, or the worker was replaced).
    pub(super) fn ensure_observation(
        &self,
        inp: &DitStepInputs<'_>,
    ) -> Result<CrossKeys, DitRunError> {
        self.ensure_observation_of(inp.context, inp.text_mask, inp.image_mask)
    }

    /// [`DeviceSteps::ensure_observation`] of a context and its masks.
    pub(super) fn ensure_observation_of(
        &self,
        context: &[f32],
        text_mask: &[bool],
        image_mask: &[bool],
    ) -> Result<CrossKeys, DitRunError> {
        let key = ObservationKey {
            worker: self.dev.reopened(),
            context: context.to_vec(),
            text_mask: text_mask.to_vec(),
            image_mask: image_mask.to_vec(),
        };
        let mut obs = lock(&self.observation);
        if let Some((k, keys)) = obs.as_ref()
            && *k == key
        {
            return Ok(*keys);
        }
        let cross = self.plan.dims.cross_dim;
        if context.len() != text_mask.len() * cross || text_mask.len() != image_mask.len() {
            return Err(DitRunError::Input("context and masks disagree".into()));
        }
        // The context the device's backbone just made is there already: gathered, not sent.
        let on_device = lock(&self.vl_on_device).as_deref() == Some(context);
        let ctx = match on_device {
            true => Context::Device(super::llm::VL_CONTEXT),
            false => Context::Host(context),
        };
        let (g, up, keys) = observation_graph(
            self.dev,
            &self.plan,
            self.weights,
            ctx,
            text_mask,
            image_mask,
        )?;
        let (request, _) = g.request(&up, &[], None, self.dev.options().chain)?;
        self.dev.call(&request, &up.bytes())?;
        *obs = Some((key, keys));
        Ok(keys)
    }

    /// The kept graph `name` run again with `up`'s inputs (`op_replay`): the bytes it read back,
    /// or `None` when the worker no longer holds it (the caller builds it again).
    pub(super) fn replay_kept(
        &self,
        name: &str,
        up: &Upload,
        (steps, programs): (usize, usize),
    ) -> Result<Option<Vec<u8>>, DitRunError> {
        let request = Replay {
            name: name.into(),
            inputs: up.specs().to_vec(),
        };
        let (reply, back) = self.dev.call(&request, &up.bytes())?;
        match &reply.answer.run {
            Some(run) => {
                check_ran(run, steps, programs)?;
                Ok(Some(back))
            }
            None => Ok(None),
        }
    }

    /// The step's timestep on the device: its AdaLN rows computed there ([`ada_graph`]) once
    /// per SiLU(temb) and worker, outside the steps. Answers their slot.
    pub(super) fn ensure_timestep(&self, temb: &[f32]) -> Result<usize, DitRunError> {
        self.ensure_timestep_with(temb, None)
    }

    /// [`DeviceSteps::ensure_timestep`], and with `head` (the head arena and the sinusoidal
    /// encoding of the step's τ) the head's rows of that timestep too, in the same graph
    /// (`head_graph::head_timestep`), once per timestep, embodiment and worker.
    pub(super) fn ensure_timestep_with(
        &self,
        temb: &[f32],
        head: Option<(&HeadArena, &[f32])>,
    ) -> Result<usize, DitRunError> {
        let act = silu_bf16(temb);
        let mut t = lock(&self.dev.timesteps);
        let (slot, new) = t.slot_for(self.dev.reopened(), &act);
        let head = head.filter(|(h, _)| !t.head_rows.contains(&(slot, h.embodiment)));
        if !new && head.is_none() {
            return Ok(slot);
        }
        let (mut g, mut up) = if new {
            ada_graph(self.dev, &self.plan, self.weights, &act, slot)?
        } else {
            let mut g = super::super::graph::Graph::new(self.dev, &self.plan);
            g.scratch = "a";
            (g, super::super::graph::Upload::new())
        };
        if let Some((h, tau_enc)) = head {
            g.head = Some(h);
            head_timestep(&mut g, &mut up, tau_enc, slot)?;
        }
        let (request, _) = g.request(&up, &[], None, self.dev.options().chain)?;
        self.dev.call(&request, &up.bytes())?;
        if new {
            t.computed(slot, act);
        }
        if let Some((h, _)) = head {
            t.head_rows.retain(|(s, _)| *s != slot);
            t.head_rows.push((slot, h.embodiment));
        }
        Ok(slot)
    }

    /// One step: the tokens in, the stream after the last block out, the AdaLN rows of the
    /// timestep in `slot` read on the device. The step's graph goes to the worker whole once
    /// per slot and is kept there; later steps replay it (unless [`GraphOptions::replay`] is
    /// off, `GR00T_MK_REPLAY=0`: every step sends its graph whole, as before the replays).
    pub(super) fn run_step_graph(
        &self,
        inp: &DitStepInputs<'_>,
        keys: CrossKeys,
        slot: usize,
    ) -> Result<Vec<f32>, DitRunError> {
        let t0 = Instant::now();
        let dims = &self.plan.dims;
        let (d, m) = (dims.width(), dims.sa_tokens);
        if inp.tokens.len() != m * d || inp.temb.len() != d {
            return Err(DitRunError::Input(format!(
                "tokens {} (want {m}x{d}), temb {}",
                inp.tokens.len(),
                inp.temb.len()
            )));
        }
        let GraphOptions {
            chain,
            replay: replays,
        } = self.dev.options();
        let name = format!("step/{slot}");
        let worker = self.dev.reopened();
        let kept = lock(&self.dev.kept_steps)
            .iter()
            .find(|k| k.worker == worker && k.keys == keys && k.tokens == m && k.slot == slot)
            .cloned()
            .filter(|_| replays);
        if let Some(k) = kept {
            let up = step_inputs(d, inp.tokens);
            let request = Replay {
                name: name.clone(),
                inputs: up.specs().to_vec(),
            };
            let build = t0.elapsed();
            let (reply, back) = self.dev.call(&request, &up.bytes())?;
            if let Some(run) = &reply.answer.run {
                check_ran(run, k.steps, k.programs)?;
                lock(&self.dev.times)
                    .replayed
                    .add(build, run, reply.request_bytes);
                return stream_of(&back, m * d);
            }
            // The worker no longer holds it as it was (another graph re-allocated one of its
            // tensors: a context of another length): the graph goes whole again, kept anew.
            lock(&self.dev.kept_steps).retain(|x| *x != k);
        }
        let (g, up, out) = step_graph(self.dev, &self.plan, self.weights, inp.tokens, slot, keys)?;
        let steps = g.steps();
        let keep = replays.then_some(name.as_str());
        let (request, programs) = g.request(&up, &[(&out, m, d)], keep, chain)?;
        let build = t0.elapsed();
        let (reply, back) = self.dev.call(&request, &up.bytes())?;
        check_ran(&reply.answer, steps, programs)?;
        lock(&self.dev.times)
            .built
            .add(build, &reply.answer, reply.request_bytes);
        if replays {
            let mut kept = lock(&self.dev.kept_steps);
            kept.retain(|k| k.worker == worker && k.slot != slot);
            kept.push(KeptStep {
                worker,
                keys,
                tokens: m,
                slot,
                steps,
                programs,
            });
        }
        stream_of(&back, m * d)
    }
}

/// Whether the worker ran the step graph's `steps` in the `programs` the plan packed.
pub(super) fn check_ran(run: &GraphRun, steps: usize, programs: usize) -> Result<(), DitRunError> {
    if run.steps != steps as u64 || run.programs != programs as u64 {
        return Err(DitRunError::Device(format!(
            "the step graph ran {} of its {steps} steps in {} programs, the plan packed {programs}",
            run.steps, run.programs
        )));
    }
    Ok(())
}

/// The stream after the last block (`values` f32) from the worker's answer.
pub(super) fn stream_of(back: &[u8], values: usize) -> Result<Vec<f32>, DitRunError> {
    if back.len() != values * 4 {
        return Err(DitRunError::Device(format!(
            "the step graph returned {} bytes, want {}",
            back.len(),
            values * 4
        )));
    }
    Ok(back
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{TIMESTEP_SLOTS, Timesteps};

    /// A forward's timesteps take a slot each and keep it; past the slots the oldest is
    /// recycled; a slot whose graph failed holds nothing; a new worker starts empty.
    #[test]
    fn timesteps_keep_their_slots() {
        let mut t = Timesteps::default();
        let act = |k: usize| vec![k as f32; 4];
        for k in 0..4 {
            assert_eq!(t.slot_for(0, &act(k)), (k, true));
            t.computed(k, act(k));
        }
        for k in 0..4 {
            assert_eq!(t.slot_for(0, &act(k)), (k, false), "timestep {k} again");
        }
        // A graph that failed: its slot is empty, computed again next time.
        assert_eq!(t.slot_for(0, &act(4)), (4, true));
        assert_eq!(t.slot_for(0, &act(4)), (4, true));
        t.computed(4, act(4));
        for k in 5..TIMESTEP_SLOTS {
            assert_eq!(t.slot_for(0, &act(k)), (k, true));
            t.computed(k, act(k));
        }
        // The slots are full: the next new timestep takes the oldest slot, 0.
        assert_eq!(t.slot_for(0, &act(99)), (0, true));
        t.computed(0, act(99));
        assert_eq!(t.slot_for(0, &act(0)), (1, true), "timestep 0 was recycled");
        // Another worker holds none of them.
        assert_eq!(t.slot_for(1, &act(99)), (0, true));
    }
}
