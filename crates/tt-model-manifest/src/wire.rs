//! The published manifest, `tt_kernel_manifest.json` (schema_version "5.1"): what `package`
//! writes next to the image and what `serve`/`pull` read.
//!
//! Reading accepts `repo` and `repo_id` for weights and writes `repo_id`. Unknown keys at the
//! top level, in `container` and in `built` are kept, so a read-then-write is lossless.
//!
//! Reading is tolerant where another writer (the Python original, a hand-written test
//! package) may differ without changing what is served: informational fields may be missing,
//! and `null` stands for "unset" in lists, maps and the serve settings ([`lenient`]).
//! What serve takes from a container package is in [`serve`].

mod lenient;
pub mod preview;
pub mod serve;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::profile::{default_name, merge_settings, profiles_of};
use crate::types::{
    Arch, CardSettings, Kind, Manifest, ServeProfile, ServeSettings, VerifyStep, WeightsSource,
};

/// The file name of the wire manifest.
pub const MANIFEST_NAME: &str = "tt_kernel_manifest.json";
/// The schema version this crate writes and reads.
pub const WIRE_SCHEMA_VERSION: &str = "5.1";
/// Where the code lands inside the staged package and the image.
pub const CODE_DIR: &str = "code";

/// The whole document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireManifest {
    /// Always `"5.1"` for a container package.
    pub schema_version: String,
    /// The package name (safe slug).
    pub name: String,
    /// `built.tt_metal.scm_version`, or `"unknown"`.
    #[serde(default = "unknown_version")]
    pub tt_metal_version: String,
    /// The architecture (`None`: a document that does not say).
    #[serde(default)]
    pub arch: Option<Arch>,
    /// Chips of the default profile's hardware, or 1.
    #[serde(default = "one_chip")]
    pub device_count: u32,
    /// Who wrote this document (`None`: a document that does not say).
    #[serde(default)]
    pub producer: Option<Producer>,
    /// The primary weights (`None`: a package that serves without weights).
    #[serde(default)]
    pub weights: Option<WeightsRef>,
    /// Drafters and adapters.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub auxiliary_weights: Vec<WeightsRef>,
    /// v5/v6-only blocks: null or empty for a container package.
    #[serde(default)]
    pub mesh: Value,
    /// v5/v6 only.
    #[serde(default)]
    pub entrypoint: Value,
    /// v5/v6 only.
    #[serde(default)]
    pub resources: Value,
    /// v5/v6 only.
    #[serde(default)]
    pub capabilities: Value,
    /// v5/v6 only (always `{}` here).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub env: IndexMap<String, String>,
    /// v5 only.
    #[serde(default)]
    pub bundled: Value,
    /// v6 only.
    #[serde(default)]
    pub deps: Value,
    /// The container package.
    pub container: ContainerSpec,
    /// Keys this version does not know, kept for a lossless round trip.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

fn unknown_version() -> String {
    "unknown".to_owned()
}

fn one_chip() -> u32 {
    1
}

/// `producer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    /// The tt-model version that wrote the document (historical field name).
    pub tt_kernel_version: String,
    /// ISO-8601 UTC.
    pub created_at: String,
    /// The build host.
    pub hostname: String,
}

/// Weights on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightsRef {
    /// `org/name` (`repo` is accepted on read).
    #[serde(alias = "repo")]
    pub repo_id: String,
    /// The pinned revision.
    #[serde(default)]
    pub revision: Option<String>,
    /// Only these files.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub allow_patterns: Vec<String>,
    /// Never these files.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub ignore_patterns: Vec<String>,
    /// Always `"model"`.
    #[serde(default = "model_repo_type")]
    pub repo_type: String,
}

fn model_repo_type() -> String {
    "model".to_owned()
}

impl From<&WeightsSource> for WeightsRef {
    fn from(w: &WeightsSource) -> Self {
        let spec = w.to_spec();
        Self {
            repo_id: spec.repo,
            revision: spec.revision,
            allow_patterns: spec.allow_patterns,
            ignore_patterns: spec.ignore_patterns,
            repo_type: model_repo_type(),
        }
    }
}

