//! The manifest's sources in their resolved form: local paths made absolute against a base
//! directory and defaults applied, the shape the package pipeline consumes.
//!
//! The authored types keep the paths as written (lint reports them as written, and the wire
//! manifest records them so); a pipeline that reads files needs them against one base, chosen
//! by its caller. Where the resolved form has the authored shape (`runtime`, a component
//! source) it is the authored type, its paths made absolute. Resolving here, beside the
//! authored types, means a new field is added in one crate, not mirrored in the package crate.
//! Every path goes through [`crate::sources::resolve`], the rule `lint --check-sources` uses
//! too.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::sources::resolve;
use crate::types::{
    CargoBinary, CodeRoot, ComponentSource, ExtraCode, GitSource, HttpServerRuntime, KindRuntime,
    RuntimeSpec, TtDitServerRuntime, VllmForkRuntime, VllmPluginRuntime,
};

/// `source.tt_metal`, resolved: where the tt-metal tree comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum MetalSource {
    /// A local checkout, packaged as-is (uncommitted changes included).
    Local {
        /// The checkout's directory, resolved against the base directory.
        path: PathBuf,
    },
    /// A git repository cloned at package time at the ref's commit (`sha` unset: the pins
    /// live in `built`).
    Git(GitSource),
}

/// One `source.extra_code` root, resolved: the local root its paths are under, and for a git
/// root the source it is fetched from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedExtraCode {
    /// The local root; for a git root, the checkout the pipeline fetched (empty before).
    pub root: PathBuf,
    /// The allowlist under `root`: relative paths of what ships; a missing entry is an error.
    pub paths: Vec<String>,
    /// A `{repo, ref}` root (`sha` unset), fetched at package time at the ref's commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,
}

/// A git source as authored, without a pin: a manifest's `sha` is never trusted at package
/// time (the ref is fetched and pinned again).
fn unpinned(g: &GitSource) -> GitSource {
    GitSource {
        sha: None,
        ..g.clone()
    }
}

impl CodeRoot {
    /// This root as the tt-metal source, its local path resolved against `base`.
    pub fn resolve_metal(&self, base: &Path) -> MetalSource {
        match self {
            CodeRoot::Path(p) => MetalSource::Local {
                path: resolve(base, p),
            },
            CodeRoot::Git(g) => MetalSource::Git(unpinned(g)),
        }
    }
}

impl ExtraCode {
    /// This root resolved against `base`; a git root's local `root` stays empty until fetched.
    pub fn resolve(&self, base: &Path) -> ResolvedExtraCode {
        let (root, git) = match &self.root {
            CodeRoot::Path(p) => (resolve(base, p), None),
            CodeRoot::Git(g) => (PathBuf::new(), Some(unpinned(g))),
        };
        ResolvedExtraCode {
            root,
            paths: self.paths.clone(),
            git,
        }
    }
}

impl RuntimeSpec {
    /// This block with its local paths (`lock`, `vllm` and `plugin` paths, `wheels`, the
    /// `cargo` workspace) resolved against `base`; every other key as written.
    ///
    /// A plugin is never a wheel (lint refuses `plugin.wheel`): the resolved form has none,
    /// so the pipeline never stages one.
    pub fn resolve(&self, base: &Path) -> RuntimeSpec {
        let abs = |p: &str| resolve(base, p).to_string_lossy().into_owned();
        let lock = |l: &Option<String>| l.as_deref().map(abs);
        let source = |s: &Option<ComponentSource>| s.as_ref().map(|s| s.resolve(base));
        let kind = match &self.kind {
            KindRuntime::VllmPlugin(r) => KindRuntime::VllmPlugin(VllmPluginRuntime {
                vllm: source(&r.vllm),
                plugin: (r.plugin.as_ref())
                    .filter(|p| !matches!(p, ComponentSource::Wheel { .. }))
                    .map(|p| p.resolve(base)),
                lock: lock(&r.lock),
                wheels: r.wheels.iter().map(|w| abs(w)).collect(),
                ..r.clone()
            }),
            KindRuntime::VllmFork(r) => KindRuntime::VllmFork(VllmForkRuntime {
                vllm: source(&r.vllm),
                lock: lock(&r.lock),
                ..r.clone()
            }),
            KindRuntime::TtDitServer(r) => KindRuntime::TtDitServer(TtDitServerRuntime {
                lock: lock(&r.lock),
                ..r.clone()
            }),
            KindRuntime::HttpServer(r) => KindRuntime::HttpServer(HttpServerRuntime {
                lock: lock(&r.lock),
                cargo: r.cargo.as_ref().map(|c| CargoBinary {
                    workspace: abs(&c.workspace),
                    ..c.clone()
                }),
                ..r.clone()
            }),
        };
        RuntimeSpec {
            common: self.common.clone(),
            kind,
        }
    }
}

