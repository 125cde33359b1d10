//! This crate as `gr00t-megakernel`'s device backend: [`TtnnOpener`] opens a [`TtDevice`], which
//! the policy supervises, and each of its forwards is a [`DeviceSteps`].

use tt_blackhole::arena::ArenaIndex;
use tt_blackhole::device::{DeviceKind, DitRunError};
use tt_blackhole::dims::DitDims;

use super::{DEFAULT_PYTHON, DeviceSteps, GraphOptions, TtDevice, WorkerConfig};
use gr00t_megakernel::MegakernelConfig;
use gr00t_megakernel::backbone_arena::BackboneArena;
use gr00t_megakernel::counters::DeviceStats;
use gr00t_megakernel::device_backend::{
    Camera, DeviceBackend, DeviceForward, DeviceOpener, ForwardInputs, Prompt,
};
use gr00t_megakernel::head_arena::HeadArena;
use gr00t_runtime::config::{TextConfig, VisionConfig};
use gr00t_runtime::model::dit::DitWeights;

/// Opens a p150a or the simulator through the ttnn worker, as the server's settings say: the
/// worker's interpreter (`GR00T_TTNN_PYTHON`, else `python3`), its exchange deadline
/// (`GR00T_MK_DEVICE_TIMEOUT_S`), chaining and replay (`GR00T_MK_CHAIN`, `GR00T_MK_REPLAY`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TtnnOpener;

impl DeviceOpener for TtnnOpener {
    fn open(
        &self,
        kind: DeviceKind,
        index: &ArenaIndex,
        arena: &[u8],
        config: &MegakernelConfig,
    ) -> Result<Box<dyn DeviceBackend>, DitRunError> {
        let python = config.ttnn_python.as_deref().unwrap_or(DEFAULT_PYTHON);
        let worker = WorkerConfig::new(python).with_call_timeout(config.device_timeout);
        let options = GraphOptions {
            chain: config.chain,
            replay: config.replay,
        };
        let dev = TtDevice::open_with(kind, index, arena, &worker)?.with_options(options);
        Ok(Box::new(dev))
    }
}

impl DeviceBackend for TtDevice {
    fn lost(&self) -> Option<String> {
        TtDevice::lost(self)
    }

    fn worker_pid(&self) -> Option<u32> {
        TtDevice::worker_pid(self)
    }

    fn reopened(&self) -> u32 {
        TtDevice::reopened(self)
    }

    fn reopen(&self, arena: &[u8]) -> Result<(), DitRunError> {
        TtDevice::reopen(self, arena)
    }

    fn close(&self) {
        TtDevice::close(self)
    }

    fn stats(&self) -> Option<DeviceStats> {
        TtDevice::stats(self)
    }

    fn step_host(&self) -> serde_json::Value {
        self.times().step_host_json()
    }

    fn forward<'a>(
        &'a self,
        weights: &'a DitWeights,
        dims: &DitDims,
    ) -> Result<Box<dyn DeviceForward + 'a>, DitRunError> {
        Ok(Box::new(DeviceSteps::new(self, weights, dims)?))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl DeviceForward for DeviceSteps<'_> {
    fn run_flow(
        &self,
        head: &HeadArena,
        inputs: &ForwardInputs<'_>,
    ) -> Result<Vec<f32>, DitRunError> {
        self.run_forward(head, inputs)
    }

    fn image_tokens(
        &self,
        arena: &BackboneArena,
        vision: &VisionConfig,
        pixels: &[f32],
        hw: (usize, usize),
        camera: Camera,
    ) -> Result<Vec<f32>, DitRunError> {
        DeviceSteps::image_tokens(self, arena, vision, pixels, hw, camera)
    }

    fn vl_context(
        &self,
        arena: &BackboneArena,
        text: &TextConfig,
        layers: usize,
        prompt: Prompt<'_>,
    ) -> Result<Vec<f32>, DitRunError> {
        DeviceSteps::vl_context(self, arena, text, layers, prompt)
    }
}
