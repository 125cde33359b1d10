//! Serving GR00T N1.7: the [`N17Model`] behind the same [`Runtime`] (and so the same
//! `/predict`, `/info`, `predict` subcommand and warm-up) as N1.6.
//!
//! The request is N1.6's with frame and state-row lists, `[1, 40, 132]` noise and optional
//! real-time chunking ([`crate::n17_api`]); the response is N1.6's plus `chunk`, the
//! normalised model-space chunk an RTC client sends back as `rtc.previous_chunk`.
//! N1.7 runs on the f32 CPU reference only: a device backend is refused at boot rather than
//! silently replaced.

use std::path::Path;
use std::time::Instant;

use anyhow::bail;
use gr00t_runtime::model::Taps;
use gr00t_runtime::n17::model::{N17Model, N17ModelError, VERSION_N17};
use gr00t_runtime::n17::processing::decode::split_normalized;
use gr00t_runtime::n17::processing::{GroupActions, PrepareError};

use crate::api::{GroupArrays, PredictResponse, Timing};
use crate::error::ApiError;
use crate::fifo::FifoLock;
use crate::n17_api::{N17Request, Shapes};
use crate::runtime::{Runtime, RuntimeInfo, stage_for};
use crate::settings::Settings;

/// What `/info` adds for N1.7.
#[derive(Debug, Clone, serde::Serialize)]
pub struct N17Info {
    /// Frames a request gives per camera (oldest first).
    pub frames_per_camera: usize,
    /// Rows a request gives per state group (oldest first).
    pub state_history: usize,
    /// `[rows, cols]` of `noise`, of the response's `chunk` and of `rtc.previous_chunk`.
    pub chunk_shape: [usize; 2],
}

/// The loaded N1.7 model as the runtime serves it.
pub struct N17Engine {
    model: N17Model,
}

impl N17Engine {
    /// The model.
    pub fn model(&self) -> &N17Model {
        &self.model
    }

    /// What a request is checked against.
    fn shapes(&self) -> Shapes<'_> {
        let (rows, cols) = self.model.chunk_shape();
        Shapes {
            embodiment: &self.model.processing.config,
            rows,
            cols,
        }
    }

    /// Parse and run one `/predict` body; only the forward holds the `device` lock.
    pub(crate) fn predict_body(
        &self,
        body: &[u8],
        t0: Instant,
        device: &FifoLock,
    ) -> Result<PredictResponse, ApiError> {
        let req = N17Request::parse(body, self.shapes())?;
        let m = &self.model;
        let prepared = m.processing.prepare(&req.obs).map_err(prepare_error)?;
        let decode_ms = ms_since(t0);
        let (chunk, encode_ms, head_ms) = {
            let _turn = device.lock();
            m.forward(&prepared, &req.noise, req.rtc.as_ref(), &mut Taps::none())
                .map_err(model_error)?
        };
        let t1 = Instant::now();
        let actions = m.decode(&chunk, &req.obs.state).map_err(model_error)?;
        let normalized = if req.return_normalized {
            let n = split_normalized(&m.processing.config, &chunk)
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            Some(group_arrays(&n))
        } else {
            None
        };
        let decode_actions = ms_since(t1);
        let (_, cols) = m.chunk_shape();
        Ok(PredictResponse {
            actions: group_arrays(&actions),
            actions_normalized: normalized,
            action_horizon: m.decoded_horizon(),
            embodiment: m.processing.config.tag.clone(),
            seq_len: prepared.input_ids.len(),
            seed: req.seed,
            timing_ms: Timing {
                decode: decode_ms,
                encode: encode_ms,
                device: head_ms,
                decode_actions,
                total: ms_since(t0),
            },
            chunk: Some(chunk.chunks(cols).map(<[f32]>::to_vec).collect()),
        })
    }
}

