//! `source`: which tt-metal tree the image builds from and which files of it (and of other
//! roots) are shipped.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decode::{Cx, Fields, FromNode};
use crate::node::{Node, Value};

/// A code root: a local directory (packaged as-is) or a git repository at a ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CodeRoot {
    /// A local path, relative to the directory `tt-model` runs in.
    Path(String),
    /// `{repo, ref}`, cloned at build time.
    Git(GitSource),
}

impl CodeRoot {
    /// The local path, for a local root.
    pub fn local_path(&self) -> Option<&str> {
        match self {
            CodeRoot::Path(p) => Some(p),
            CodeRoot::Git(_) => None,
        }
    }
}

/// A git source; `package` fills in `sha`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GitSource {
    /// The repository URL or `org/name`.
    pub repo: String,
    /// A branch, tag or commit; it must be pushed.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The resolved commit (written by `package`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
}

/// Model code from outside tt-metal, staged into the same `code/` tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExtraCode {
    /// Where the paths are relative to.
    pub root: CodeRoot,
    /// Paths under `root` (at least one).
    pub paths: Vec<String>,
}

/// The `source` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Source {
    /// The tt-metal tree: a local path (packaged as-is, dirty tree included) or `{repo, ref}`.
    pub tt_metal: CodeRoot,
    /// The allowlist of paths, relative to the tt-metal tree, that enter the image.
    pub code: Vec<String>,
    /// Extra code from other roots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_code: Vec<ExtraCode>,
    /// The Ubuntu release of the base and runtime images, e.g. `"22.04"`.
    pub ubuntu: String,
    /// The Python version uv provisions, e.g. `"3.12"`.
    pub python: String,
}

impl Source {
    /// `code` plus every `extra_code` path, in order.
    pub fn all_code_paths(&self) -> impl Iterator<Item = &str> {
        self.code.iter().map(String::as_str).chain(
            self.extra_code
                .iter()
                .flat_map(|e| e.paths.iter().map(String::as_str)),
        )
    }
}

/// The keys `source` accepts.
pub const SOURCE_KEYS: &[&str] = &["tt_metal", "code", "extra_code", "ubuntu", "python"];
/// The keys a git source accepts.
pub const GIT_KEYS: &[&str] = &["repo", "ref", "sha"];
/// The keys an `extra_code` entry accepts.
pub const EXTRA_CODE_KEYS: &[&str] = &["root", "paths"];

impl FromNode for CodeRoot {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        match &node.value {
            Value::Map(_) => GitSource::from_node(node, path, cx).map(CodeRoot::Git),
            Value::Str(_) => String::from_node(node, path, cx).map(CodeRoot::Path),
            _ => {
                cx.wrong_type(node, path, "a local path or a mapping {repo, ref}");
                None
            }
        }
    }
}

impl FromNode for GitSource {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, GIT_KEYS, cx)?;
        let repo = f.req("repo", cx);
        let git_ref = f.req("ref", cx);
        let sha = f.opt("sha", cx);
        Some(Self {
            repo: repo?,
            git_ref: git_ref?,
            sha: sha?,
        })
    }
}

impl FromNode for ExtraCode {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, EXTRA_CODE_KEYS, cx)?;
        let root = f.req("root", cx);
        let paths = f.req("paths", cx);
        Some(Self {
            root: root?,
            paths: paths?,
        })
    }
}

impl FromNode for Source {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, SOURCE_KEYS, cx)?;
        let tt_metal = f.req("tt_metal", cx);
        let code = f.req("code", cx);
        let extra_code = f.or_default("extra_code", cx);
        let ubuntu = f.req("ubuntu", cx);
        let python = f.req("python", cx);
        Some(Self {
            tt_metal: tt_metal?,
            code: code?,
            extra_code: extra_code?,
            ubuntu: ubuntu?,
            python: python?,
        })
    }
}
