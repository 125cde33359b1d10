//! Git facts about the tt-metal tree (sha, branch, dirty, describe, scm_version, remote).
//!
//! Read with the `git` CLI: these are queries about the author's checkout, not engine calls.
//! A tree that is not the top of its own checkout (a plain directory, or a fixture inside
//! another repository) has no facts rather than borrowed ones.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// What we record about the tt-metal source in `built.tt_metal`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct MetalFacts {
    /// Full commit sha of `HEAD`; `None` when the tree is not the top of a checkout or has no
    /// commits (then every other fact keeps its default).
    pub sha: Option<String>,
    /// `git describe --abbrev=10 --first-parent --dirty=-dirty --always`.
    pub describe: Option<String>,
    /// Tracked files have uncommitted changes (untracked files do not count).
    pub dirty: bool,
    /// PEP 440 version from the last release tag (see [`scm_version`]), else
    /// [`FALLBACK_SCM_VERSION`].
    pub scm_version: String,
    /// `local` (a checkout on disk) or `git` (cloned from `{repo, ref}` at package time).
    pub mode: String,
    /// URL of the remote holding `HEAD` (`origin` if none does); the repository for a git source.
    pub remote: Option<String>,
    /// The checked-out branch (for a git source, the ref unless it is a sha); `None` when detached.
    pub branch: Option<String>,
    /// Some remote-tracking branch contains `HEAD` (always true for a git source).
    pub pushed: bool,
}

impl From<MetalFacts> for tt_model_manifest::wire::TtMetalBuild {
    /// `built.tt_metal` as the wire manifest records it. Both sides are spelled out in full
    /// (no `..`), so a fact added to either type fails to compile until it is mapped here.
    fn from(facts: MetalFacts) -> Self {
        let MetalFacts {
            sha,
            describe,
            dirty,
            scm_version,
            mode,
            remote,
            branch,
            pushed,
        } = facts;
        Self {
            sha,
            describe,
            dirty,
            scm_version: Some(scm_version),
            mode: Some(mode),
            remote,
            branch,
            pushed: Some(pushed),
        }
    }
}

