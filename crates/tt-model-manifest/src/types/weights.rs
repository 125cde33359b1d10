//! `weights` and `auxiliary_weights`: a pointer to a Hugging Face repository. Weights never
//! enter the image; `serve` prefetches exactly these files into the host cache.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decode::{Cx, Fields, FromNode};
use crate::node::{Node, Value};

/// A weights reference: a bare `org/name` (follows the default branch) or a pinned spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum WeightsSource {
    /// `org/name`.
    Id(String),
    /// `{repo, revision, allow_patterns, ignore_patterns}`.
    Spec(WeightsSpec),
}

impl WeightsSource {
    /// The repository id.
    pub fn repo(&self) -> &str {
        match self {
            WeightsSource::Id(id) => id,
            WeightsSource::Spec(spec) => &spec.repo,
        }
    }

    /// The pinned revision, if any.
    pub fn revision(&self) -> Option<&str> {
        match self {
            WeightsSource::Id(_) => None,
            WeightsSource::Spec(spec) => spec.revision.as_deref(),
        }
    }

    /// The spec form (a bare id becomes a spec with no revision and no patterns).
    pub fn to_spec(&self) -> WeightsSpec {
        match self {
            WeightsSource::Id(id) => WeightsSpec {
                repo: id.clone(),
                revision: None,
                allow_patterns: Vec::new(),
                ignore_patterns: Vec::new(),
            },
            WeightsSource::Spec(spec) => spec.clone(),
        }
    }
}

/// A pinned weights reference; the fields pass straight to `snapshot_download`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WeightsSpec {
    /// The Hugging Face repository, `org/name`.
    pub repo: String,
    /// A 40-hex commit (recommended), a branch or a tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Only these files (glob patterns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_patterns: Vec<String>,
    /// Never these files (glob patterns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_patterns: Vec<String>,
}

/// The keys a weights spec accepts.
pub const WEIGHTS_KEYS: &[&str] = &["repo", "revision", "allow_patterns", "ignore_patterns"];

impl FromNode for WeightsSource {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        match &node.value {
            Value::Map(_) => WeightsSpec::from_node(node, path, cx).map(WeightsSource::Spec),
            Value::Str(_) => String::from_node(node, path, cx).map(WeightsSource::Id),
            _ => {
                cx.wrong_type(
                    node,
                    path,
                    "an `org/name` string or a mapping {repo, revision, …}",
                );
                None
            }
        }
    }
}

impl FromNode for WeightsSpec {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, WEIGHTS_KEYS, cx)?;
        let repo = f.req("repo", cx);
        let revision = f.opt("revision", cx);
        let allow_patterns = f.or_default("allow_patterns", cx);
        let ignore_patterns = f.or_default("ignore_patterns", cx);
        Some(Self {
            repo: repo?,
            revision: revision?,
            allow_patterns: allow_patterns?,
            ignore_patterns: ignore_patterns?,
        })
    }
}
