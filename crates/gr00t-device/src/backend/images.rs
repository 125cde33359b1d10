//! A camera's image tokens from the device (`GR00T_BACKBONE_BACKEND=device`): SigLIP2's
//! tower and the projector as one graph (`super::super::vision_graph`), the patches the only
//! input and the projector's rows the only output.

use tt_blackhole::device::DitRunError;

use super::super::graph::{Graph, Upload};

use super::super::vision_graph::{
    BACKBONE_ARENA, VisionShape, arena_constants, arena_upload, patch_input, projector_at,
    vision_constants, vision_tower,
};
use super::llm::embed_table;
use super::steps::{check_ran, stream_of};
use super::{DeviceSteps, lock};
use gr00t_megakernel::backbone_arena::{BackboneArena, BackboneWeight};
use gr00t_megakernel::device_backend::Camera;
use gr00t_megakernel::vision_layout::VisionLayout;
use gr00t_runtime::config::VisionConfig;

/// What of the backbone is on the device: the worker whose DRAM holds the arena, the patch
/// grid the constants (position table, key mask) were put for, and the vision graph the
/// worker keeps for it.
#[derive(Default)]
pub(in super::super) struct DeviceBackbone {
    on: Option<(u32, Option<VisionLayout>)>,
    /// Per camera of the observation, the vision graph kept for it.
    kept: Vec<KeptVision>,
    /// The prompt length whose LLM constants (RoPE tables, key mask) are there.
    pub(super) llm_tokens: Option<usize>,
    /// The LLM graph the worker keeps.
    pub(super) kept_llm: Option<super::llm::KeptLlm>,
}

/// A vision graph the worker keeps (`op_replay`, under [`kept_name`]): the worker,
/// grid and camera it was built for, its steps and programs.
#[derive(Clone, Copy, PartialEq)]
struct KeptVision {
    worker: u32,
    layout: VisionLayout,
    camera: Camera,
    steps: usize,
    programs: usize,
}

/// The worker's name of `camera`'s kept vision graph (each writes its own rows).
fn kept_name(camera: Camera) -> String {
    format!("vision/{}", camera.index)
}

/// Every camera's image tokens as the projector left them on the device (fp32; camera i's in
/// tile rows `i·⌈tokens/32⌉..`), for the LLM graph's gather.
pub(super) const IMAGE_ROWS: &str = "b/img";

