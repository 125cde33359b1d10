//! The authoring model of schema 5.1 (`tt-model.yaml`): one file per section, each type
//! mirroring the YAML keys verbatim. The same types travel inside the wire manifest.

mod card;
mod image;
mod runtime;
mod runtime_spec;
mod serve;
mod source;
mod verify;
mod weights;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use card::{CARD_KEYS, CARD_SECTIONS, CardSettings, LICENSE_KEYS, License};
pub use image::{IMAGE_KEYS, ImageSettings, name_component_ok, registry_host_ok};
pub use runtime::{CARGO_BIN_DIR, CARGO_KEYS, COMMON_RUNTIME_KEYS, CargoBinary, RUNTIME_DEVICES};
pub use runtime_spec::{
    CommonRuntime, ComponentSource, HttpServerRuntime, KindRuntime, RuntimeSpec,
    TtDitServerRuntime, VllmForkRuntime, VllmPluginRuntime,
};
pub use serve::{
    CAPABILITY_KEYS, Capabilities, PROFILE_KEYS, SERVE_KEYS, ServeArg, ServeProfile, ServeSettings,
};
pub use source::{CodeRoot, EXTRA_CODE_KEYS, ExtraCode, GIT_KEYS, GitSource, SOURCE_KEYS, Source};
pub use verify::{SHELL_STEP_KEYS, ShellStep, VerifyStep};
pub use weights::{WEIGHTS_KEYS, WeightsSource, WeightsSpec};

use crate::decode::{Cx, Fields, FromNode, one_of};
use crate::node::Node;

/// The schema this crate authors and reads.
pub const SCHEMA_VERSION: &str = "5.1";

/// How the image serves the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Stock vLLM plus the standalone `tenstorrent/vllm-tt-plugin`.
    #[default]
    VllmPlugin,
    /// The `tenstorrent/vllm` fork with the plugin in-tree.
    VllmFork,
    /// A diffusion model's own ASGI app, served with uvicorn.
    TtDitServer,
    /// The model's own HTTP server (`runtime.command`).
    HttpServer,
}

impl Kind {
    /// Every kind with its YAML spelling.
    pub const ALL: &[(&'static str, Kind)] = &[
        ("vllm-plugin", Kind::VllmPlugin),
        ("vllm-fork", Kind::VllmFork),
        ("tt-dit-server", Kind::TtDitServer),
        ("http-server", Kind::HttpServer),
    ];

    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        Kind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("vllm-plugin", |(s, _)| s)
    }

    /// Whether the kind runs vLLM (and so needs `max_num_seqs` and `block_size`).
    pub fn is_vllm(self) -> bool {
        matches!(self, Kind::VllmPlugin | Kind::VllmFork)
    }

    /// The log line that means "ready" (`http-server` names its own in `runtime.ready_line`).
    pub fn ready_line(self) -> Option<&'static str> {
        match self {
            Kind::VllmPlugin | Kind::TtDitServer => Some("Application startup complete"),
            Kind::VllmFork => Some("Server ready after"),
            Kind::HttpServer => None,
        }
    }

    /// The card's default pipeline tag.
    pub fn default_pipeline_tag(self) -> Option<&'static str> {
        self.is_vllm().then_some("text-generation")
    }

    /// Whether the server speaks the OpenAI API.
    pub fn openai_compatible(self) -> bool {
        self.is_vllm()
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Tenstorrent architecture the image is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// Blackhole (p100, p150, p300).
    Blackhole,
    /// Wormhole (n150, n300).
    WormholeB0,
}

