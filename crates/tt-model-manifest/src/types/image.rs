//! `image`: where the built image is published.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decode::{Cx, Fields, FromNode};
use crate::node::Node;

/// The `image` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ImageSettings {
    /// `hf` (the default: the OCI layout travels in the Hub repo under `image/`) or an OCI
    /// namespace such as `ghcr.io/tenstorrent` (the repo then carries only a pointer).
    #[serde(default = "default_registry")]
    pub registry: String,
    /// The name under a real registry (default: the manifest's `name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

fn default_registry() -> String {
    "hf".to_owned()
}

impl Default for ImageSettings {
    fn default() -> Self {
        Self {
            registry: default_registry(),
            repository: None,
        }
    }
}

/// The keys `image` accepts.
pub const IMAGE_KEYS: &[&str] = &["registry", "repository"];

impl FromNode for ImageSettings {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, IMAGE_KEYS, cx)?;
        let registry = f.opt("registry", cx);
        let repository = f.opt("repository", cx);
        Some(Self {
            registry: registry?.unwrap_or_else(default_registry),
            repository: repository?,
        })
    }
}
