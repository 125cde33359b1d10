//! `PackageSpec`: everything the package pipeline needs from a manifest, already resolved.
//!
//! The pipeline and the templates read only this type, never the manifest, so the pure parts
//! (templates, staging plans, the card) are testable from plain values. Every source type is
//! the manifest crate's: as authored (the kind, a component source, a git ref, a serve
//! profile's launcher settings) or in its resolved form ([`tt_model_manifest::resolved`]:
//! local paths made absolute, defaults applied), chosen by [`crate::from_manifest`]. What is
//! declared here is the pipeline's own view: the flattened runtime, the profile summaries
//! and the card fields.

use std::path::PathBuf;

use serde::Serialize;

/// The model server flavours (`kind:`): the manifest's own type, one definition.
pub use tt_model_manifest::Kind;

/// The resolved sources (`source.tt_metal`, an `extra_code` root, `runtime.cargo`): the
/// manifest crate's resolved forms, paths made absolute there, declared once.
pub use tt_model_manifest::resolved::{CargoSpec, MetalSource, ResolvedExtraCode};

/// A `{repo, ref}` pair as authored: the manifest's own type (its `sha` stays unset here; the
/// pins live in `built`).
pub use tt_model_manifest::GitSource;

/// One check `verify.sh` runs: the manifest crate's resolved form of a `verify:` entry, which
/// the kind's own checks share.
pub use tt_model_manifest::resolved::Check;

/// Where a vLLM image's engine or plugin comes from: the manifest's own type, its paths
/// resolved against the manifest's directory (a plugin is never a wheel: lint refuses it).
pub use tt_model_manifest::ComponentSource;

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
    pub vllm: Option<ComponentSource>,
    /// vllm-plugin: the plugin source.
    pub plugin: Option<ComponentSource>,
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

/// The default serve profile, resolved: the launcher's shape, declared beside it.
pub use tt_model_manifest::launch::ServeDefault;

/// A serve profile as the card and labels show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ProfileSummary {
    /// Profile name.
    pub name: String,
    /// Whether it is the default profile.
    pub default: bool,
    /// Board label after the merge with `serve`, e.g. `p150x4`.
    pub hardware: Option<String>,
    /// `mesh_device` after the merge: a preset or a literal `(rows, cols)`.
    pub mesh: Option<String>,
    /// `max_model_len` after the merge.
    pub max_model_len: Option<u64>,
}

/// The model card's authored fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct CardSpec {
    /// `card.description`: what the model is and does.
    pub description: Option<String>,
    /// `card.quickstart`: how to run it.
    pub quickstart: Option<String>,
    /// `card.architecture`: how it is built.
    pub architecture: Option<String>,
    /// `card.status`: how finished it is (also an "at a glance" row).
    pub status: Option<String>,
    /// `card.intended_use`: what it is for.
    pub intended_use: Option<String>,
    /// `card.out_of_scope_use`: what it is not for.
    pub out_of_scope_use: Option<String>,
    /// `card.usage`: how to call it.
    pub usage: Option<String>,
    /// `card.performance`: measured accuracy and speed (required to publish).
    pub performance: Option<String>,
    /// `card.limitations`: known limitations (required to publish).
    pub limitations: Option<String>,
    /// `card.risks`.
    pub risks: Option<String>,
    /// `card.licensing`: licensing notes.
    pub licensing: Option<String>,
    /// `card.related`: related models and links.
    pub related: Option<String>,
    /// `card.license.id`: a Hub licence identifier (`apache-2.0`, `other`, …) for the
    /// frontmatter.
    pub license_id: Option<String>,
    /// `card.license.name` (required when the id is `other`); preferred over the id in the card.
    pub license_name: Option<String>,
    /// `card.license.link`: where the licence text is.
    pub license_link: Option<String>,
    /// `card.pipeline_tag`; `None` falls back to the kind's default tag.
    pub pipeline_tag: Option<String>,
    /// `card.base_model`; empty means the weights repository.
    pub base_model: Vec<String>,
    /// Extra frontmatter tags; the card always adds `tenstorrent`, the arch and the kind.
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
    /// `kind:`, the model server flavour.
    pub kind: Kind,
    /// `arch:`, the architecture (an image label and a card tag).
    pub arch: String,
    /// `source.tt_metal`: where the tt-metal tree comes from.
    pub metal: MetalSource,
    /// `source.code`: paths relative to the tt-metal tree.
    pub code: Vec<String>,
    /// `source.extra_code` roots, in manifest order.
    pub extra_code: Vec<ResolvedExtraCode>,
    /// `source.ubuntu`, e.g. `22.04`.
    pub ubuntu: String,
    /// `source.python`, e.g. `3.12`.
    pub python: String,
    /// `runtime`, with its local paths resolved.
    pub runtime: Runtime,
    /// The default profile's serve settings.
    pub serve: ServeDefault,
    /// Every profile, in manifest order.
    pub profiles: Vec<ProfileSummary>,
    /// `verify:` checks, in manifest order (the templates put the kind's own checks first).
    pub verify: Vec<Check>,
    /// `card:`; `None` when the manifest has none (the card is rendered from defaults).
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
