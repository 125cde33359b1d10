//! The prompt's VL context from the device (`GR00T_BACKBONE_BACKEND=device`): the prompt's rows
//! gathered from the token-embedding table and the image tokens on the device
//! (`super::super::gather`), Qwen3's kept layers, the final norm and the action head's vlln
//! (`super::super::llm_graph`), one exchange. The token ids are the only text input.

use tt_blackhole::device::DitRunError;

use super::super::gather::{TokenSource, check_tokens, ids_tile};
use super::super::graph::{Graph, Upload, tiles};
use super::super::llm_graph::{LlmShape, llm_constants, qwen3_body};
use super::super::protocol::ActDtype;
use super::images::IMAGE_ROWS;
use super::steps::{check_ran, stream_of};
use super::{DeviceSteps, lock};
use gr00t_megakernel::backbone_arena::{BackboneArena, EmbedTable};
use gr00t_megakernel::device_backend::Prompt;
use gr00t_runtime::config::TextConfig;

/// The token-embedding table on the device (bf16, device lifetime).
const EMBED_TABLE: &str = "b/embed";
/// The VL context the LLM graph leaves on the device (fp32; rewritten each forward) for the
/// observation's graph to gather its text and image rows from.
pub(super) const VL_CONTEXT: &str = "b/vl";
/// The worker's name of the kept LLM graph.
const KEPT_LLM: &str = "llm";

/// The LLM graph the worker keeps (`op_replay`, under [`KEPT_LLM`]): the worker and prompt
/// length it was built for, its steps and programs.
#[derive(Clone, Copy, PartialEq)]
pub(super) struct KeptLlm {
    worker: u32,
    tokens: usize,
    images: usize,
    /// Whether it gathers the image rows from [`IMAGE_ROWS`] (else from its input).
    image_src_on_device: bool,
    steps: usize,
    programs: usize,
}

/// Where the image tokens are in [`IMAGE_ROWS`]: each camera's `per` tokens from its own
/// multiple of `stride` rows.
#[derive(Debug, Clone, Copy)]
struct ImageRowsAt {
    per: usize,
    stride: usize,
}

impl ImageRowsAt {
    /// The row of image token `k` (counted over every camera's, in order).
    fn row(self, k: usize) -> usize {
        (k / self.per) * self.stride + k % self.per
    }
}

/// `table` as the device holds it: bf16 `[⌈vocab/32⌉·32, ⌈hidden/32⌉·32]`, the rest zero.
pub(in super::super) fn embed_table(up: &mut Upload, table: &EmbedTable) {
    let (v, h) = (table.vocab, table.hidden);
    let values = table.rows(0..v);
    up.add_padded(
        EMBED_TABLE,
        &values,
        v,
        h,
        32 * tiles(v),
        32 * tiles(h),
        ActDtype::Bf16,
    );
}

