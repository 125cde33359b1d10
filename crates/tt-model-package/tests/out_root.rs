//! `--out` inside and outside a git checkout (a real `git init`, real files).

use std::path::Path;
use std::process::Command;

use tt_model_package::error::PackageError;
use tt_model_package::out_root::{GITIGNORE, check_out_root};

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A checkout with one tracked file in `src/`.
fn checkout() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    git(tmp.path(), &["init", "-q"]);
    std::fs::create_dir(tmp.path().join("src")).unwrap();
    std::fs::write(tmp.path().join("src/model.py"), "x = 1\n").unwrap();
    git(tmp.path(), &["add", "src/model.py"]);
    git(tmp.path(), &["commit", "-q", "-m", "init"]);
    tmp
}

#[test]
fn an_untracked_root_inside_a_checkout_is_used_and_hidden_from_git() {
    let repo = checkout();
    let root = repo.path().join("build");
    assert_eq!(check_out_root(&root).unwrap(), root);
    assert_eq!(
        std::fs::read_to_string(root.join(".gitignore")).unwrap(),
        GITIGNORE
    );
    // Whatever lands there later, git does not see it.
    std::fs::create_dir_all(root.join("demo/image")).unwrap();
    std::fs::write(root.join("demo/image/index.json"), "{}").unwrap();
    let status = Command::new("git")
        .arg("-C")
        .arg(repo.path())
        .args(["status", "--porcelain", "--untracked-files=all"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    // A second package into the same root keeps working.
    assert_eq!(check_out_root(&root).unwrap(), root);
}

#[test]
fn a_root_holding_tracked_files_or_the_checkout_itself_is_refused() {
    let repo = checkout();
    for root in [repo.path().join("src"), repo.path().to_path_buf()] {
        let err = check_out_root(&root).unwrap_err();
        assert!(
            matches!(&err, PackageError::OutInsideGit(p) if *p == root),
            "{err}"
        );
    }
    assert!(!repo.path().join("src/.gitignore").exists());
}

#[test]
fn a_root_outside_any_checkout_gets_no_gitignore() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("out");
    assert_eq!(check_out_root(&root).unwrap(), root);
    assert!(!root.join(".gitignore").exists());
}
