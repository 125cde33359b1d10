//! Schema 1: the manifests of the original's refactor branch (tt-model 0.2), which say
//! `type: vllm|vllm-legacy` where 5.1 says `kind:`. Read as 5.1 they would draw an unknown
//! key, a schema error and then errors for a kind the author never chose (the default
//! `vllm-plugin`); instead they get one finding that says what the file is and how to port it,
//! and the kind-dependent checks are skipped.

use crate::diagnostic::Diagnostic;
use crate::node::{Node, Value};

/// The 5.1 kind a schema-1 `type` becomes: `vllm` ran stock vLLM with the standalone tt
/// plugin (5.1's default, `vllm-plugin`); `vllm-legacy` ran the older tenstorrent/vllm fork
/// with the plugin in-tree (`vllm-fork`).
pub fn kind_for_type(t: &str) -> Option<&'static str> {
    match t {
        "vllm" => Some("vllm-plugin"),
        "vllm-legacy" => Some("vllm-fork"),
        _ => None,
    }
}

/// The finding for a schema-1 manifest, or `None` for any other document.
pub(crate) fn schema_one(root: &Node, src: &str) -> Option<Diagnostic> {
    let schema = root.get("schema").and_then(|n| n.scalar_text(src));
    let type_node = root.get("type");
    let is_one =
        schema.as_deref() == Some("1") || (type_node.is_some() && root.get("kind").is_none());
    if !is_one {
        return None;
    }
    let (path, at) = match type_node {
        Some(n) => ("type", n),
        None => ("schema", root.get("schema")?),
    };
    let mut d = Diagnostic::error(
        "schema-1",
        path,
        at.anchor(),
        "this is a schema-1 manifest (`type:` instead of `kind:`, from tt-model 0.2); this tt-model reads schema '5.1'",
    )
    .with_help(
        "port it: write `schema: \"5.1\"` and replace `type:` with `kind:` — `type: vllm` is \
         `kind: vllm-plugin` (stock vLLM with the tt plugin), `type: vllm-legacy` is \
         `kind: vllm-fork` (the tenstorrent/vllm fork); the checks that depend on the kind were skipped",
    );
    if let Some(Value::Str(t)) = type_node.map(|n| &n.value)
        && let Some(kind) = kind_for_type(t)
    {
        d = d.with_label(format!("write `kind: {kind}`"));
    }
    Some(d)
}