impl Arch {
    /// Every arch with its YAML spelling.
    pub const ALL: &[(&'static str, Arch)] = &[
        ("blackhole", Arch::Blackhole),
        ("wormhole_b0", Arch::WormholeB0),
    ];

    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Blackhole => "blackhole",
            Arch::WormholeB0 => "wormhole_b0",
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `tt-model.yaml` (schema 5.1): how to build a container image for one model and how to
/// serve it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields, title = "tt-model.yaml (schema 5.1)")]
pub struct Manifest {
    /// The schema version, written as a string so that `5.1` is not `5.10`.
    #[serde(default = "default_schema")]
    #[schemars(extend("const" = "5.1"))]
    pub schema: String,
    /// The Hugging Face repository the package is pushed to (`org/name`).
    pub repo: String,
    /// A safe slug: cache directory, image repository and container name.
    #[schemars(regex(pattern = r"^[a-z0-9][a-z0-9._-]*$"))]
    pub name: String,
    /// The weights: `org/name` or `{repo, revision, allow_patterns, ignore_patterns}`.
    pub weights: WeightsSource,
    /// Drafters and adapters, prefetched and mounted like the primary weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auxiliary_weights: Vec<WeightsSource>,
    /// How the image serves the model.
    #[serde(default)]
    pub kind: Kind,
    /// The Tenstorrent architecture.
    pub arch: Arch,
    /// What the image is built from.
    pub source: Source,
    /// Where the image is published.
    #[serde(default)]
    pub image: ImageSettings,
    /// Kind-specific build and launch settings (validated per kind).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schemars(schema_with = "runtime::runtime_schema")]
    pub runtime: serde_json::Map<String, serde_json::Value>,
    /// Serve defaults every profile inherits.
    #[serde(default)]
    pub serve: ServeSettings,
    /// Named serve variants (omitted: one profile named `default`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve_profiles: Vec<ServeProfile>,
    /// The profile `serve` uses without `--profile` (required with more than one profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_profile: Option<String>,
    /// Checks run inside the finished image at build time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<VerifyStep>,
    /// The model card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<CardSettings>,
}

fn default_schema() -> String {
    SCHEMA_VERSION.to_owned()
}

/// The top-level keys.
pub const MANIFEST_KEYS: &[&str] = &[
    "schema",
    "repo",
    "name",
    "weights",
    "auxiliary_weights",
    "kind",
    "arch",
    "source",
    "image",
    "runtime",
    "serve",
    "serve_profiles",
    "default_profile",
    "verify",
    "card",
];

impl FromNode for Kind {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        one_of(node, path, cx, "kind", Kind::ALL)
    }
}

impl FromNode for Arch {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        one_of(node, path, cx, "arch", Arch::ALL)
    }
}

impl FromNode for Manifest {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, MANIFEST_KEYS, cx)?;
        let schema = f.opt::<String>("schema", cx);
        let repo = f.req("repo", cx);
        let name = f.req("name", cx);
        let weights = f.req("weights", cx);
        let auxiliary_weights = f.or_default("auxiliary_weights", cx);
        let kind = f.opt("kind", cx);
        let arch = f.req("arch", cx);
        let source = f.req("source", cx);
        let image = f.opt("image", cx);
        let runtime = f.or_default("runtime", cx);
        let serve = f.opt("serve", cx);
        let serve_profiles = f.or_default("serve_profiles", cx);
        let default_profile = f.opt("default_profile", cx);
        let verify = f.or_default("verify", cx);
        let card = f.opt("card", cx);
        Some(Self {
            schema: schema?.unwrap_or_else(default_schema),
            repo: repo?,
            name: name?,
            weights: weights?,
            auxiliary_weights: auxiliary_weights?,
            // An invalid or missing kind/arch is already reported; a stand-in keeps every other
            // check running (a manifest with errors is never returned, so it cannot leak), and
            // the checks that depend on the kind are skipped (`check_str`).
            kind: kind.flatten().unwrap_or_default(),
            arch: arch.unwrap_or(Arch::Blackhole),
            source: source?,
            image: image?.unwrap_or_default(),
            runtime: runtime?,
            serve: serve?.unwrap_or_default(),
            serve_profiles: serve_profiles?,
            default_profile: default_profile?,
            verify: verify?,
            card: card?,
        })
    }
}
