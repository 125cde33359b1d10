//! `serve` (defaults every profile inherits) and `serve_profiles`.

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decode::{Cx, Fields, FromNode};
use crate::node::{Node, Value};

/// Parsers vLLM enables for tool calls and reasoning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Capabilities {
    /// `--tool-call-parser`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_parser: Option<String>,
    /// `--reasoning-parser`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_parser: Option<String>,
}

/// One raw engine argument, or a `[flag, value]` pair; both are flattened into the argv.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ServeArg {
    /// `--flag` or `--flag=value`.
    One(String),
    /// `[--flag, value]`.
    Pair(String, String),
}

/// How the model is served. Every field is optional here; required fields are checked after
/// the profile merge, per kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ServeSettings {
    /// The board label `<board>[xN]`, e.g. `p150`, `p300x2`, `n300x4`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// A mesh preset (`P150`, `P150x4`, `QB2`, `T3K`, …) or a literal `"(rows, cols)"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh_device: Option<String>,
    /// The port the image binds under a bare `docker run` (not the host port of `serve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `--max-model-len`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u64>,
    /// `--max-num-seqs` (required for the vLLM kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u64>,
    /// `--block-size` (required for the vLLM kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    /// vllm-fork `--server-timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timeout: Option<u64>,
    /// Tool-call and reasoning parsers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// `--additional-config <json>` (the fork lifts its `tt` key into `--tt-config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_config: Option<serde_json::Map<String, serde_json::Value>>,
    /// Raw engine arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<ServeArg>,
    /// Extra container environment.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub env: IndexMap<String, String>,
}

/// A named variant of the serve settings (deep-merged over `serve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ServeProfile {
    /// The profile's name (container `tt-model-<name>-<profile>`).
    pub name: String,
    /// Shown by `profiles` and on the model card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The settings this profile overrides.
    #[serde(flatten)]
    pub settings: ServeSettings,
}

/// The serve settings' keys, written once: `serve` takes them, a profile takes them after its
/// own keys.
macro_rules! serve_keys {
    ($($own:literal),*) => {
        &[
            $($own,)*
            "hardware",
            "mesh_device",
            "port",
            "max_model_len",
            "max_num_seqs",
            "block_size",
            "server_timeout",
            "capabilities",
            "additional_config",
            "args",
            "env",
        ]
    };
}
/// The keys `serve` accepts.
pub const SERVE_KEYS: &[&str] = serve_keys!();
/// The keys a serve profile accepts: its name and description, then every serve key.
pub const PROFILE_KEYS: &[&str] = serve_keys!("name", "description");
/// The keys `capabilities` accepts.
pub const CAPABILITY_KEYS: &[&str] = &["tool_parser", "reasoning_parser"];

impl FromNode for Capabilities {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, CAPABILITY_KEYS, cx)?;
        let tool_parser = f.opt("tool_parser", cx);
        let reasoning_parser = f.opt("reasoning_parser", cx);
        Some(Self {
            tool_parser: tool_parser?,
            reasoning_parser: reasoning_parser?,
        })
    }
}

impl FromNode for ServeArg {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        match &node.value {
            Value::Seq(items) if items.len() == 2 => {
                let a = String::from_node(&items[0], &format!("{path}[0]"), cx);
                let b = String::from_node(&items[1], &format!("{path}[1]"), cx);
                Some(ServeArg::Pair(a?, b?))
            }
            Value::Seq(_) | Value::Map(_) | Value::Null => {
                cx.wrong_type(node, path, "an argument string or a [flag, value] pair");
                None
            }
            _ => String::from_node(node, path, cx).map(ServeArg::One),
        }
    }
}

fn settings_from(f: &Fields<'_>, cx: &mut Cx<'_>) -> Option<ServeSettings> {
    let hardware = f.opt("hardware", cx);
    let mesh_device = f.opt("mesh_device", cx);
    let port = f.opt("port", cx);
    let max_model_len = f.opt("max_model_len", cx);
    let max_num_seqs = f.opt("max_num_seqs", cx);
    let block_size = f.opt("block_size", cx);
    let server_timeout = f.opt("server_timeout", cx);
    let capabilities = f.opt("capabilities", cx);
    let additional_config = f.opt("additional_config", cx);
    let args = f.or_default("args", cx);
    let env = f.or_default("env", cx);
    Some(ServeSettings {
        hardware: hardware?,
        mesh_device: mesh_device?,
        port: port?,
        max_model_len: max_model_len?,
        max_num_seqs: max_num_seqs?,
        block_size: block_size?,
        server_timeout: server_timeout?,
        capabilities: capabilities?,
        additional_config: additional_config?,
        args: args?,
        env: env?,
    })
}

impl FromNode for ServeSettings {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, SERVE_KEYS, cx)?;
        settings_from(&f, cx)
    }
}

impl FromNode for ServeProfile {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, PROFILE_KEYS, cx)?;
        let name = f.req("name", cx);
        let description = f.opt("description", cx);
        let settings = settings_from(&f, cx);
        Some(Self {
            name: name?,
            description: description?,
            settings: settings?,
        })
    }
}
