//! The manifest's sources in their resolved form: local paths made absolute against a base
//! directory and defaults applied, the shape the package pipeline consumes.
//!
//! The authored types keep the paths as written (lint reports them as written, and the wire
//! manifest records them so); a pipeline that reads files needs them against one base, chosen
//! by its caller. Resolving here, beside the authored types, means a new field is added in one
//! crate, not mirrored in the package crate. Every path goes through [`crate::sources::resolve`],
//! the rule `lint --check-sources` uses too.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::sources::resolve;
use crate::types::{CargoBinary, CodeRoot, ComponentSource, ExtraCode, GitSource, VerifyStep};

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

/// `runtime.cargo`, resolved: the workspace made absolute, the binary's name defaulted to the
/// package's and its path in the image derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CargoSpec {
    /// The workspace directory, resolved against the base directory.
    pub workspace: PathBuf,
    /// The Cargo package to build.
    pub package: String,
    /// The binary target (`bin`, else the package's name).
    pub bin: String,
    /// Cargo features to enable.
    pub features: Vec<String>,
    /// Where the binary lands in the image (`/usr/local/bin/<bin>`).
    pub image_path: String,
}

/// A check `verify.sh` runs: a `verify:` entry, or one of the checks a kind adds, in the shape
/// the templates read (`{lang, code}`). The authored [`VerifyStep`] keeps its own (untagged)
/// form, which the wire manifest records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "lang", content = "code", rename_all = "lowercase")]
pub enum Check {
    /// A Python statement run with `"$VENV/bin/python" -c`.
    Python(String),
    /// A POSIX shell command run with `sh -c` (for images without Python).
    Sh(String),
}

impl Check {
    /// The check as written, for messages.
    pub fn text(&self) -> &str {
        match self {
            Check::Python(s) | Check::Sh(s) => s,
        }
    }
}

impl From<&VerifyStep> for Check {
    fn from(v: &VerifyStep) -> Self {
        match v {
            VerifyStep::Python(s) => Check::Python(s.clone()),
            VerifyStep::Shell(s) => Check::Sh(s.sh.clone()),
        }
    }
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

impl CargoBinary {
    /// This binary's build settings, the workspace resolved against `base`.
    pub fn resolve(&self, base: &Path) -> CargoSpec {
        CargoSpec {
            workspace: resolve(base, &self.workspace),
            package: self.package.clone(),
            bin: self.bin_name().to_string(),
            features: self.features.clone(),
            image_path: self.image_path(),
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
    fn cargo_defaults_the_binary_to_the_package() {
        let c = CargoBinary {
            workspace: "srv".into(),
            package: "my-server".into(),
            bin: None,
            features: vec!["f".into()],
        };
        let r = c.resolve(Path::new("/b"));
        assert_eq!(r.workspace, PathBuf::from("/b/srv"));
        assert_eq!(r.bin, "my-server");
        assert_eq!(r.image_path, "/usr/local/bin/my-server");
        assert_eq!(r.features, ["f"]);
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

    #[test]
    fn checks_keep_the_authored_text_in_the_templates_shape() {
        let sh = VerifyStep::Shell(crate::types::ShellStep { sh: "true".into() });
        let check = Check::from(&sh);
        assert_eq!(check, Check::Sh("true".into()));
        assert_eq!(check.text(), sh.text());
        let json = serde_json::to_value(Check::from(&VerifyStep::Python("import x".into())));
        assert_eq!(
            json.expect("a check serializes"),
            serde_json::json!({"lang": "python", "code": "import x"})
        );
    }
}