impl DeviceSteps<'_> {
    /// The VL context `[ids, hidden]` of `prompt`: its rows gathered on the device (table rows
    /// by id, the image tokens' rows in order), `layers` Qwen3 layers, the final RMSNorm and
    /// vlln when `arena` has it, one exchange.
    pub fn vl_context(
        &self,
        arena: &BackboneArena,
        text: &TextConfig,
        layers: usize,
        prompt: Prompt<'_>,
    ) -> Result<Vec<f32>, DitRunError> {
        let d = text.hidden_size;
        let table = arena.embed.as_ref().ok_or_else(|| {
            DitRunError::Arena("the backbone arena has no token-embedding table".into())
        })?;
        if arena.llm_layers() < layers {
            return Err(DitRunError::Arena(format!(
                "the backbone arena has {} Qwen3 layers, the body keeps {layers}",
                arena.llm_layers()
            )));
        }
        let images = prompt.image_rows.len() / d.max(1);
        if images * d != prompt.image_rows.len() {
            return Err(DitRunError::Input(format!(
                "image rows: {} values are not rows of {d}",
                prompt.image_rows.len()
            )));
        }
        // Where the image rows are: where the cameras' vision graphs left them (camera i's in
        // its own tile rows of IMAGE_ROWS), or sent with this graph's inputs.
        let placed = self.images_placed(prompt.image_rows, d);
        let mut next = 0;
        let tokens: Vec<TokenSource> = prompt
            .ids
            .iter()
            .map(|&id| {
                if id == prompt.image_token && next < images {
                    next += 1;
                    TokenSource::Image(placed.map_or(next - 1, |(_, at)| at.row(next - 1)))
                } else {
                    TokenSource::Text(id)
                }
            })
            .collect();
        if next != images {
            return Err(DitRunError::Input(format!(
                "the prompt has {next} image tokens for {images} image rows"
            )));
        }
        let image_rows = placed.map_or(images, |(rows, _)| rows);
        check_tokens(&tokens, table.vocab, image_rows)?;
        let n = tokens.len();
        let shape = LlmShape::new(text, n);
        self.ensure_backbone_arena(arena)?;
        {
            let mut b = lock(&self.dev.backbone);
            if b.llm_tokens != Some(n) {
                let up = llm_constants(shape)?;
                // A kept graph names the old tables: built again.
                b.kept_llm = None;
                self.dev.call(&up.put(), &up.bytes())?;
                b.llm_tokens = Some(n);
            }
        }
        let dp = 32 * tiles(d);
        let mut up = Upload::new();
        // Only the ids' row of their tile goes: 4 bytes a token.
        let ids = ids_tile(&tokens);
        up.add_padded("t/l/ids", &ids[..n], 1, n, 32, 32 * tiles(n), ActDtype::F32);
        // The image rows the vision graphs left on the device, or every camera's rows sent in
        // one tensor (one tile row of zeros when there are none).
        let on_device = placed.is_some();
        let image_src = if on_device { IMAGE_ROWS } else { "t/l/img" };
        if !on_device {
            up.add_padded(
                "t/l/img",
                prompt.image_rows,
                images,
                d,
                32 * tiles(images.max(1)),
                dp,
                ActDtype::F32,
            );
        }
        // The same prompt length's graph again: only the ids and the image rows go in.
        let worker = self.dev.reopened();
        let replays = self.dev.options().replay;
        let kept = lock(&self.dev.backbone).kept_llm.filter(|k| {
            replays
                && k.worker == worker
                && k.tokens == n
                && k.images == images
                && k.image_src_on_device == on_device
        });
        if let Some(k) = kept {
            if let Some(back) = self.replay_kept(KEPT_LLM, &up, (k.steps, k.programs))? {
                return self.context_made(stream_of(&back, n * d)?);
            }
            lock(&self.dev.backbone).kept_llm = None;
        }
        let mut g = Graph::new(self.dev, &self.plan);
        g.backbone = Some(arena);
        // Partials of their own: a kept LLM graph must not share a kept graph's.
        g.scratch = "l";
        g.gather_rows("t/l/ids", n, [EMBED_TABLE, image_src], d, "t/l/x0")?;
        qwen3_body(&mut g, arena, shape, layers, "t/l/x0", VL_CONTEXT)?;
        let steps = g.steps();
        let keep = replays.then_some(KEPT_LLM);
        let (request, programs) =
            g.request(&up, &[(VL_CONTEXT, n, d)], keep, self.dev.options().chain)?;
        let (reply, back) = self.dev.call(&request, &up.bytes())?;
        check_ran(&reply.answer, steps, programs)?;
        if replays {
            lock(&self.dev.backbone).kept_llm = Some(KeptLlm {
                worker,
                tokens: n,
                images,
                image_src_on_device: on_device,
                steps,
                programs,
            });
        }
        self.context_made(stream_of(&back, n * d)?)
    }

    /// When `image_rows` (`[tokens, d]`, every camera's in order) are the rows this forward's
    /// vision graphs left on the device: the rows of [`IMAGE_ROWS`] and where image token k
    /// is in it (camera i's tokens start at its own tile rows).
    fn images_placed(&self, image_rows: &[f32], d: usize) -> Option<(usize, ImageRowsAt)> {
        let on = lock(&self.image_on_device);
        let cameras: Vec<&Vec<f32>> = on.iter().map(Option::as_ref).collect::<Option<_>>()?;
        let per = cameras.first()?.len() / d.max(1);
        let same = cameras.iter().all(|c| c.len() == per * d);
        let all = cameras.iter().flat_map(|c| c.iter().copied());
        if per == 0 || !same || !all.eq(image_rows.iter().copied()) {
            return None;
        }
        let stride = 32 * tiles(per);
        Some((stride * cameras.len(), ImageRowsAt { per, stride }))
    }

    /// `context`, which the device holds as [`VL_CONTEXT`] for this forward's observation.
    fn context_made(&self, context: Vec<f32>) -> Result<Vec<f32>, DitRunError> {
        *lock(&self.vl_on_device) = Some(context.clone());
        Ok(context)
    }
}