impl ComponentSource {
    /// This source with its local path (`wheel`, `path`) resolved against `base`.
    pub fn resolve(&self, base: &Path) -> ComponentSource {
        let abs = |p: &str| resolve(base, p).to_string_lossy().into_owned();
        match self {
            ComponentSource::Wheel { wheel } => ComponentSource::Wheel { wheel: abs(wheel) },
            ComponentSource::Path { path } => ComponentSource::Path { path: abs(path) },
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git() -> GitSource {
        GitSource {
            repo: "org/x".into(),
            git_ref: "main".into(),
            sha: Some("0".repeat(40)),
        }
    }

    #[test]
    fn local_roots_are_made_absolute_and_git_roots_lose_their_pin() {
        let base = Path::new("/work");
        assert_eq!(
            CodeRoot::Path("tt-metal".into()).resolve_metal(base),
            MetalSource::Local {
                path: PathBuf::from("/work/tt-metal")
            }
        );
        let MetalSource::Git(g) = CodeRoot::Git(git()).resolve_metal(base) else {
            panic!("a git root stays git");
        };
        assert_eq!((g.repo.as_str(), g.sha), ("org/x", None));
        let extra = ExtraCode {
            root: CodeRoot::Git(git()),
            paths: vec!["m".into()],
        };
        let r = extra.resolve(base);
        assert_eq!(r.root, PathBuf::new());
        assert_eq!(r.git.and_then(|g| g.sha), None);
        let local = ExtraCode {
            root: CodeRoot::Path("/abs/root".into()),
            paths: vec!["m".into()],
        };
        assert_eq!(local.resolve(base).root, PathBuf::from("/abs/root"));
    }

    #[test]
    fn runtime_paths_are_made_absolute_and_a_plugin_wheel_is_dropped() {
        let map = |v: serde_json::Value| v.as_object().cloned().expect("an object");
        let rt = RuntimeSpec::from_map(
            crate::Kind::VllmPlugin,
            &map(serde_json::json!({
                "vllm": {"path": "vllm"},
                "plugin": {"wheel": "p.whl"},
                "lock": "req.lock",
                "wheels": ["dist/x.whl"],
                "overrides": ["numpy<2"],
            })),
        )
        .expect("a valid block")
        .resolve(Path::new("/b"));
        assert_eq!(
            rt.vllm(),
            Some(&ComponentSource::Path {
                path: "/b/vllm".into()
            })
        );
        assert_eq!(rt.plugin(), None);
        assert_eq!(rt.lock(), Some("/b/req.lock"));
        assert_eq!(rt.wheels(), ["/b/dist/x.whl"]);
        assert_eq!(rt.overrides(), ["numpy<2"]);

        let rt = RuntimeSpec::from_map(
            crate::Kind::HttpServer,
            &map(serde_json::json!({
                "command": ["srv"],
                "cargo": {"workspace": "srv", "package": "my-server", "features": ["f"]},
            })),
        )
        .expect("a valid block")
        .resolve(Path::new("/b"));
        let cargo = rt.cargo().expect("runtime.cargo");
        assert_eq!(cargo.workspace, "/b/srv");
        assert_eq!(cargo.bin_name(), "my-server");
        assert_eq!(cargo.image_path(), "/usr/local/bin/my-server");
        assert_eq!(cargo.features, ["f"]);
    }

    #[test]
    fn component_sources_resolve_only_local_paths() {
        let base = Path::new("/b");
        let p = ComponentSource::Path {
            path: "plug".into(),
        }
        .resolve(base);
        assert_eq!(
            p,
            ComponentSource::Path {
                path: "/b/plug".into()
            }
        );
        let v = ComponentSource::Version {
            version: "0.1".into(),
        };
        assert_eq!(v.resolve(base), v);
    }
}