/// Where the image is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRef {
    /// `hf` or an OCI namespace (missing or `null` reads as `hf`).
    #[serde(default = "hf_registry", deserialize_with = "lenient::registry")]
    pub registry: String,
    /// The repository under the registry (empty when a document leaves it out: the package
    /// name, see [`WireManifest::run_image`]).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub repository: String,
    /// The tag.
    #[serde(default)]
    pub tag: Option<String>,
    /// `sha256:…`: for `hf`, the engine's image id (the config digest); for a registry, the
    /// digest of the manifest it stores (what [`ImageRef::pull_ref`] pins). The image id is
    /// always in `built.image_digest`.
    #[serde(default)]
    pub digest: Option<String>,
}

fn hf_registry() -> String {
    lenient::HF_REGISTRY.to_owned()
}

impl ImageRef {
    /// Whether the image lives in an OCI registry (not in the Hub repo).
    pub fn in_registry(&self) -> bool {
        self.registry != lenient::HF_REGISTRY
    }

    /// What `docker pull` takes: `None` for `hf` (the image travels in the repo), else
    /// `<registry>/<repository>@<digest>` or `…:<tag>`.
    pub fn pull_ref(&self) -> Option<String> {
        if self.registry == "hf" {
            return None;
        }
        let base = format!("{}/{}", self.registry, self.repository);
        match (&self.digest, &self.tag) {
            (Some(d), _) => Some(format!("{base}@{d}")),
            (None, Some(t)) => Some(format!("{base}:{t}")),
            (None, None) => Some(base),
        }
    }
}

/// The `container` block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerSpec {
    /// The image.
    pub image: ImageRef,
    /// How it serves (missing: `vllm-plugin`, the original's default kind).
    #[serde(default)]
    pub kind: Kind,
    /// The authored runtime after `package` pinned it (shas, wheel names, `lock`).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub runtime: serde_json::Map<String, Value>,
    /// The shared serve defaults.
    #[serde(default, deserialize_with = "lenient::settings")]
    pub serve: ServeSettings,
    /// At least one profile (a synthesized `default`).
    #[serde(default, deserialize_with = "lenient::profiles")]
    pub serve_profiles: Vec<ServeProfile>,
    /// The default profile (empty when a document leaves it out: the first profile, see
    /// [`ContainerSpec::default_profile_name`]).
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub default_profile: String,
    /// `"code"`.
    #[serde(default = "code_dir")]
    pub code_dir: String,
    /// Build-time checks.
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub verify: Vec<VerifyStep>,
    /// Provenance.
    #[serde(default)]
    pub built: Option<Built>,
    /// The model card.
    #[serde(default)]
    pub card: Option<CardSettings>,
    /// Keys this version does not know.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

fn code_dir() -> String {
    CODE_DIR.to_owned()
}

/// `built`: how and from what the image was built.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Built {
    /// The final image tag.
    pub image: String,
    /// The image digest.
    #[serde(default)]
    pub image_digest: Option<String>,
    /// The authored push target.
    #[serde(default)]
    pub repo: Option<String>,
    /// The tt-model version that built it.
    pub tt_model_version: String,
    /// ISO-8601 UTC.
    pub created_at: String,
    /// The tt-metal tree.
    #[serde(default)]
    pub tt_metal: TtMetalBuild,
    /// sha256 of the staged `code/` tree.
    #[serde(default)]
    pub code_sha256: Option<String>,
    /// The vLLM source, for the vLLM kinds.
    #[serde(default)]
    pub vllm: Option<ComponentBuild>,
    /// The plugin source, for vllm-plugin.
    #[serde(default)]
    pub plugin: Option<ComponentBuild>,
    /// The Rust binary `runtime.cargo` shipped (a tt-model extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cargo: Option<CargoBuild>,
    /// The base images by stage (`builder`, `runtime`), pinned to `sha256:` ids or registry
    /// digests (a tt-model extension).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub base_images: BTreeMap<String, String>,
    /// sha256 of the build-context tar (a tt-model extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_sha256: Option<String>,
    /// The git `source.extra_code` roots, each at its resolved commit (a tt-model extension).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_code: Vec<GitPin>,
    /// Keys this version does not know.
    #[serde(flatten)]
    pub extra: IndexMap<String, Value>,
}

