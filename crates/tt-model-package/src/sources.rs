//! Sources other than the tt-metal tree, fetched on the host at package time so the build
//! needs neither git nor credentials and a branch never floats into the image:
//!
//! * git sources (`source.tt_metal` and `extra_code` roots as `{repo, ref}`, `runtime.plugin`
//!   and vllm-fork's `runtime.vllm`): the ref is resolved to a commit sha
//!   (`git ls-remote <repo> <ref> <ref>^{}`, the peeled tag winning; a full sha is taken
//!   as-is; a short sha is looked up in a blobless fetch), that one commit is fetched into a
//!   temporary checkout, and the sha is what `built` records;
//! * local trees (`runtime.plugin.path`, `runtime.vllm.path`): the files git would commit
//!   (`git ls-files --cached --others --exclude-standard`, so ignored build artefacts stay out)
//!   or, outside git, every file but the `code/` ignore list; their commit and dirty flag;
//! * wheels (`runtime.vllm.wheel`, a path or a glob that must match `vllm-*.whl`, and
//!   `runtime.wheels`, which must exist and must not be vLLM), checked by
//!   [`tt_model_manifest::sources`], the checks `lint --check-sources` runs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use tt_model_manifest::sources::{self, WheelRole};

use crate::digest::normal_mode;
use crate::error::PackageError;
use crate::stage::{TreeFile, code_ignored};

/// A git source pinned to a commit: the type `built.extra_code` records.
pub use tt_model_manifest::wire::GitPin;

fn git_cmd() -> Command {
    let mut c = Command::new("git");
    // Never wait for a password on a terminal; a private repo without credentials is an error.
    c.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    c
}

