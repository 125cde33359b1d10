//! Server configuration: the environment names of the seed manifest plus command-line flags.
//!
//! Every value is validated before anything is loaded; an unknown or inconsistent value is a
//! [`SettingsError`] whose message is one line naming the variable (the binary prints it and
//! exits non-zero).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// The N1.6 model version (the default `GR00T_VERSION`).
pub const VERSION_N16: &str = "n16";
/// The N1.7 model version; the checkpoint's `config.json` decides which one is served, and a
/// `GR00T_VERSION` that contradicts it is refused at boot.
pub const VERSION_N17: &str = "n17";
/// Hugging Face repository of the N1.6 weights.
pub const DEFAULT_WEIGHTS_REPO: &str = "nvidia/GR00T-N1.6-3B";
/// Instruction token limit of the static `gr1` layout (L_max).
pub const GR1_LAYOUT_MAX_TOKENS: usize = 24;

/// Denoise backends a deployment may ask for (`GR00T_DIT_BACKEND`).
pub const DIT_BACKENDS: [&str; 3] = ["cpu", "ttnn", "megakernel"];
/// Precision policies (`GR00T_POLICY`).
pub const POLICIES: [&str; 3] = ["mixed_dit", "bf16", "fp32"];
/// Megakernel weight-arena dtypes (`GR00T_MK_ARENA_DTYPE`).
pub const MK_ARENA_DTYPES: [&str; 4] = ["auto", "bfp8_b", "bfp4_b", "bf16"];
/// Where the megakernel's DiT blocks run (`GR00T_MK_DEVICE`): the CPU emulator, a p150a card, or
/// the ttsim simulator of one (the last two need the cargo feature `device`).
pub const MK_DEVICES: [&str; 3] = ["emulator", "p150a", "sim"];
/// The largest `GR00T_MK_DEVICE_TIMEOUT_S` accepted (an hour: anything longer is a hang).
pub const MAX_DEVICE_TIMEOUT_S: f64 = 3600.0;
/// Prompt layouts (`GR00T_LAYOUT`): `gr1` is 1 camera and at most 24 instruction tokens;
/// `dynamic` applies no limit beyond the processor's own.
pub const LAYOUTS: [&str; 2] = ["gr1", "dynamic"];

/// Why the server refuses to boot.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A variable with a fixed set of values holds another one.
    #[error("{var}={value:?} is not one of {allowed}")]
    Unknown {
        /// The variable's name.
        var: &'static str,
        /// The value it holds.
        value: String,
        /// The accepted values, comma-separated.
        allowed: String,
    },
    /// A variable's value is malformed or out of range.
    #[error("{var}={value:?}: {reason}")]
    Invalid {
        /// The variable's name.
        var: &'static str,
        /// The value it holds.
        value: String,
        /// What is expected instead.
        reason: String,
    },
    /// Values that are valid alone but contradict each other (the message names them).
    #[error("{0}")]
    Inconsistent(String),
}

