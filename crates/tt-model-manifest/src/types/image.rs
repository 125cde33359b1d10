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

/// One path component of a registry name (the distribution grammar, lowercase).
pub fn name_component_ok(c: &str) -> bool {
    let b = c.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&x| {
            x.is_ascii_lowercase() || x.is_ascii_digit() || matches!(x, b'.' | b'_' | b'-')
        })
}

/// A registry host, `name[:port]` or `[v6]:port` (no scheme, no path).
pub fn registry_host_ok(host: &str) -> bool {
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'))
}

/// Why `registry` is neither `hf` nor `<host>[:<port>]/<namespace>` (pure).
fn registry_problem(registry: &str) -> Option<String> {
    if registry == "hf" {
        return None;
    }
    let shape =
        "expected `hf` or <host>[:<port>]/<namespace>, e.g. ghcr.io/acme or 127.0.0.1:5000/tt";
    if registry.contains("://") {
        return Some(format!(
            "'{registry}' has a scheme: {shape} (loopback is spoken to over HTTP, every other host over HTTPS)"
        ));
    }
    match registry.split_once('/') {
        Some((host, ns))
            if registry_host_ok(host)
                && ns.trim_end_matches('/').split('/').all(name_component_ok) =>
        {
            None
        }
        _ => Some(format!("'{registry}': {shape}")),
    }
}

/// The keys `image` accepts.
pub const IMAGE_KEYS: &[&str] = &["registry", "repository"];

impl FromNode for ImageSettings {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, IMAGE_KEYS, cx)?;
        let registry: Option<Option<String>> = f.opt("registry", cx);
        if let (Some(Some(r)), Some(node)) = (&registry, f.get("registry"))
            && let Some(why) = registry_problem(r)
        {
            cx.error(
                "registry",
                &crate::decode::join(path, "registry"),
                node.pos,
                why,
            );
        }
        let repository: Option<Option<String>> = f.opt("repository", cx);
        if let (Some(Some(r)), Some(node)) = (&repository, f.get("repository"))
            && !r.split('/').all(name_component_ok)
        {
            cx.error(
                "registry",
                &crate::decode::join(path, "repository"),
                node.pos,
                format!("'{r}' is not a registry name: lowercase letters, digits and '.', '_', '-' between them"),
            );
        }
        Some(Self {
            registry: registry?.unwrap_or_else(default_registry),
            repository: repository?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::registry_problem;

    #[test]
    fn registry_shapes() {
        for ok in [
            "hf",
            "ghcr.io/acme",
            "127.0.0.1:5000/tt",
            "registry.example.com/a/b",
        ] {
            assert_eq!(registry_problem(ok), None, "{ok}");
        }
        for bad in [
            "ghcr.io",
            "https://ghcr.io/acme",
            "ghcr.io/Acme",
            "/acme",
            "ghcr.io//x",
        ] {
            assert!(registry_problem(bad).is_some(), "{bad}");
        }
    }
}
