//! `--out`: the staging root, usable from anywhere as the original's `./build` is.
//!
//! Package outputs (an OCI layout of the image, copies of the code) must never end up in
//! version control, but refusing every root inside a git checkout made the default `./build`
//! unusable in the one place users run the tool from (their model's repository). So a root
//! inside a checkout is accepted when it holds no tracked files, and gets a `.gitignore` of
//! `*` (as Python's venv and ruff do for theirs): git then never sees anything under it,
//! whatever the repository's own ignore rules say. A root that holds tracked files (the
//! checkout itself, a source folder) is still refused: the outputs would mix with sources.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::PackageError;

/// What the root's `.gitignore` holds: ignore everything, this file included.
pub const GITIGNORE: &str =
    "# written by tt-model package: outputs stay out of version control\n*\n";

/// Resolves `out_root` to an absolute path and, inside a git checkout, keeps it out of git
/// (see the module docs); refuses a root that holds tracked files.
pub fn check_out_root(out_root: &Path) -> Result<PathBuf, PackageError> {
    let abs = if out_root.is_absolute() {
        out_root.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(PackageError::io(
                "Reading the current directory for",
                out_root,
            ))?
            .join(out_root)
    };
    let Some(top) = abs.ancestors().find(|d| d.join(".git").exists()) else {
        return Ok(abs);
    };
    if abs == top || holds_tracked_files(top, &abs) {
        return Err(PackageError::OutInsideGit(abs));
    }
    std::fs::create_dir_all(&abs).map_err(PackageError::io("Creating", &abs))?;
    let ignore = abs.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, GITIGNORE).map_err(PackageError::io("Writing", &ignore))?;
    }
    Ok(abs)
}

/// Whether git tracks any file under `dir` in the checkout at `top`. Without a usable `git`
/// the answer is read from the folder: anything in it but our own `.gitignore` may be tracked.
fn holds_tracked_files(top: &Path, dir: &Path) -> bool {
    let listed = Command::new("git")
        .arg("-C")
        .arg(top)
        .args(["ls-files", "-z", "--"])
        .arg(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success());
    match listed {
        Some(out) => !out.stdout.is_empty(),
        None => std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| e.file_name() != ".gitignore")
        }),
    }
}