/// A git source pinned to a commit (`built.extra_code[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitPin {
    /// The repository as the manifest gives it.
    pub repo: String,
    /// The ref as authored.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The full commit sha the ref resolved to.
    pub sha: String,
}

/// `built.tt_metal`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TtMetalBuild {
    /// The commit.
    #[serde(default)]
    pub sha: Option<String>,
    /// `git describe`.
    #[serde(default)]
    pub describe: Option<String>,
    /// Uncommitted changes were packaged.
    #[serde(default)]
    pub dirty: bool,
    /// The version string tt-metal reports.
    #[serde(default)]
    pub scm_version: Option<String>,
    /// `local` or `git`.
    #[serde(default)]
    pub mode: Option<String>,
    /// The remote URL.
    #[serde(default)]
    pub remote: Option<String>,
    /// The branch.
    #[serde(default)]
    pub branch: Option<String>,
    /// Whether the commit is on a remote.
    #[serde(default)]
    pub pushed: Option<bool>,
}

/// `built.vllm` / `built.plugin`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentBuild {
    /// The commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
    /// The repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The local path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Uncommitted changes were packaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,
    /// The wheel file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wheel: Option<String>,
}

/// `built.cargo`: how the `runtime.cargo` binary was built, enough to rebuild the same bytes
/// (the same workspace commit, lock file and toolchain) and to check the shipped file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CargoBuild {
    /// The Cargo package.
    pub package: String,
    /// The package's version (`Cargo.toml`).
    pub version: String,
    /// The binary target.
    pub bin: String,
    /// Where it is in the image.
    pub path: String,
    /// sha256 of the shipped file.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Enabled features.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// The Cargo profile (`release`).
    pub profile: String,
    /// The target triple.
    pub target: String,
    /// Statically linked (no ELF interpreter: it runs on any base image).
    pub static_link: bool,
    /// The binary keeps the release profile's line tables (`TT_MODEL_CARGO_DEBUG=1`); by
    /// default it ships without debuginfo.
    #[serde(default)]
    pub debuginfo: bool,
    /// `rustc --version` of the toolchain that built it.
    pub rustc: String,
    /// The workspace's git commit (`None`: not a git checkout).
    #[serde(default)]
    pub workspace_commit: Option<String>,
    /// The workspace had uncommitted changes.
    #[serde(default)]
    pub workspace_dirty: bool,
    /// sha256 of the workspace's `Cargo.lock` (`--locked` builds exactly these versions).
    pub cargo_lock_sha256: String,
}

/// Why a wire manifest could not be read or used.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Not JSON, or not this shape.
    #[error("`{MANIFEST_NAME}` is not a valid manifest at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_json's message.
        message: String,
    },
    /// Another schema.
    #[error(
        "Unsupported bundle schema_version '{0}'; this tt-model reads schema(s) {WIRE_SCHEMA_VERSION}. Re-publish the bundle with a current tt-model."
    )]
    UnsupportedSchema(String),
    /// A name that cannot become a container name or a cache directory.
    #[error("unsafe package name '{0}': refusing to derive a container name or path from it")]
    UnsafeName(String),
    /// No `container` block (a v5/v6 bundle).
    #[error(
        "this bundle has no container block; only container packages (schema 5.1) are supported"
    )]
    NotAContainer,
    /// No profiles at all.
    #[error(
        "this container package declares no serve profiles — re-package it with a current tt-model"
    )]
    NoProfiles,
    /// `--profile x` names nothing.
    #[error("no serve profile named '{name}'; available: {}", available.join(", "))]
    UnknownProfile {
        /// The requested name.
        name: String,
        /// The profiles there are.
        available: Vec<String>,
    },
}

/// Why a wire manifest file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WireReadError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a usable wire manifest (one line: the file, then what is wrong).
    #[error("{}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: WireError,
    },
}

