//! Git facts about the tt-metal tree (sha, branch, dirty, describe, scm_version, remote).
//!
//! Read with the `git` CLI: these are queries about the author's checkout, not engine calls.
//! A tree that is not the top of its own checkout (a plain directory, or a fixture inside
//! another repository) has no facts rather than borrowed ones.

use std::path::Path;
use std::process::Command;

use tt_model_manifest::wire::TtMetalBuild;

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

/// Reads the facts of a local tree, in the wire manifest's `built.tt_metal` (where every fact is
/// optional: a wire manifest from another tool may lack one); `scm_version`, `mode` and
/// `pushed` are always set here.
pub fn metal_facts(root: &Path) -> TtMetalBuild {
    let mut facts = TtMetalBuild {
        mode: Some("local".into()),
        scm_version: Some(FALLBACK_SCM_VERSION.into()),
        pushed: Some(false),
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
    facts.pushed = Some(!contains.trim().is_empty());
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
    facts.scm_version = Some(
        release
            .as_deref()
            .and_then(|d| scm_version(d, facts.dirty, node))
            .unwrap_or_else(|| FALLBACK_SCM_VERSION.into()),
    );
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
        assert_eq!(facts.scm_version.as_deref(), Some(FALLBACK_SCM_VERSION));
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
        assert_eq!(facts.scm_version.as_deref(), Some("0.5.0"));
        assert_eq!(facts.describe.as_deref(), Some("v0.5.0"));
        std::fs::write(root.join("f"), "2").unwrap();
        let facts = metal_facts(root);
        assert!(facts.dirty);
        assert_eq!(facts.describe.as_deref(), Some("v0.5.0-dirty"));
        assert!(
            (facts.scm_version.as_deref()).is_some_and(|v| v.starts_with("0.5.0+g")),
            "{:?}",
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