impl DeviceSteps<'_> {
    /// The image tokens of one `[ch, h, w]` image (`[(h/p/2)·(w/p/2), text hidden]`, raster
    /// order of the 2×2 blocks): the patch embedding, every encoder layer, the post-LayerNorm
    /// and the projector of `arena` on the device, one exchange; the tokens also stay there,
    /// in `camera`'s rows of [`IMAGE_ROWS`].
    pub fn image_tokens(
        &self,
        arena: &BackboneArena,
        vision: &VisionConfig,
        pixels: &[f32],
        (h, w): (usize, usize),
        camera: Camera,
    ) -> Result<Vec<f32>, DitRunError> {
        if camera.index >= camera.of {
            return Err(DitRunError::Input(format!(
                "camera {} of {}",
                camera.index, camera.of
            )));
        }
        let (p, ch) = (vision.patch_size, vision.num_channels);
        let layout = (h % p == 0 && w % p == 0)
            .then(|| VisionLayout::new(h / p, w / p))
            .flatten()
            .filter(|_| pixels.len() == ch * h * w)
            .ok_or_else(|| {
                DitRunError::Input(format!(
                    "image: {} values for [{ch}, {h}, {w}]; the device's vision tower needs \
                     sides that are an even number of {p}-pixel patches",
                    pixels.len()
                ))
            })?;
        let shape = VisionShape {
            layout,
            width: vision.hidden_size,
            heads: vision.num_attention_heads,
        };
        let d = arena
            .weights
            .get(BackboneWeight::ProjectorFc2)
            .map(|e| e.kn_shape[1])
            .ok_or_else(|| DitRunError::Arena("the backbone arena has no projector".into()))?;
        self.ensure_backbone(arena, shape)?;
        let worker = self.dev.reopened();
        let mut up = Upload::new();
        patch_input(&mut up, "t/v/p", pixels, [ch, h, w, p], layout);
        let rows = layout.blocks();
        let bt = layout.blocks().div_ceil(32);
        // What is read back: every row up to the camera's last (the read starts at row 0).
        let read = 32 * bt * camera.index + rows;
        let own = |back: &[u8]| -> Result<Vec<f32>, DitRunError> {
            let all = stream_of(back, read * d)?;
            Ok(all[32 * bt * camera.index * d..].to_vec())
        };
        // The same grid's and camera's graph again: only the patches go in.
        let replays = self.dev.options().replay;
        let kept =
            lock(&self.dev.backbone).kept.iter().copied().find(|k| {
                replays && k.worker == worker && k.layout == layout && k.camera == camera
            });
        if let Some(k) = kept {
            let name = kept_name(camera);
            if let Some(back) = self.replay_kept(&name, &up, (k.steps, k.programs))? {
                return self.image_made(camera, own(&back)?);
            }
            lock(&self.dev.backbone).kept.clear();
        }
        let mut g = Graph::new(self.dev, &self.plan);
        g.backbone = Some(arena);
        // Partials of their own: a kept vision graph must not share the kept forward's.
        g.scratch = "v";
        let layers = arena.vision_layers();
        vision_tower(&mut g, arena, shape, layers, "t/v/p", "t/v/out")?;
        let place = (IMAGE_ROWS, bt * camera.index, Some(bt * camera.of));
        projector_at(&mut g, arena, shape, "t/v/out", place)?;
        let steps = g.steps();
        let name = kept_name(camera);
        let keep = replays.then_some(name.as_str());
        let (request, programs) = g.request(
            &up,
            &[(IMAGE_ROWS, read, d)],
            keep,
            self.dev.options().chain,
        )?;
        // Another grid or camera count re-allocates the image rows under every kept vision
        // graph: those are built again.
        lock(&self.dev.backbone)
            .kept
            .retain(|k| k.worker == worker && k.layout == layout && k.camera.of == camera.of);
        let (reply, back) = self.dev.call(&request, &up.bytes())?;
        check_ran(&reply.answer, steps, programs)?;
        if replays {
            let mut b = lock(&self.dev.backbone);
            b.kept.retain(|k| k.camera != camera);
            b.kept.push(KeptVision {
                worker,
                layout,
                camera,
                steps,
                programs,
            });
        }
        self.image_made(camera, own(&back)?)
    }

    /// `rows`, which the device holds in `camera`'s rows of [`IMAGE_ROWS`] for this forward's
    /// LLM graph.
    fn image_made(&self, camera: Camera, rows: Vec<f32>) -> Result<Vec<f32>, DitRunError> {
        let mut on = lock(&self.image_on_device);
        on.resize(camera.of, None);
        on[camera.index] = Some(rows.clone());
        Ok(rows)
    }

    /// The backbone arena on this worker, with its constants and the token-embedding table
    /// (put once per worker: the largest uploads). Answers the grid whose vision constants are
    /// there.
    pub(super) fn ensure_backbone_arena(
        &self,
        arena: &BackboneArena,
    ) -> Result<Option<VisionLayout>, DitRunError> {
        let worker = self.dev.reopened();
        let mut b = lock(&self.dev.backbone);
        if let Some((w, grid)) = b.on
            && w == worker
        {
            return Ok(grid);
        }
        b.kept.clear();
        b.llm_tokens = None;
        b.kept_llm = None;
        let upload = arena_upload(BACKBONE_ARENA, &arena.weights);
        self.dev.call(&upload, &arena.weights.bytes)?;
        let mut up = arena_constants(arena);
        if let Some(table) = &arena.embed {
            embed_table(&mut up, table);
        }
        self.dev.call(&up.put(), &up.bytes())?;
        b.on = Some((worker, None));
        Ok(None)
    }

    /// [`DeviceSteps::ensure_backbone_arena`], and the vision constants for `shape`'s grid
    /// (put again when the grid changes).
    fn ensure_backbone(
        &self,
        arena: &BackboneArena,
        shape: VisionShape,
    ) -> Result<(), DitRunError> {
        let grid = self.ensure_backbone_arena(arena)?;
        let worker = self.dev.reopened();
        let mut b = lock(&self.dev.backbone);
        if grid != Some(shape.layout) {
            b.kept.clear();
            let up = vision_constants(arena, shape)?;
            self.dev.call(&up.put(), &up.bytes())?;
            b.on = Some((worker, Some(shape.layout)));
        }
        Ok(())
    }
}