/// Validated settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `GR00T_VERSION`: the model version, [`VERSION_N16`] (the default) or [`VERSION_N17`].
    pub version: String,
    /// `GR00T_VERSION` as given; `None` when unset (the checkpoint's config then decides).
    pub version_requested: Option<String>,
    /// `GR00T_EMBODIMENT`: the embodiment tag (letters, digits, `_`; default `gr1`, N1.6's;
    /// an N1.7 checkpoint defaults to its only embodiment, see [`crate::boot::n17_settings`]).
    pub embodiment: String,
    /// `GR00T_EMBODIMENT` as given; `None` when unset (the default then depends on the
    /// checkpoint's generation).
    pub embodiment_requested: Option<String>,
    /// `GR00T_LAYOUT`: one of [`LAYOUTS`]; default `gr1` for the `gr1` embodiment, else
    /// `dynamic`.
    pub layout: String,
    /// `GR00T_LAYOUT` as given; `None` when unset.
    pub layout_requested: Option<String>,
    /// `GR00T_POLICY`: one of [`POLICIES`] (default `mixed_dit`).
    pub policy: String,
    /// `GR00T_DIT_BACKEND`: one of [`DIT_BACKENDS`] (default `cpu`).
    pub dit_backend: String,
    /// `GR00T_MK_ARENA_DTYPE`: one of [`MK_ARENA_DTYPES`] (default `auto`; anything else only
    /// with the `megakernel` backend).
    pub mk_arena_dtype: String,
    /// `GR00T_NUM_CQS`: device command queues, 1 or 2 (default 2). Validated only; nothing in
    /// this build reads it further.
    pub num_cqs: u32,
    /// `GR00T_TOKENIZER_DIR`: the tokenizer directory (for N1.7: the backbone's processor
    /// files); `None`: the [`Self::tokenizer_snapshot`] when set, else `<model-dir>/tokenizer`
    /// (a `--tokenizer-dir` flag overrides all).
    pub tokenizer_dir: Option<PathBuf>,
    /// `GR00T_TOKENIZER_REPO` + `GR00T_TOKENIZER_REVISION`: read the tokenizer files from the
    /// HF cache snapshot of this repository at this pinned revision (a package's
    /// `auxiliary_weights` entry, e.g. N1.7's gated backbone processor files), offline. Both or
    /// neither, and not beside `GR00T_TOKENIZER_DIR`.
    pub tokenizer_snapshot: Option<(String, String)>,
    /// `GR00T_TT_CACHE`: the megakernel's weight-arena cache directory; `None`: no cache.
    pub tt_cache: Option<PathBuf>,
    /// `GR00T_MK_DEVICE`: one of [`MK_DEVICES`] (default `emulator`).
    pub mk_device: String,
    /// `GR00T_MK_DEVICE_TIMEOUT_S`: the deadline of each exchange with the device's worker
    /// (seconds, > 0, at most [`MAX_DEVICE_TIMEOUT_S`]; default 30). A worker that misses it
    /// is killed, the request answers 503, and the device is reopened.
    pub mk_device_timeout: Duration,
    /// `GR00T_MK_CHAIN`: `1` (default) runs the matmul-and-end steps of a device graph in the
    /// programs the plan packs; `0` a program per step (for comparison).
    pub mk_chain: bool,
    /// `GR00T_MK_REPLAY`: `1` (default) lets the device's worker keep each step's graph and
    /// replay it; `0` sends every step whole (for comparison).
    pub mk_replay: bool,
    /// `GR00T_MK_HEAD`: `device` (default) runs the whole action head on the device, one graph
    /// per forward; `host` runs the flow loop on the host and each step's DiT blocks on the
    /// device (for comparison). Only where a device runs the blocks (`GR00T_MK_DEVICE`).
    pub mk_head_on_device: bool,
    /// `GR00T_BACKBONE_BACKEND`: `cpu` (default) runs the Eagle backbone on the host;
    /// `device` runs the whole backbone (SigLIP2's tower, the projector, Qwen3 up to
    /// `select_layer` and vlln) on the device `GR00T_MK_DEVICE` names (`p150a` or `sim`, with
    /// `GR00T_DIT_BACKEND=megakernel`).
    pub backbone_on_device: bool,
    /// `GR00T_TTNN_PYTHON`: the ttnn worker's interpreter; `None`: `$VIRTUAL_ENV/bin/python3`,
    /// else `python3` on `PATH`.
    pub ttnn_python: Option<String>,
    /// `GR00T_WARMUP_RUNS`: demo predictions run at boot, 0..=100 (default 1; 0 skips the
    /// warm-up and the self-check).
    pub warmup_runs: u32,
    /// `GR00T_WARMUP_PCC_MIN`: the self-check's minimum PCC, in [-1, 1]. `None`: not set (the
    /// self-check runs only when a demo is shipped).
    pub warmup_pcc_min: Option<f64>,
    /// `TT_WEIGHTS_REPO`: Hugging Face repository of the weights (default
    /// [`DEFAULT_WEIGHTS_REPO`]).
    pub weights_repo: String,
    /// `TT_WEIGHTS_REVISION`: the pinned commit or ref name; `None`: the cache's `refs/main`.
    pub weights_revision: Option<String>,
    /// `TT_MESH_SHAPE`: device mesh (rows, cols); only `1x1` (the default) is accepted.
    pub mesh_shape: (u32, u32),
    /// `HF_HOME`, else `$HOME/.cache/huggingface`.
    pub hf_home: PathBuf,
    /// The hub cache: `HF_HUB_CACHE`, else `$HF_HOME/hub` (as `huggingface_hub` resolves it;
    /// `tt-model serve` mounts the host's cache at `/hf-hub` and sets `HF_HUB_CACHE`).
    pub hf_hub_cache: PathBuf,
    /// `GR00T_DEMO_DIR`: the demo directory; `None`: `<model-dir>/demo` if the checkpoint
    /// carries one (a `--demo-dir` flag overrides both).
    pub demo_dir: Option<PathBuf>,
}