/// Whether `name` can become a container name and a cache directory: ASCII letters, digits,
/// `-`, `_` and `.`, not starting with `.` (so never `..`).
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// What `package` knows after building, to complete the wire manifest.
#[derive(Debug, Clone)]
pub struct WireBuild {
    /// The image reference (tag and digest filled in).
    pub image: ImageRef,
    /// The runtime block after pinning (`None`: the authored one).
    pub runtime: Option<serde_json::Map<String, Value>>,
    /// The provenance block.
    pub built: Built,
    /// Who wrote it.
    pub producer: Producer,
}

impl WireManifest {
    /// The wire manifest of an authoring manifest plus what the build produced.
    pub fn from_manifest(m: &Manifest, build: WireBuild) -> Self {
        let tt_metal_version = build
            .built
            .tt_metal
            .scm_version
            .clone()
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            schema_version: WIRE_SCHEMA_VERSION.to_owned(),
            name: m.name.clone(),
            tt_metal_version,
            arch: Some(m.arch),
            device_count: m.device_count(),
            producer: Some(build.producer),
            weights: Some(WeightsRef::from(&m.weights)),
            auxiliary_weights: m.auxiliary_weights.iter().map(WeightsRef::from).collect(),
            mesh: Value::Null,
            entrypoint: Value::Null,
            resources: Value::Null,
            capabilities: Value::Null,
            env: IndexMap::new(),
            bundled: Value::Null,
            deps: Value::Null,
            container: ContainerSpec {
                image: build.image,
                kind: m.kind,
                runtime: build.runtime.unwrap_or_else(|| m.runtime.clone()),
                serve: m.serve.clone(),
                serve_profiles: m.profiles(),
                default_profile: m.default_profile_name(),
                code_dir: code_dir(),
                verify: m.verify.clone(),
                built: Some(build.built),
                card: m.card.clone(),
                extra: IndexMap::new(),
            },
            extra: IndexMap::new(),
        }
    }

    /// Parses the JSON text; refuses other schema versions and non-container bundles.
    pub fn from_json(text: &str) -> Result<Self, WireError> {
        let json_err = |e: serde_json::Error| WireError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        };
        let value: Value = serde_json::from_str(text).map_err(json_err)?;
        let version = match value.get("schema_version") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => "none".to_owned(),
        };
        if version != WIRE_SCHEMA_VERSION {
            return Err(WireError::UnsupportedSchema(version));
        }
        if value.get("container").is_none_or(Value::is_null) {
            return Err(WireError::NotAContainer);
        }
        let wire: Self = serde_json::from_str(text).map_err(json_err)?;
        if !is_safe_name(&wire.name) {
            return Err(WireError::UnsafeName(wire.name));
        }
        Ok(wire)
    }

    /// Reads and parses the file at `path`; errors name the file.
    pub fn read(path: &Path) -> Result<Self, WireReadError> {
        let text = std::fs::read_to_string(path).map_err(|source| WireReadError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text).map_err(|problem| WireReadError::Invalid {
            path: path.to_owned(),
            problem,
        })
    }

    /// Pretty JSON with a trailing newline (what `package` writes).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The effective settings of a profile (`None`: the default): `serve` deep-merged with it.
    pub fn resolve_profile(
        &self,
        name: Option<&str>,
    ) -> Result<(ServeProfile, ServeSettings), WireError> {
        let c = &self.container;
        if c.serve_profiles.is_empty() {
            return Err(WireError::NoProfiles);
        }
        let wanted = name.unwrap_or_else(|| c.default_profile_name()).to_owned();
        let profile = c
            .serve_profiles
            .iter()
            .find(|p| p.name == wanted)
            .ok_or_else(|| WireError::UnknownProfile {
                name: wanted.clone(),
                available: c.serve_profiles.iter().map(|p| p.name.clone()).collect(),
            })?;
        Ok((profile.clone(), merge_settings(&c.serve, &profile.settings)))
    }
}

/// The profiles and default of a manifest as the wire writes them (for callers that build a
/// `ContainerSpec` themselves).
pub fn wire_profiles(m: &Manifest) -> (Vec<ServeProfile>, String) {
    (
        profiles_of(&m.serve_profiles),
        default_name(&m.serve_profiles, m.default_profile.as_deref()),
    )
}
