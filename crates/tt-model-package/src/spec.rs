//! `PackageSpec`: everything the package pipeline needs from a manifest, already resolved.
//!
//! The pipeline and the templates read only this type, never the manifest, so the pure parts
//! (templates, staging plans, the card) are testable from plain values. Every source type is
//! the manifest crate's: as authored (the kind, a component source, a git ref, a serve
//! profile's launcher settings) or in its resolved form ([`tt_model_manifest::resolved`]:
//! local paths made absolute, defaults applied), chosen by [`crate::from_manifest`]. What is
//! declared here is derived, not authored: the profile summaries (each profile merged with
//! `serve`).

use std::path::PathBuf;

use serde::Serialize;

/// The model server flavours (`kind:`): the manifest's own type, one definition.
pub use tt_model_manifest::Kind;

/// The resolved sources (`source.tt_metal`, an `extra_code` root): the manifest crate's
/// resolved forms, paths made absolute there, declared once.
pub use tt_model_manifest::resolved::{MetalSource, ResolvedExtraCode};

/// A `{repo, ref}` pair as authored: the manifest's own type (its `sha` stays unset here; the
/// pins live in `built`).
pub use tt_model_manifest::GitSource;

/// One check `verify.sh` runs: a `verify:` entry as authored, which the kind's own checks
/// share.
pub use tt_model_manifest::VerifyStep;

/// Where a vLLM image's engine or plugin comes from: the manifest's own type, its paths
/// resolved against the manifest's directory (a plugin is never a wheel: lint refuses it).
pub use tt_model_manifest::ComponentSource;

/// `runtime`, typed per kind, and its parts: the manifest's own types, local paths resolved
/// ([`tt_model_manifest::RuntimeSpec::resolve`]).
pub use tt_model_manifest::{
    CargoBinary, HttpServerRuntime, KindRuntime, RuntimeSpec, TtDitServerRuntime, VllmForkRuntime,
    VllmPluginRuntime,
};

/// The `card:` block: the manifest's own type.
pub use tt_model_manifest::{CardSettings, License};

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

/// Everything `package` needs, resolved from a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `runtime`, typed for `kind`, with its local paths resolved.
    pub runtime: RuntimeSpec,
    /// The default profile's serve settings.
    pub serve: ServeDefault,
    /// Every profile, in manifest order.
    pub profiles: Vec<ProfileSummary>,
    /// `verify:` checks, in manifest order (the templates put the kind's own checks first).
    pub verify: Vec<VerifyStep>,
    /// `card:`; `None` when the manifest has none (the card is rendered from defaults).
    pub card: Option<CardSettings>,
}

impl PackageSpec {
    /// Whether the image needs a Python environment (`/opt/tt-venv`). Every kind does except
    /// an `http-server` that installs no packages and no lock: its server brings its own
    /// runtime, and no HTTP stack is added.
    pub fn needs_python(&self) -> bool {
        self.kind != Kind::HttpServer
            || !self.runtime.packages().is_empty()
            || self.runtime.lock().is_some()
    }
}