impl Settings {
    /// The instruction token limit the layout imposes.
    pub fn max_instruction_tokens(&self) -> Option<usize> {
        (self.layout == "gr1").then_some(GR1_LAYOUT_MAX_TOKENS)
    }

    /// Read from a variable map (the process environment in the binary, a literal map in tests).
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Self, SettingsError> {
        let get = |k: &str| {
            vars.get(k)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        let one_of =
            |var: &'static str, default: &str, allowed: &[&str]| -> Result<String, SettingsError> {
                let v = get(var).unwrap_or_else(|| default.to_string());
                if allowed.contains(&v.as_str()) {
                    Ok(v)
                } else {
                    Err(SettingsError::Unknown {
                        var,
                        value: v,
                        allowed: allowed.join(", "),
                    })
                }
            };
        let version = one_of("GR00T_VERSION", VERSION_N16, &[VERSION_N16, VERSION_N17])?;
        let embodiment = get("GR00T_EMBODIMENT").unwrap_or_else(|| "gr1".into());
        if !embodiment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(SettingsError::Invalid {
                var: "GR00T_EMBODIMENT",
                value: embodiment,
                reason: "expected an embodiment tag such as `gr1`".into(),
            });
        }
        let default_layout = if embodiment == "gr1" {
            "gr1"
        } else {
            "dynamic"
        };
        let layout = one_of("GR00T_LAYOUT", default_layout, &LAYOUTS)?;
        if layout == "gr1" && embodiment != "gr1" {
            return Err(SettingsError::Inconsistent(format!(
                "GR00T_LAYOUT=gr1 is the GR1 layout but GR00T_EMBODIMENT={embodiment}"
            )));
        }
        let policy = one_of("GR00T_POLICY", "mixed_dit", &POLICIES)?;
        let dit_backend = one_of("GR00T_DIT_BACKEND", "cpu", &DIT_BACKENDS)?;
        let mk_arena_dtype = one_of("GR00T_MK_ARENA_DTYPE", "auto", &MK_ARENA_DTYPES)?;
        if mk_arena_dtype != "auto" && dit_backend != "megakernel" {
            return Err(SettingsError::Inconsistent(format!(
                "GR00T_MK_ARENA_DTYPE={mk_arena_dtype} only applies to GR00T_DIT_BACKEND=megakernel (got {dit_backend})"
            )));
        }
        let mk_device = one_of("GR00T_MK_DEVICE", "emulator", &MK_DEVICES)?;
        let mk_device_timeout = match get("GR00T_MK_DEVICE_TIMEOUT_S") {
            None => gr00t_megakernel::DEFAULT_DEVICE_TIMEOUT,
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0 && *s <= MAX_DEVICE_TIMEOUT_S)
                .map(Duration::from_secs_f64)
                .ok_or(SettingsError::Invalid {
                    var: "GR00T_MK_DEVICE_TIMEOUT_S",
                    value: v,
                    reason: format!(
                        "expected seconds, more than 0 and at most {MAX_DEVICE_TIMEOUT_S}"
                    ),
                })?,
        };
        let mk_chain = one_of("GR00T_MK_CHAIN", "1", &["0", "1"])? == "1";
        let mk_replay = one_of("GR00T_MK_REPLAY", "1", &["0", "1"])? == "1";
        let mk_head_on_device = one_of("GR00T_MK_HEAD", "device", &["device", "host"])? == "device";
        let backbone_on_device =
            one_of("GR00T_BACKBONE_BACKEND", "cpu", &["cpu", "device"])? == "device";
        if backbone_on_device && (dit_backend != "megakernel" || mk_device == "emulator") {
            return Err(SettingsError::Inconsistent(format!(
                "GR00T_BACKBONE_BACKEND=device runs on the device GR00T_MK_DEVICE names: it \
                 needs GR00T_DIT_BACKEND=megakernel and GR00T_MK_DEVICE p150a or sim (got \
                 {dit_backend} and {mk_device})"
            )));
        }
        let num_cqs = match get("GR00T_NUM_CQS").as_deref() {
            None => 2,
            Some("1") => 1,
            Some("2") => 2,
            Some(v) => {
                return Err(SettingsError::Unknown {
                    var: "GR00T_NUM_CQS",
                    value: v.into(),
                    allowed: "1, 2".into(),
                });
            }
        };
        let warmup_runs = match get("GR00T_WARMUP_RUNS") {
            None => 1,
            Some(v) => {
                v.parse::<u32>()
                    .ok()
                    .filter(|n| *n <= 100)
                    .ok_or(SettingsError::Invalid {
                        var: "GR00T_WARMUP_RUNS",
                        value: v,
                        reason: "expected an integer 0..=100".into(),
                    })?
            }
        };
        let warmup_pcc_min = match get("GR00T_WARMUP_PCC_MIN") {
            None => None,
            Some(v) => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|x| (-1.0..=1.0).contains(x))
                    .ok_or(SettingsError::Invalid {
                        var: "GR00T_WARMUP_PCC_MIN",
                        value: v,
                        reason: "expected a number in [-1, 1]".into(),
                    })?,
            ),
        };
        if warmup_pcc_min.is_some() && warmup_runs == 0 {
            return Err(SettingsError::Inconsistent(
                "GR00T_WARMUP_PCC_MIN is set but GR00T_WARMUP_RUNS=0: the self-check needs a warm-up run".into(),
            ));
        }
        let revision = |var: &'static str| -> Result<Option<String>, SettingsError> {
            match get(var) {
                None => Ok(None),
                Some(v) if is_ref_name(&v) => Ok(Some(v)),
                Some(v) => Err(SettingsError::Invalid {
                    var,
                    value: v,
                    reason: "expected a commit sha or ref name".into(),
                }),
            }
        };
        let weights_revision = revision("TT_WEIGHTS_REVISION")?;
        let tokenizer_snapshot = match (
            get("GR00T_TOKENIZER_REPO"),
            revision("GR00T_TOKENIZER_REVISION")?,
        ) {
            (None, None) => None,
            (Some(repo), Some(rev)) => {
                let ok = repo
                    .split_once('/')
                    .is_some_and(|(org, name)| is_ref_name(org) && is_ref_name(name));
                if !ok {
                    return Err(SettingsError::Invalid {
                        var: "GR00T_TOKENIZER_REPO",
                        value: repo,
                        reason: "expected a Hugging Face repository org/name".into(),
                    });
                }
                Some((repo, rev))
            }
            _ => {
                return Err(SettingsError::Inconsistent(
                    "GR00T_TOKENIZER_REPO and GR00T_TOKENIZER_REVISION go together: the tokenizer snapshot is read offline, so its revision must be pinned".into(),
                ));
            }
        };
        if tokenizer_snapshot.is_some() && get("GR00T_TOKENIZER_DIR").is_some() {
            return Err(SettingsError::Inconsistent(
                "GR00T_TOKENIZER_DIR and GR00T_TOKENIZER_REPO both name the tokenizer files: set one".into(),
            ));
        }
        let mesh_shape = match get("TT_MESH_SHAPE") {
            None => (1, 1),
            Some(v) => {
                let shape = parse_mesh_shape(&v).ok_or(SettingsError::Invalid {
                    var: "TT_MESH_SHAPE",
                    value: v.clone(),
                    reason: "expected ROWSxCOLS, e.g. 1x1".into(),
                })?;
                if shape != (1, 1) {
                    return Err(SettingsError::Invalid {
                        var: "TT_MESH_SHAPE",
                        value: v,
                        reason: "this runtime serves one device (1x1)".into(),
                    });
                }
                shape
            }
        };
        let hf_home = get("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(get("HOME").unwrap_or_else(|| "/root".into())).join(".cache/huggingface")
        });
        let hf_hub_cache = get("HF_HUB_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        Ok(Self {
            version_requested: get("GR00T_VERSION"),
            version,
            embodiment,
            embodiment_requested: get("GR00T_EMBODIMENT"),
            layout,
            layout_requested: get("GR00T_LAYOUT"),
            policy,
            dit_backend,
            mk_arena_dtype,
            num_cqs,
            tokenizer_dir: get("GR00T_TOKENIZER_DIR").map(PathBuf::from),
            tokenizer_snapshot,
            tt_cache: get("GR00T_TT_CACHE").map(PathBuf::from),
            mk_device,
            mk_device_timeout,
            mk_chain,
            mk_replay,
            mk_head_on_device,
            backbone_on_device,
            ttnn_python: get("GR00T_TTNN_PYTHON")
                .or_else(|| get("VIRTUAL_ENV").map(|v| format!("{v}/bin/python3"))),
            warmup_runs,
            warmup_pcc_min,
            weights_repo: get("TT_WEIGHTS_REPO").unwrap_or_else(|| DEFAULT_WEIGHTS_REPO.into()),
            weights_revision,
            mesh_shape,
            hf_home,
            hf_hub_cache,
            demo_dir: get("GR00T_DEMO_DIR").map(PathBuf::from),
        })
    }

    /// The megakernel backend's configuration (`GR00T_MK_*`, `GR00T_TT_CACHE`,
    /// `GR00T_TTNN_PYTHON`): the runtime reads no environment of its own.
    pub fn megakernel(
        &self,
    ) -> Result<gr00t_megakernel::MegakernelConfig, tt_blackhole::format::UnknownDtype> {
        Ok(gr00t_megakernel::MegakernelConfig {
            dtype: tt_blackhole::format::ArenaDtype::parse(&self.mk_arena_dtype)?,
            cache_dir: self.tt_cache.clone(),
            device: self.mk_device.clone(),
            device_timeout: self.mk_device_timeout,
            ttnn_python: self.ttnn_python.clone(),
            chain: self.mk_chain,
            replay: self.mk_replay,
            // The embodiment is resolved at boot, against the checkpoint (`boot.rs`).
            head_embodiment: None,
            backbone_on_device: self.backbone_on_device,
        })
    }

    /// Read from the process environment.
    pub fn from_env() -> Result<Self, SettingsError> {
        Self::from_vars(&std::env::vars().collect())
    }
}

/// A commit sha or ref name (also one half of `org/name`): letters, digits, `-_.`, not `.`/`..`.
fn is_ref_name(v: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && v != "."
        && v != ".."
}

/// `1x1`, `(1, 1)`, `1,1` -> (1, 1).
pub fn parse_mesh_shape(s: &str) -> Option<(u32, u32)> {
    let t: String = s
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '(' && *c != ')')
        .collect();
    let (a, b) = t.split_once(['x', 'X', ','])?;
    let (a, b) = (a.parse().ok()?, b.parse().ok()?);
    (a > 0 && b > 0).then_some((a, b))
}

#[cfg(test)]
mod tests;