/// Groups in modality order, `[horizon][dim]` each.
fn group_arrays(groups: &[GroupActions]) -> GroupArrays {
    GroupArrays(
        groups
            .iter()
            .map(|g| {
                let rows = g.values.chunks(g.dim.max(1)).map(<[f32]>::to_vec);
                (g.name.clone(), rows.collect())
            })
            .collect(),
    )
}

/// A request the processing refused is the client's (400, the field named as on the wire:
/// the processing's `video.<camera>` is the request's `images.<camera>`).
fn prepare_error(e: PrepareError) -> ApiError {
    match e {
        PrepareError::Input(e) => {
            let field = match e.field.strip_prefix("video.") {
                Some(cam) => format!("images.{cam}"),
                None => e.field,
            };
            ApiError::bad(field, e.message)
        }
        PrepareError::Vision(e) => ApiError::bad("images", e.to_string()),
        PrepareError::Prompt(e) => ApiError::bad("instruction", e.to_string()),
    }
}

/// The model's refusals of client input are 400s naming the field; the rest is the server's.
fn model_error(e: N17ModelError) -> ApiError {
    use gr00t_runtime::n17::head::HeadError;
    match e {
        N17ModelError::Prepare(p) => prepare_error(p),
        N17ModelError::Noise(m) => ApiError::bad("noise", m),
        N17ModelError::Head(HeadError::Rtc(r)) => {
            let field = match r.field() {
                "action_horizon" => "action_horizon".to_owned(),
                f => format!("rtc.{f}"),
            };
            ApiError::bad(field, r.to_string())
        }
        N17ModelError::Head(HeadError::Input { field, message }) => ApiError::bad(field, message),
        other => ApiError::Internal(format!("forward failed: {other}")),
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Load the N1.7 checkpoint of `model_dir` for `GR00T_EMBODIMENT`, with the backbone's
/// processor files from `tokenizer_dir`, and describe it for `/info`.
pub fn build_n17_runtime(
    settings: &Settings,
    model_dir: &Path,
    tokenizer_dir: &Path,
) -> anyhow::Result<Runtime> {
    if settings.dit_backend != "cpu" {
        bail!(
            "GR00T_DIT_BACKEND={} serves N1.6 only; the N1.7 checkpoint `{}` runs on cpu",
            settings.dit_backend,
            model_dir.display()
        );
    }
    let model = N17Model::load(model_dir, tokenizer_dir, &settings.embodiment).map_err(|e| {
        anyhow::anyhow!(
            "cannot load the N1.7 model from `{}` (processor files `{}`): {e}",
            model_dir.display(),
            tokenizer_dir.display()
        )
    })?;
    let cfg = &model.processing.config;
    let info = RuntimeInfo {
        version: VERSION_N17.into(),
        embodiment: cfg.tag.clone(),
        embodiment_id: cfg.embodiment_id,
        layout: settings.layout.clone(),
        backend: "cpu".into(),
        dit_backend_requested: settings.dit_backend.clone(),
        stage: stage_for("cpu").into(),
        policy: settings.policy.clone(),
        weights_repo: settings.weights_repo.clone(),
        weights_revision: settings.weights_revision.clone(),
        model_dir: model_dir.display().to_string(),
        weights_fingerprint: Some(crate::demo::weights_fingerprint(model_dir)?),
        cameras: cfg.cameras.clone(),
        state_groups: cfg
            .state_groups
            .iter()
            .map(|g| (g.name.clone(), g.dim))
            .collect(),
        action_groups: cfg
            .action_groups
            .iter()
            .map(|g| (g.name.clone(), g.dim))
            .collect(),
        action_horizon: cfg.action_horizon,
        max_instruction_tokens: None,
        warmup_pcc: None,
        build: crate::build_info::BuildInfo::current(),
        n17: Some(N17Info {
            frames_per_camera: cfg.frames_per_camera,
            state_history: cfg.state_history,
            chunk_shape: [model.config.action_horizon, model.config.max_action_dim],
        }),
    };
    Ok(Runtime::new_n17(N17Engine { model }, info))
}
