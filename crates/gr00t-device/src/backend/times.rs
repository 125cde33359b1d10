//! [`MatmulTimes`]: the time the device's programs took, by weight kind and by graph label,
//! and [`StepHost`], the host's share of the denoising steps (built whole or replayed).

use std::time::Duration;

use serde_json::json;
use tt_blackhole::dims::WeightKind;

use super::super::protocol::GraphRun;

/// Time spent in device programs, per weight kind (for reports and benchmarks).
#[derive(Debug, Clone, Default)]
pub struct MatmulTimes {
    /// (kind, calls, total program time)
    pub by_kind: Vec<(WeightKind, usize, Duration)>,
    /// Programs of the step graphs by label (`matmul FfUp`, `matmul Q+K+V`, ...): (label, programs,
    /// total time as the worker measured it, synchronisation included).
    pub graph: Vec<(String, u64, Duration)>,
    /// The last graph's programs that chained several steps: each one's phases in order, with
    /// the cores each took (`matmul`, `end`, `rows`, `attention`).
    pub chains: Vec<Vec<(String, u64)>>,
    /// The host's share of the steps whose graph went to the worker whole.
    pub built: StepHost,
    /// The host's share of the steps the worker replayed from the graph it kept (`op_replay`).
    pub replayed: StepHost,
}

/// The host's share of denoising steps: what preparing and sending them cost outside the
/// device's programs.
#[derive(Debug, Clone, Default)]
pub struct StepHost {
    /// How many steps.
    pub steps: u64,
    /// The runtime's time building the requests (the graph and its packing; for a replay, the
    /// inputs alone).
    pub build: Duration,
    /// The worker's time outside its programs: building them, putting the inputs, reading back.
    pub worker: Duration,
    /// The requests' header bytes (JSON), sent to the worker over its pipe.
    pub request_bytes: u64,
}

impl StepHost {
    /// As `/info` and `predict --stats-json` show it (under `device.step_host`): the steps, the
    /// runtime's and the worker's host time in milliseconds (totals and per step), the request
    /// bytes (total and per step).
    pub fn to_json(&self) -> serde_json::Value {
        let per = |x: f64| {
            if self.steps == 0 {
                0.0
            } else {
                x / self.steps as f64
            }
        };
        let (build, worker) = (
            self.build.as_secs_f64() * 1e3,
            self.worker.as_secs_f64() * 1e3,
        );
        json!({
            "steps": self.steps,
            "runtime_ms": build,
            "worker_ms": worker,
            "request_bytes": self.request_bytes,
            "runtime_ms_per_step": per(build),
            "worker_ms_per_step": per(worker),
            "request_bytes_per_step": per(self.request_bytes as f64).round() as u64,
        })
    }

    pub(super) fn add(&mut self, build: Duration, run: &GraphRun, request_bytes: u64) {
        self.add_steps(build, run, request_bytes, 1);
    }

    /// A graph that ran `steps` denoising steps (the whole forward's).
    pub(super) fn add_steps(
        &mut self,
        build: Duration,
        run: &GraphRun,
        request_bytes: u64,
        steps: u64,
    ) {
        self.steps += steps;
        self.build += build;
        self.worker += Duration::from_secs_f64(run.host_ms.max(0.0) / 1e3);
        self.request_bytes += request_bytes;
    }
}

impl MatmulTimes {
    pub(super) fn add(&mut self, kind: WeightKind, d: Duration) {
        match self.by_kind.iter_mut().find(|(k, _, _)| *k == kind) {
            Some(e) => {
                e.1 += 1;
                e.2 += d;
            }
            None => self.by_kind.push((kind, 1, d)),
        }
    }
}

impl MatmulTimes {
    /// The steps' host share as `/info` and `predict --stats-json` show it (`device.step_host`).
    pub fn step_host_json(&self) -> serde_json::Value {
        json!({"built": self.built.to_json(), "replayed": self.replayed.to_json()})
    }
}
