//! `runtime`: the kind-specific block. Its keys are checked per kind by
//! [`crate::validate`]; this file holds what is shared by every kind (`health_path`,
//! `device`) and the one structured extension of ours, `runtime.cargo` (a Rust binary built
//! from a Cargo workspace and shipped in the image, `http-server` only).

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::decode::{Cx, Fields, FromNode};
use crate::node::Node;

/// Keys every kind accepts under `runtime` (read by `serve` from the wire manifest).
pub const COMMON_RUNTIME_KEYS: &[&str] = &["health_path", "device"];

/// The values of `runtime.device`: `card` (default) needs a Tenstorrent device; the others
/// run without one (`serve` then passes no device into the container).
pub const RUNTIME_DEVICES: &[&str] = &["card", "none", "cpu", "emulation"];

/// The keys `runtime.cargo` accepts.
pub const CARGO_KEYS: &[&str] = &["workspace", "package", "bin", "features"];

/// Where a `runtime.cargo` binary lands in the image (on `PATH`).
pub const CARGO_BIN_DIR: &str = "/usr/local/bin";

/// `runtime.cargo` (a tt-model extension of schema 5.1, `http-server` only): a binary built
/// from a Cargo workspace on the build host (`cargo build --release --locked --workspace --bin`,
/// statically linked) and shipped at `/usr/local/bin/<bin>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CargoBinary {
    /// The Cargo workspace (or package) directory holding `Cargo.lock`, read from the working
    /// directory like every other path of the manifest.
    pub workspace: String,
    /// The package whose binary `bin` is built.
    pub package: String,
    /// The binary target (default: the package name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin: Option<String>,
    /// Cargo features to enable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

impl CargoBinary {
    /// The binary's name (`bin`, else the package's).
    pub fn bin_name(&self) -> &str {
        self.bin.as_deref().unwrap_or(&self.package)
    }

    /// Where the binary lands in the image.
    pub fn image_path(&self) -> String {
        format!("{CARGO_BIN_DIR}/{}", self.bin_name())
    }
}

impl FromNode for CargoBinary {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, CARGO_KEYS, cx)?;
        let workspace = f.req("workspace", cx);
        let package = f.req("package", cx);
        let bin = f.opt("bin", cx);
        let features = f.or_default("features", cx);
        Some(Self {
            workspace: workspace?,
            package: package?,
            bin: bin?,
            features: features?,
        })
    }
}

/// The JSON Schema of `runtime`: the union of every kind's keys (each kind accepts a subset,
/// which `tt-model lint` checks), with `cargo`, `health_path` and `device` typed.
pub(crate) fn runtime_schema(generator: &mut SchemaGenerator) -> Schema {
    let cargo = generator.subschema_for::<CargoBinary>();
    json_schema!({
        "type": "object",
        "description": "Kind-specific build and launch settings (validated per kind; `tt-model lint` says which keys a kind accepts).",
        "additionalProperties": true,
        "properties": {
            "cargo": cargo,
            "health_path": {
                "type": "string",
                "pattern": "^/",
                "description": "The HTTP path serve probes for readiness (default /health)."
            },
            "device": {
                "type": "string",
                "enum": RUNTIME_DEVICES,
                "description": "card (default): the runtime needs a Tenstorrent device; none, cpu, emulation: it runs without one."
            },
            "command": {"type": "array", "items": {"type": "string"}},
            "ready_line": {"type": "string"},
            "packages": {"type": "array", "items": {"type": "string"}},
            "lock": {"type": "string"},
            "app": {"type": "string"},
            "mesh_shape_env": {"type": "string"}
        }
    })
}

impl super::Manifest {
    /// `runtime.cargo`, if the manifest ships a Rust binary (validated by lint; a malformed
    /// block reads as none here).
    pub fn cargo_binary(&self) -> Option<CargoBinary> {
        self.runtime_spec().ok()?.cargo().cloned()
    }
}
