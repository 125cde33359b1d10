//! Decoding the authoring types from a [`Node`] tree, collecting every problem.
//!
//! Each type implements [`FromNode`] by hand: the accepted keys are listed once (and checked
//! against the JSON Schema in a test), unknown keys are reported with the closest valid key,
//! and one bad field does not hide the others. `None` means "an error was recorded".

use indexmap::IndexMap;

use crate::diagnostic::{Diagnostic, suggest};
use crate::node::{Node, Pos, Value};

/// The longest scalar a manifest may hold (a whole model card section fits easily).
pub const MAX_SCALAR_BYTES: usize = 256 * 1024;

/// Decoding state: the source text (for scalar text) and the findings so far.
pub struct Cx<'s> {
    /// The manifest text.
    pub src: &'s str,
    /// Everything found so far.
    pub diags: Vec<Diagnostic>,
}

impl<'s> Cx<'s> {
    /// A fresh context over `src`.
    pub fn new(src: &'s str) -> Self {
        Self {
            src,
            diags: Vec::new(),
        }
    }

    /// Records an error.
    pub fn error(&mut self, code: &'static str, path: &str, pos: Pos, message: impl Into<String>) {
        self.diags.push(Diagnostic::error(code, path, pos, message));
    }

    /// Records a diagnostic.
    pub fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// Records "expected X, found Y" at `node`.
    pub fn wrong_type(&mut self, node: &Node, path: &str, expected: &str) {
        self.error(
            "type",
            path,
            node.pos,
            format!("expected {expected}, found {}", node.value.describe()),
        );
    }
}

/// `path.key`.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// `path[i]`.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A type decoded from a node.
pub trait FromNode: Sized {
    /// Decodes `node` (at dotted `path`), recording problems in `cx`.
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self>;
}

impl FromNode for String {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        match node.scalar_text(cx.src) {
            Some(text) if text.len() > MAX_SCALAR_BYTES => {
                cx.error(
                    "too-long",
                    path,
                    node.pos,
                    format!(
                        "this value is {} bytes; the limit is {MAX_SCALAR_BYTES}",
                        text.len()
                    ),
                );
                None
            }
            Some(text) => Some(text),
            None => {
                cx.wrong_type(node, path, "a string");
                None
            }
        }
    }
}

impl FromNode for bool {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                cx.wrong_type(node, path, "`true` or `false`");
                None
            }
        }
    }
}

macro_rules! int_from_node {
    ($($t:ty),*) => {$(
        impl FromNode for $t {
            fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
                let parsed = match node.value {
                    Value::Int(i) => <$t>::try_from(i).ok(),
                    Value::UInt(u) => <$t>::try_from(u).ok(),
                    _ => {
                        cx.wrong_type(node, path, "a whole number");
                        return None;
                    }
                };
                if parsed.is_none() {
                    cx.error(
                        "range",
                        path,
                        node.pos,
                        if u64::from(<$t>::MAX) >= u64::from(u32::MAX) {
                            "out of range: expected a whole number ≥ 0".to_owned()
                        } else {
                            format!("out of range: expected a whole number from 0 to {}", <$t>::MAX)
                        },
                    );
                }
                parsed
            }
        }
    )*};
}
int_from_node!(u16, u32, u64);

impl<T: FromNode> FromNode for Vec<T> {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let Value::Seq(items) = &node.value else {
            cx.wrong_type(node, path, "a list");
            return None;
        };
        let decoded: Vec<Option<T>> = items
            .iter()
            .enumerate()
            .map(|(i, item)| T::from_node(item, &index(path, i), cx))
            .collect();
        decoded.into_iter().collect()
    }
}