/// The version used when no release tag can be found.
pub const FALLBACK_SCM_VERSION: &str = "0.0.0.dev0";

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Reads the facts of a local tree.
pub fn metal_facts(root: &Path) -> MetalFacts {
    let mut facts = MetalFacts {
        mode: "local".into(),
        scm_version: FALLBACK_SCM_VERSION.into(),
        ..Default::default()
    };
    let top = git(root, &["rev-parse", "--show-toplevel"]);
    let is_top = match (top, root.canonicalize()) {
        (Some(top), Ok(canon)) => Path::new(&top).canonicalize().ok() == Some(canon),
        _ => false,
    };
    if !is_top {
        return facts;
    }
    facts.sha = git(root, &["rev-parse", "HEAD"]);
    if facts.sha.is_none() {
        return facts; // a repository without commits
    }
    facts.branch = git(root, &["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| b != "HEAD");
    facts.dirty = git(root, &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    facts.describe = git(
        root,
        &[
            "describe",
            "--abbrev=10",
            "--first-parent",
            "--dirty=-dirty",
            "--always",
        ],
    );
    let contains = git(root, &["branch", "-r", "--contains", "HEAD"]).unwrap_or_default();
    facts.pushed = !contains.trim().is_empty();
    let remote_name = contains
        .lines()
        .map(|l| l.trim())
        .find(|l| !l.contains("->"))
        .and_then(|l| l.split('/').next())
        .unwrap_or("origin")
        .to_string();
    facts.remote = git(root, &["remote", "get-url", &remote_name]);
    let release = git(
        root,
        &[
            "describe",
            "--tags",
            "--long",
            "--first-parent",
            "--match",
            "v[0-9]*.[0-9]*.[0-9]*",
            "--exclude",
            "*dev*",
            "--exclude",
            "*rc*",
        ],
    );
    let node = facts
        .sha
        .as_deref()
        .map(|s| &s[..s.len().min(10)])
        .unwrap_or("");
    facts.scm_version = release
        .as_deref()
        .and_then(|d| scm_version(d, facts.dirty, node))
        .unwrap_or_else(|| FALLBACK_SCM_VERSION.into());
    facts
}

/// The PEP 440 version for a `git describe --long` of a release tag: `X.Y.Z` on the tag,
/// `X.Y.(Z+1).devN` past it, `+g<node>` when the tree is dirty.
pub fn scm_version(describe_long: &str, dirty: bool, node: &str) -> Option<String> {
    let mut parts = describe_long.rsplitn(3, '-');
    let _hash = parts.next()?;
    let distance: u64 = parts.next()?.parse().ok()?;
    let tag = parts.next()?.strip_prefix('v')?;
    let nums: Vec<u64> = tag
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [x, y, z] = nums[..] else { return None };
    let mut version = if distance == 0 {
        format!("{x}.{y}.{z}")
    } else {
        format!("{x}.{y}.{}.dev{distance}", z + 1)
    };
    if dirty {
        version.push_str(&format!("+g{node}"));
    }
    Some(version)
}

/// `SOURCE_DATE_EPOCH` for a build of the tree at `root` (whose `HEAD` is `sha`, when known):
/// the variable's own value when it is set (the reproducible-builds convention: whoever sets
/// it decides), else the commit time of `sha`, else
/// [`tt_model_oci::reproducible::FALLBACK_EPOCH`]. Never the time of packaging: the same
/// inputs must give the same image.
pub fn source_date_epoch(root: &Path, sha: Option<&str>) -> u64 {
    if let Some(v) = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return v;
    }
    sha.and_then(|sha| git(root, &["show", "-s", "--format=%ct", sha]))
        .and_then(|t| t.parse().ok())
        .unwrap_or(tt_model_oci::reproducible::FALLBACK_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scm_versions() {
        assert_eq!(
            scm_version("v0.62.0-0-gabc", false, "abc").as_deref(),
            Some("0.62.0")
        );
        assert_eq!(
            scm_version("v0.62.0-14-gabc", false, "abc").as_deref(),
            Some("0.62.1.dev14")
        );
        assert_eq!(
            scm_version("v0.62.0-14-gabc", true, "abc").as_deref(),
            Some("0.62.1.dev14+gabc")
        );
        assert_eq!(scm_version("v1.2-3-gabc", false, "abc"), None);
        assert_eq!(scm_version("garbage", false, "abc"), None);
    }

    #[test]
    fn a_tree_inside_another_checkout_has_no_facts() {
        let dir = tempfile::tempdir().unwrap();
        let facts = metal_facts(dir.path());
        assert_eq!(facts.sha, None);
        assert_eq!(facts.scm_version, FALLBACK_SCM_VERSION);
    }

    #[test]
    fn a_real_checkout_reports_sha_dirty_and_version() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(root)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        run(&["init", "-q", "-b", "main"]);
        std::fs::write(root.join("f"), "1").unwrap();
        run(&["add", "f"]);
        run(&["commit", "-q", "-m", "one"]);
        run(&["tag", "-a", "v0.5.0", "-m", "release"]);
        let facts = metal_facts(root);
        assert_eq!(facts.sha.as_ref().map(|s| s.len()), Some(40));
        assert_eq!(facts.branch.as_deref(), Some("main"));
        assert!(!facts.dirty);
        assert_eq!(facts.scm_version, "0.5.0");
        assert_eq!(facts.describe.as_deref(), Some("v0.5.0"));
        std::fs::write(root.join("f"), "2").unwrap();
        let facts = metal_facts(root);
        assert!(facts.dirty);
        assert_eq!(facts.describe.as_deref(), Some("v0.5.0-dirty"));
        assert!(
            facts.scm_version.starts_with("0.5.0+g"),
            "{}",
            facts.scm_version
        );
    }

    #[test]
    fn the_epoch_is_the_commit_time_else_the_fallback() {
        if std::env::var_os("SOURCE_DATE_EPOCH").is_some() {
            return; // whoever set it decides, by design; nothing here to check against
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(root)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .env("GIT_COMMITTER_DATE", "@1234567890 +0000")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["commit", "-q", "--allow-empty", "-m", "one"]);
        let sha = metal_facts(root).sha.unwrap();
        assert_eq!(source_date_epoch(root, Some(&sha)), 1_234_567_890);
        assert_eq!(
            source_date_epoch(root, None),
            tt_model_oci::reproducible::FALLBACK_EPOCH
        );
        assert_eq!(
            source_date_epoch(root, Some("0000000000000000000000000000000000000000")),
            tt_model_oci::reproducible::FALLBACK_EPOCH
        );
    }
}
