//! `PackageSpec`: everything the package pipeline needs from a manifest, already resolved.
//!
//! The pipeline and the templates read only this type, never the manifest, so the pure parts
//! (templates, staging plans, the card) are testable from plain values and the manifest's
//! schema can evolve behind one adapter ([`crate::from_manifest`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

/// The model server flavours (`kind:`): the manifest's own type, one definition.
pub use tt_model_manifest::Kind;

/// Where the tt-metal tree comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum MetalSource {
    /// A local checkout, packaged as-is (uncommitted changes included).
    Local { path: PathBuf },
    /// A git repository cloned inside the build at a resolved sha.
    Git { repo: String, git_ref: String },
}

/// An `extra_code` root and the paths it ships.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtraCode {
    /// The local root; for a git root, the checkout the pipeline fetched (empty before).
    pub root: PathBuf,
    pub paths: Vec<String>,
    /// A `{repo, ref}` root, fetched at package time at the ref's commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<GitRef>,
}

/// A `{repo, ref}` pair as authored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitRef {
    pub repo: String,
    pub git_ref: String,
}

/// One `verify:` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "lang", content = "code", rename_all = "lowercase")]
pub enum Check {
    /// A Python statement run with `"$VENV/bin/python" -c`.
    Python(String),
    /// A POSIX shell command run with `sh -c` (for images without Python).
    Sh(String),
}

impl Check {
    /// The check as the author wrote it, for messages.
    pub fn text(&self) -> &str {
        match self {
            Check::Python(s) | Check::Sh(s) => s,
        }
    }
}

/// Where the vLLM engine comes from (vLLM kinds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "from", rename_all = "lowercase")]
pub enum VllmSource {
    Version { version: String },
    Wheel { wheel: String },
    Path { path: String },
    Git { repo: String, git_ref: String },
}

/// Where the vllm-tt-plugin comes from (vllm-plugin kind).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "from", rename_all = "lowercase")]
pub enum PluginSource {
    Version { version: String },
    Path { path: String },
    Git { repo: String, git_ref: String },
}

/// http-server: a Rust binary built from a Cargo workspace on the build host and shipped in
/// the image (`runtime.cargo`, see [`crate::cargo_bin`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CargoSpec {
    /// The workspace directory, resolved against the manifest's base directory.
    pub workspace: PathBuf,
    pub package: String,
    pub bin: String,
    pub features: Vec<String>,
    /// Where the binary lands in the image (`/usr/local/bin/<bin>`).
    pub image_path: String,
}

/// The kind-specific runtime settings, validated by the manifest crate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Runtime {
    /// `runtime.lock`, resolved against the manifest's directory.
    pub lock: Option<PathBuf>,
    /// Extra pip packages (tt-dit-server's HTTP stack, http-server's extras).
    pub packages: Vec<String>,
    /// tt-dit-server: the ASGI target `module:attr`.
    pub app: Option<String>,
    /// http-server: the server argv with `{host}`/`{port}` placeholders.
    pub command: Vec<String>,
    /// The log line that says the server is ready.
    pub ready_line: Option<String>,
    /// vLLM kinds: the engine source.
    pub vllm: Option<VllmSource>,
    /// vllm-plugin: the plugin source.
    pub plugin: Option<PluginSource>,
    /// vLLM kinds: a pip-installable path inside `code/`.
    pub extension: Option<String>,
    /// vllm-plugin: the directory whose children hold `vllm_metadata.json`.
    pub extra_models_dir: Option<String>,
    /// vllm-fork: the model directory inside `code/`.
    pub model_dir: Option<String>,
    /// vllm-plugin: extra uv override pins.
    pub overrides: Vec<String>,
    /// vllm-plugin: extra local wheels (`runtime.wheels`), resolved against the base dir;
    /// installed last.
    pub wheels: Vec<String>,
    /// tt-dit-server: the env var carrying the mesh shape.
    pub mesh_shape_env: Option<String>,
    /// http-server: the Rust binary to build and ship.
    pub cargo: Option<CargoSpec>,
}

/// The default serve profile, resolved (serve defaults merged into the profile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ServeDefault {
    /// Profile name.
    pub name: String,
    /// The port the server binds inside the container.
    pub port: u16,
    /// Board label, e.g. `p150x4`.
    pub hardware: Option<String>,
    /// Mesh preset or literal.
    pub mesh_device: Option<String>,
    /// The mesh shape `(rows, cols)` when known.
    pub mesh_shape: Option<(u32, u32)>,
    pub max_model_len: Option<u64>,
    pub max_num_seqs: Option<u64>,
    pub block_size: Option<u64>,
    pub server_timeout: Option<u64>,
    /// `serve.additional_config` as JSON text.
    pub additional_config: Option<String>,
    pub tool_parser: Option<String>,
    pub reasoning_parser: Option<String>,
    /// Raw engine args, flattened.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
}

/// A serve profile as the card and labels show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ProfileSummary {
    pub name: String,
    pub default: bool,
    pub hardware: Option<String>,
    pub mesh: Option<String>,
    pub max_model_len: Option<u64>,
}

/// The model card's authored fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct CardSpec {
    pub description: Option<String>,
    pub quickstart: Option<String>,
    pub architecture: Option<String>,
    pub status: Option<String>,
    pub intended_use: Option<String>,
    pub out_of_scope_use: Option<String>,
    pub usage: Option<String>,
    pub performance: Option<String>,
    pub limitations: Option<String>,
    pub risks: Option<String>,
    pub licensing: Option<String>,
    pub related: Option<String>,
    pub license_id: Option<String>,
    pub license_name: Option<String>,
    pub license_link: Option<String>,
    pub pipeline_tag: Option<String>,
    pub base_model: Vec<String>,
    pub tags: Vec<String>,
}

/// Everything `package` needs, resolved from a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageSpec {
    /// The manifest file this came from.
    pub manifest_path: PathBuf,
    /// The package slug.
    pub name: String,
    /// The Hub repo (`org/name`).
    pub repo: String,
    /// The primary weights id.
    pub weights: String,
    /// The weights revision, if pinned.
    pub weights_revision: Option<String>,
    pub kind: Kind,
    pub arch: String,
    pub metal: MetalSource,
    /// `source.code`: paths relative to the tt-metal tree.
    pub code: Vec<String>,
    pub extra_code: Vec<ExtraCode>,
    /// `source.ubuntu`, e.g. `22.04`.
    pub ubuntu: String,
    /// `source.python`, e.g. `3.12`.
    pub python: String,
    pub runtime: Runtime,
    pub serve: ServeDefault,
    /// Every profile, in manifest order.
    pub profiles: Vec<ProfileSummary>,
    pub verify: Vec<Check>,
    pub card: Option<CardSpec>,
}

impl PackageSpec {
    /// Whether the image needs a Python environment (`/opt/tt-venv`). Every kind does except
    /// an `http-server` that installs no packages and no lock: its server brings its own
    /// runtime, and no HTTP stack is added.
    pub fn needs_python(&self) -> bool {
        self.kind != Kind::HttpServer
            || !self.runtime.packages.is_empty()
            || self.runtime.lock.is_some()
    }
}