impl FromNode for IndexMap<String, String> {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let Some(entries) = node.as_map() else {
            cx.wrong_type(node, path, "a mapping of names to strings");
            return None;
        };
        let mut out = IndexMap::new();
        let mut ok = true;
        for (k, v) in entries {
            let Some(key) = String::from_node(k, path, cx) else {
                ok = false;
                continue;
            };
            match String::from_node(v, &join(path, &key), cx) {
                Some(value) => {
                    out.insert(key, value);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

impl FromNode for serde_json::Map<String, serde_json::Value> {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        match node.to_json(cx.src) {
            serde_json::Value::Object(map) => Some(map),
            _ => {
                cx.wrong_type(node, path, "a mapping");
                None
            }
        }
    }
}

/// The keys of one mapping, checked against the keys a type accepts.
pub struct Fields<'n> {
    node: &'n Node,
    path: String,
    entries: Vec<(&'n str, &'n Node)>,
}

impl<'n> Fields<'n> {
    /// Checks that `node` is a mapping whose keys are all in `known`; reports each unknown key
    /// with the closest known one. Returns `None` only when `node` is not a mapping.
    pub fn new(node: &'n Node, path: &str, known: &[&str], cx: &mut Cx<'_>) -> Option<Self> {
        let Some(map) = node.as_map() else {
            cx.wrong_type(node, path, "a mapping");
            return None;
        };
        let mut entries = Vec::with_capacity(map.len());
        for (k, v) in map {
            let Value::Str(key) = &k.value else {
                let shown = k
                    .scalar_text(cx.src)
                    .unwrap_or_else(|| k.value.describe().to_owned());
                let found = match &k.value {
                    Value::Seq(_) | Value::Map(_) | Value::Null => k.value.describe().to_owned(),
                    _ => format!("{} `{shown}`", k.value.describe()),
                };
                cx.error(
                    "key-type",
                    path,
                    k.pos,
                    format!("keys must be strings, found {found}"),
                );
                continue;
            };
            if known.contains(&key.as_str()) {
                entries.push((key.as_str(), v));
            } else {
                cx.push(unknown_key(path, key, k.pos, known));
            }
        }
        Some(Self {
            node,
            path: path.to_owned(),
            entries,
        })
    }

    /// The node itself.
    pub fn node(&self) -> &'n Node {
        self.node
    }

    /// The dotted path of the mapping.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The raw node under `key`, if present.
    pub fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// A required key; a missing (or null) one is reported at the mapping's key.
    pub fn req<T: FromNode>(&self, key: &str, cx: &mut Cx<'_>) -> Option<T> {
        match self.get(key).filter(|n| n.value != Value::Null) {
            Some(node) => T::from_node(node, &join(&self.path, key), cx),
            None => {
                let what = if self.path.is_empty() {
                    "the manifest".to_owned()
                } else {
                    format!("`{}`", self.path)
                };
                cx.error(
                    "missing-key",
                    &join(&self.path, key),
                    self.get(key).map_or(self.node.anchor(), |n| n.anchor()),
                    format!("{what} is missing the required key `{key}`"),
                );
                None
            }
        }
    }

    /// An optional key: `Some(None)` when absent or null, `None` when present but invalid.
    pub fn opt<T: FromNode>(&self, key: &str, cx: &mut Cx<'_>) -> Option<Option<T>> {
        match self.get(key).filter(|n| n.value != Value::Null) {
            Some(node) => T::from_node(node, &join(&self.path, key), cx).map(Some),
            None => Some(None),
        }
    }

    /// An optional key with a default.
    pub fn or_default<T: FromNode + Default>(&self, key: &str, cx: &mut Cx<'_>) -> Option<T> {
        self.opt(key, cx).map(Option::unwrap_or_default)
    }
}

/// The "unknown key" finding, with a suggestion when one is close.
pub fn unknown_key(path: &str, key: &str, pos: Pos, known: &[&str]) -> Diagnostic {
    let where_ = if path.is_empty() {
        "the manifest".to_owned()
    } else {
        format!("`{path}`")
    };
    let mut d = Diagnostic::error(
        "unknown-key",
        join(path, key),
        pos,
        format!("unknown key `{key}` in {where_}"),
    )
    .with_help(format!("{where_} accepts: {}", known.join(", ")));
    if let Some(best) = suggest(key, known.iter().copied()) {
        d = d.with_label(format!("did you mean `{best}`?"));
    }
    d
}

/// Decodes a string that must be one of `allowed`, with a suggestion on a miss.
pub fn one_of<T: Copy>(
    node: &Node,
    path: &str,
    cx: &mut Cx<'_>,
    what: &str,
    allowed: &[(&str, T)],
) -> Option<T> {
    let text = String::from_node(node, path, cx)?;
    if let Some((_, v)) = allowed.iter().find(|(name, _)| *name == text) {
        return Some(*v);
    }
    let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    let mut d = Diagnostic::error(
        "invalid-value",
        path,
        node.pos,
        format!(
            "{what} must be one of ({}), got '{text}'",
            quoted.join(", ")
        ),
    );
    if let Some(best) = suggest(&text, names.iter().copied()) {
        d = d.with_label(format!("did you mean `{best}`?"));
    }
    cx.push(d);
    None
}