fn run_git(
    field: &str,
    repo: &str,
    git_ref: &str,
    cmd: &mut Command,
) -> Result<String, PackageError> {
    let out = cmd.output().map_err(|e| PackageError::GitSource {
        field: field.to_string(),
        repo: repo.to_string(),
        git_ref: git_ref.to_string(),
        detail: format!("could not run git: {e}"),
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let detail = stderr
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .unwrap_or("git failed")
            .to_string();
        return Err(PackageError::GitSource {
            field: field.to_string(),
            repo: repo.to_string(),
            git_ref: git_ref.to_string(),
            detail,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether `s` is `min..=40` lowercase-or-uppercase hex digits.
fn is_hex(s: &str, min: usize) -> bool {
    (min..=40).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// The sha `ls-remote` output names for a ref: the peeled tag (`<ref>^{}`) when there is one,
/// else the ref itself. Pure, for tests.
pub fn sha_from_ls_remote(output: &str) -> Option<String> {
    let rows: Vec<(&str, &str)> = output.lines().filter_map(|l| l.split_once('\t')).collect();
    rows.iter()
        .find(|(_, name)| name.ends_with("^{}"))
        .or_else(|| rows.first())
        .map(|(sha, _)| sha.to_string())
        .filter(|s| is_hex(s, 40))
}

/// Fetches `git_ref` of `repo` into a new checkout at `dest` and returns the pinned commit.
/// `field` names the manifest key in errors (`runtime.plugin`, …).
pub fn fetch_pinned(
    field: &str,
    repo: &str,
    git_ref: &str,
    dest: &Path,
) -> Result<GitPin, PackageError> {
    let fail = |detail: String| PackageError::GitSource {
        field: field.to_string(),
        repo: repo.to_string(),
        git_ref: git_ref.to_string(),
        detail,
    };
    let listed = run_git(
        field,
        repo,
        git_ref,
        git_cmd().args(["ls-remote", "--", repo, git_ref, &format!("{git_ref}^{{}}")]),
    )
    .map_err(|e| match e {
        PackageError::GitSource { detail, .. } => {
            fail(format!("the repository is unreachable: {detail}"))
        }
        other => other,
    })?;
    std::fs::create_dir_all(dest).map_err(PackageError::io("Creating", dest))?;
    let in_dest = |args: &[&str]| {
        let mut c = git_cmd();
        c.arg("-C").arg(dest).args(args);
        c
    };
    run_git(field, repo, git_ref, &mut in_dest(&["init", "-q"]))?;
    let want = match sha_from_ls_remote(&listed) {
        Some(sha) => sha,
        None if is_hex(git_ref, 40) => git_ref.to_ascii_lowercase(),
        None if is_hex(git_ref, 7) => {
            // A short sha: look it up among the repository's commits (blobless, so cheap).
            run_git(
                field,
                repo,
                git_ref,
                &mut in_dest(&[
                    "fetch",
                    "-q",
                    "--filter=blob:none",
                    repo,
                    "+refs/*:refs/src/*",
                ]),
            )?;
            run_git(
                field,
                repo,
                git_ref,
                &mut in_dest(&[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("{git_ref}^{{commit}}"),
                ]),
            )
            .map_err(|_| fail("no branch, tag or commit has that name".into()))?
        }
        None => {
            return Err(fail(
                "no branch or tag has that name (git ls-remote found nothing) and it is not a commit sha".into(),
            ));
        }
    };
    run_git(
        field,
        repo,
        git_ref,
        &mut in_dest(&["fetch", "-q", "--depth", "1", repo, &want]),
    )
    .map_err(|e| match e {
        PackageError::GitSource { detail, .. } => {
            fail(format!("commit {want} could not be fetched: {detail}"))
        }
        other => other,
    })?;
    run_git(
        field,
        repo,
        git_ref,
        &mut in_dest(&[
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "-q",
            "FETCH_HEAD",
        ]),
    )?;
    if dest.join(".gitmodules").is_file() {
        run_git(
            field,
            repo,
            git_ref,
            &mut in_dest(&[
                "submodule",
                "update",
                "-q",
                "--init",
                "--recursive",
                "--depth",
                "1",
            ]),
        )?;
    }
    let sha = run_git(field, repo, git_ref, &mut in_dest(&["rev-parse", "HEAD"]))?;
    Ok(GitPin {
        repo: repo.to_string(),
        git_ref: git_ref.to_string(),
        sha,
    })
}

/// A local source tree's commit and dirty flag (`None` outside git or not its top).
pub fn local_commit(root: &Path) -> (Option<String>, Option<bool>) {
    let git = |args: &[&str]| {
        git_cmd()
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    if !is_git_top(root) {
        return (None, None);
    }
    let sha = git(&["rev-parse", "HEAD"]);
    let dirty = git(&["status", "--porcelain"]).map(|s| !s.is_empty());
    (sha, dirty)
}

fn is_git_top(root: &Path) -> bool {
    let top = git_cmd()
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    match (top.and_then(|t| t.canonicalize().ok()), root.canonicalize()) {
        (Some(t), Ok(r)) => t == r,
        _ => false,
    }
}

/// The files of a local Python project to stage (`runtime.plugin.path`, `runtime.vllm.path`):
/// it must hold `pyproject.toml` or `setup.py` (the check lint runs, [`sources::check_project`]).
pub fn list_project(field: &str, root: &Path) -> Result<Vec<TreeFile>, PackageError> {
    sources::check_project(field, &root.to_string_lossy(), root)?;
    let rels: Vec<String> = if is_git_top(root) {
        let out = git_cmd()
            .arg("-C")
            .arg(root)
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output()
            .map_err(PackageError::io("Listing the files of", root))?;
        String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    } else {
        walkdir::WalkDir::new(root)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| {
                e.depth() == 0 || {
                    let name = e.file_name().to_string_lossy();
                    name != ".git" && !code_ignored(&name)
                }
            })
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                e.path()
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    };
    let mut files = Vec::new();
    for rel in rels {
        let source = root.join(&rel);
        // A deleted-but-tracked file is listed by --cached; it is not part of the tree.
        let Ok(meta) = std::fs::metadata(&source) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        files.push(TreeFile {
            rel,
            source,
            mode: normal_mode(meta.permissions().mode()),
            size: meta.len(),
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(files)
}

/// Everything fetched or listed for one package, kept alive (the checkouts live in `_dir`)
/// until the context has been streamed.
#[derive(Debug)]
pub struct Fetched {
    /// Git-mode tt-metal: the pin and its checkout.
    pub metal: Option<(GitPin, PathBuf)>,
    /// The `extra_code` roots with git roots replaced by their checkouts.
    pub extra_code: Vec<crate::spec::ResolvedExtraCode>,
    /// The pins of git `extra_code` roots, in manifest order.
    pub extra_pins: Vec<GitPin>,
    /// `plugin-src/` in the context (a local plugin or a git one), and what `built.plugin`
    /// records.
    pub plugin: Option<(Vec<TreeFile>, ComponentBuild)>,
    /// `vllm-src/` in the context (`vllm.path`, or the fork at its commit), and
    /// `built.vllm`.
    pub vllm: Option<(Vec<TreeFile>, ComponentBuild)>,
    /// `wheels/` in the context: the vLLM wheel (`vllm.wheel`), by file name.
    pub vllm_wheels: Vec<(String, PathBuf)>,
    /// `wheels/extra/` in the context: `runtime.wheels`, by file name.
    pub extra_wheels: Vec<(String, PathBuf)>,
    _dir: Option<tempfile::TempDir>,
}

pub use tt_model_manifest::wire::ComponentBuild;

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn checkout_files(root: &Path) -> Result<Vec<TreeFile>, PackageError> {
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(root)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || e.file_name() != ".git")
    {
        let e = e.map_err(|e| PackageError::Io {
            action: "Walking",
            path: e.path().unwrap_or(root).to_path_buf(),
            source: e
                .into_io_error()
                .unwrap_or_else(|| std::io::Error::other("walk")),
        })?;
        if !e.file_type().is_file() {
            continue;
        }
        let meta = e.metadata().map_err(|err| PackageError::Io {
            action: "Reading",
            path: e.path().to_path_buf(),
            source: err
                .into_io_error()
                .unwrap_or_else(|| std::io::Error::other("metadata")),
        })?;
        files.push(TreeFile {
            rel: e
                .path()
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .into_owned(),
            source: e.path().to_path_buf(),
            mode: normal_mode(meta.permissions().mode()),
            size: meta.len(),
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(files)
}

/// A local project directory (`runtime.plugin.path`, `runtime.vllm.path`): its files and
/// what `built` records (the checkout's commit and dirty flag when it is a git top).
fn local_component(
    field: &str,
    path: &str,
) -> Result<(Vec<TreeFile>, ComponentBuild), PackageError> {
    let root = Path::new(path);
    let files = list_project(field, root)?;
    let (sha, dirty) = local_commit(root);
    Ok((
        files,
        ComponentBuild {
            sha,
            path: Some(path.to_string()),
            dirty,
            ..Default::default()
        },
    ))
}

/// A git source checked out at its ref pinned to a commit, into `dest`: its files and what
/// `built` records.
fn git_component(
    field: &str,
    repo: &str,
    git_ref: &str,
    dest: &Path,
) -> Result<(Vec<TreeFile>, ComponentBuild), PackageError> {
    let pin = fetch_pinned(field, repo, git_ref, dest)?;
    Ok((
        checkout_files(dest)?,
        ComponentBuild {
            sha: Some(pin.sha),
            repo: Some(repo.to_string()),
            ..Default::default()
        },
    ))
}

/// Fetches and lists every source of `spec` other than a local tt-metal tree. Checkouts go
/// into a temporary directory in `scratch_parent` named with `scratch_prefix` (so a killed
/// run's leftovers are swept like its partial output).
pub fn fetch_sources(
    spec: &crate::spec::PackageSpec,
    scratch_parent: &Path,
    scratch_prefix: &str,
) -> Result<Fetched, PackageError> {
    use crate::spec::{ComponentSource, MetalSource};
    let needs_dir = matches!(spec.metal, MetalSource::Git { .. })
        || spec.extra_code.iter().any(|e| e.git.is_some())
        || matches!(spec.runtime.plugin(), Some(ComponentSource::Git { .. }))
        || matches!(spec.runtime.vllm(), Some(ComponentSource::Git { .. }));
    let dir = if needs_dir {
        Some(
            tempfile::Builder::new()
                .prefix(scratch_prefix)
                .tempdir_in(scratch_parent)
                .map_err(PackageError::io(
                    "Creating a checkout directory in",
                    scratch_parent,
                ))?,
        )
    } else {
        None
    };
    let scratch = |name: &str| {
        dir.as_ref()
            .expect("created when a git source exists")
            .path()
            .join(name)
    };
    let metal = match &spec.metal {
        MetalSource::Git(g) => {
            let dest = scratch("tt-metal");
            let pin = fetch_pinned("source.tt_metal", &g.repo, &g.git_ref, &dest)?;
            Some((pin, dest))
        }
        MetalSource::Local { .. } => None,
    };
    let mut extra_code = Vec::new();
    let mut extra_pins = Vec::new();
    for (i, e) in spec.extra_code.iter().enumerate() {
        let mut e = e.clone();
        if let Some(g) = &e.git {
            let dest = scratch(&format!("extra-code-{i}"));
            let field = format!("source.extra_code[{i}].root");
            extra_pins.push(fetch_pinned(&field, &g.repo, &g.git_ref, &dest)?);
            e.root = dest;
        }
        extra_code.push(e);
    }
    let plugin = match spec.runtime.plugin() {
        Some(ComponentSource::Path { path }) => Some(local_component("runtime.plugin.path", path)?),
        Some(ComponentSource::Git { repo, git_ref }) => Some(git_component(
            "runtime.plugin",
            repo,
            git_ref,
            &scratch("plugin"),
        )?),
        _ => None,
    };
    let mut vllm_wheels = Vec::new();
    let vllm = match spec.runtime.vllm() {
        Some(ComponentSource::Path { path }) => Some(local_component("runtime.vllm.path", path)?),
        Some(ComponentSource::Git { repo, git_ref }) => Some(git_component(
            "runtime.vllm",
            repo,
            git_ref,
            &scratch("vllm"),
        )?),
        Some(ComponentSource::Wheel { wheel }) => {
            // The entry is resolved already; lint checked the same with the same rules.
            let field = "runtime.vllm.wheel";
            let role = WheelRole::Vllm;
            for w in sources::check_wheels(field, field, wheel, Path::new(wheel), role)? {
                vllm_wheels.push((file_name(&w), w));
            }
            None
        }
        _ => None,
    };
    let mut extra_wheels = Vec::new();
    for (i, entry) in spec.runtime.wheels().iter().enumerate() {
        let field = format!("runtime.wheels[{i}]");
        let (label, role) = ("runtime.wheels entry", WheelRole::Extra);
        for w in sources::check_wheels(&field, label, entry, Path::new(entry), role)? {
            extra_wheels.push((file_name(&w), w));
        }
    }
    Ok(Fetched {
        metal,
        extra_code,
        extra_pins,
        plugin,
        vllm,
        vllm_wheels,
        extra_wheels,
        _dir: dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ls_remote_prefers_the_peeled_tag() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        assert_eq!(
            sha_from_ls_remote(&format!("{a}\trefs/tags/v1\n{b}\trefs/tags/v1^{{}}\n")),
            Some(b.clone())
        );
        assert_eq!(
            sha_from_ls_remote(&format!("{a}\trefs/heads/main\n")),
            Some(a)
        );
        assert_eq!(sha_from_ls_remote(""), None);
        assert_eq!(sha_from_ls_remote("zz\trefs/heads/x\n"), None);
    }

    /// A bare repository with one commit on `main` and an annotated tag `v1` on it, then a
    /// second commit on `main`. Returns (url, v1's commit, main's commit).
    fn repo(dir: &Path) -> (String, String, String) {
        let work = dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(&work)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(work.join("a"), "1").unwrap();
        git(&["add", "a"]);
        git(&["commit", "-q", "-m", "one"]);
        git(&["tag", "-a", "v1", "-m", "v1"]);
        let v1 = git(&["rev-parse", "HEAD"]);
        std::fs::write(work.join("a"), "2").unwrap();
        git(&["commit", "-qam", "two"]);
        let main = git(&["rev-parse", "HEAD"]);
        let bare = dir.join("r.git");
        git(&["clone", "-q", "--bare", ".", bare.to_str().unwrap()]);
        (format!("file://{}", bare.display()), v1, main)
    }

    #[test]
    fn refs_pin_to_commits_and_bad_sources_name_their_field() {
        let tmp = tempfile::tempdir().unwrap();
        let (url, v1, main) = repo(tmp.path());
        let pin = fetch_pinned("runtime.plugin", &url, "main", &tmp.path().join("c1")).unwrap();
        assert_eq!(pin.sha, main);
        let pin = fetch_pinned("runtime.plugin", &url, "v1", &tmp.path().join("c2")).unwrap();
        assert_eq!(pin.sha, v1, "the peeled tag, not the tag object");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("c2/a")).unwrap(),
            "1"
        );
        let pin = fetch_pinned("runtime.plugin", &url, &v1[..9], &tmp.path().join("c3")).unwrap();
        assert_eq!(pin.sha, v1, "a short sha resolves to the full one");
        let err = fetch_pinned("source.tt_metal", &url, "nope", &tmp.path().join("c4"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("`source.tt_metal`: "), "{err}");
        assert!(err.contains("no branch or tag has that name"), "{err}");
        let gone = format!("file://{}", tmp.path().join("missing.git").display());
        let err = fetch_pinned("runtime.vllm", &gone, "main", &tmp.path().join("c5"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("the repository is unreachable"), "{err}");
    }
}
