//! `stage_code` keeps to its roots on its own: `PackageSpec` is public, so a spec that never
//! went through the manifest lint must not read or write outside the tree or the staging
//! folder (`..`, absolute paths, symlinks that point out).

use crate::common;

use std::path::{Path, PathBuf};

use tt_model_package::PackageError;
use tt_model_package::spec::{PackageSpec, ResolvedExtraCode};
use tt_model_package::stage::stage_code;

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(dir).unwrap().to_path_buf())
        .collect();
    out.sort();
    out
}

/// A scratch area: `tree/` (the root, with one legit file), `outside/` (a secret beside it),
/// and `work/stage/code` (the staging destination) one level deeper, so `../x` from the
/// destination lands in `work/`, which must stay empty but for `stage/`.
struct Scratch {
    _dir: tempfile::TempDir,
    tree: PathBuf,
    outside: PathBuf,
    work: PathBuf,
    dest: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let outside = dir.path().join("outside");
    let work = dir.path().join("work");
    std::fs::create_dir_all(tree.join("models/ok")).unwrap();
    std::fs::write(tree.join("models/ok/model.py"), "print(1)\n").unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "not yours\n").unwrap();
    std::fs::create_dir_all(&work).unwrap();
    Scratch {
        dest: work.join("stage/code"),
        _dir: dir,
        tree,
        outside,
        work,
    }
}

fn spec_with(code: Vec<String>, extra: Vec<ResolvedExtraCode>) -> PackageSpec {
    let mut s = common::http_server();
    s.code = code;
    s.extra_code = extra;
    s
}

/// Stages `spec` and asserts it is refused and that nothing landed outside the staging
/// folder, nor anything from `outside/` inside it.
///
/// The files on disk are checked before the result, so a check that let the spec through
/// fails on what it wrote, not only on the missing error.
fn assert_refused(s: &Scratch, spec: &PackageSpec, what: &str) {
    let result = stage_code(spec, &s.tree, &s.dest);
    let everything = files_under(&s.work);
    assert!(
        everything.iter().all(|p| p.starts_with("stage/code")),
        "{what}: written outside the staging folder: {everything:?}"
    );
    assert!(
        !everything
            .iter()
            .any(|p| p.file_name().is_some_and(|n| n == "secret.txt")),
        "{what}: a file from outside the root was staged: {everything:?}"
    );
    assert_eq!(
        files_under(&s.outside),
        vec![PathBuf::from("secret.txt")],
        "{what}"
    );
    let err = result.expect_err(what);
    assert!(matches!(err, PackageError::Field(_)), "{what}: {err:?}");
}

#[test]
fn dot_dot_in_code_is_refused() {
    let s = scratch();
    assert_refused(
        &s,
        &spec_with(vec!["../outside".into()], vec![]),
        "../outside",
    );
}

#[test]
fn dot_dot_in_extra_code_is_refused() {
    let s = scratch();
    let extra = ResolvedExtraCode {
        root: s.tree.join("models"),
        paths: vec!["a/../../../outside".into()],
        git: None,
    };
    std::fs::create_dir_all(s.tree.join("models/a")).unwrap();
    assert_refused(&s, &spec_with(vec![], vec![extra]), "a/../../x");
}

#[test]
fn absolute_paths_are_refused() {
    let s = scratch();
    let abs = s.outside.to_string_lossy().into_owned();
    assert_refused(&s, &spec_with(vec![abs], vec![]), "absolute");
}

#[test]
fn an_entry_that_is_a_symlink_out_of_the_tree_is_refused() {
    let s = scratch();
    std::os::unix::fs::symlink(&s.outside, s.tree.join("models/escape")).unwrap();
    assert_refused(
        &s,
        &spec_with(vec!["models/escape".into()], vec![]),
        "entry symlink",
    );
}

#[test]
fn a_symlink_out_of_the_tree_inside_an_entry_is_refused() {
    let s = scratch();
    std::os::unix::fs::symlink(
        s.outside.join("secret.txt"),
        s.tree.join("models/ok/leak.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&s.outside, s.tree.join("models/ok/leakdir")).unwrap();
    assert_refused(
        &s,
        &spec_with(vec!["models/ok".into()], vec![]),
        "nested symlink",
    );
}

#[test]
fn symlinks_that_stay_inside_the_tree_are_followed() {
    let s = scratch();
    std::fs::create_dir_all(s.tree.join("shared")).unwrap();
    std::fs::write(s.tree.join("shared/util.py"), "x = 1\n").unwrap();
    std::os::unix::fs::symlink(s.tree.join("shared"), s.tree.join("models/ok/shared")).unwrap();
    let stage = stage_code(
        &spec_with(vec!["models/ok".into()], vec![]),
        &s.tree,
        &s.dest,
    )
    .unwrap();
    let paths: Vec<&str> = stage.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["models/ok/model.py", "models/ok/shared/util.py"]);
}

/// `..` after a symlink that points deeper: the source climbs out of the link's target and
/// lands back inside the tree (so resolving it finds nothing wrong), while the same `..`
/// steps, replayed under the staging folder where `models/deep` is a plain directory, climb
/// out of it. Only the lexical refusal of `..` stops this one.
#[test]
fn dot_dot_after_a_symlink_that_points_deeper_is_refused() {
    let s = scratch();
    std::fs::create_dir_all(s.tree.join("models/a/b/c/d")).unwrap();
    std::os::unix::fs::symlink("a/b/c/d", s.tree.join("models/deep")).unwrap();
    std::fs::create_dir_all(s.tree.join("models/x")).unwrap();
    std::fs::write(s.tree.join("models/x/planted.py"), "print(2)\n").unwrap();
    let entry = "models/deep/../../../../x";
    assert!(
        std::fs::canonicalize(s.tree.join(entry))
            .unwrap()
            .starts_with(std::fs::canonicalize(&s.tree).unwrap()),
        "the premise: the source resolves inside the tree"
    );
    assert_refused(&s, &spec_with(vec![entry.into()], vec![]), entry);
}

/// A root's path is a prefix, as a string, of a sibling's whose name extends it (`tree` and
/// `tree-evil`): containment is by path components, so a symlink into the sibling is out.
#[test]
fn a_symlink_into_a_sibling_whose_name_extends_the_root_is_refused() {
    let plant = |s: &Scratch| {
        let sibling = s.tree.with_file_name("tree-evil");
        std::fs::create_dir_all(&sibling).unwrap();
        std::fs::write(sibling.join("secret.txt"), "not yours either\n").unwrap();
        sibling
    };
    // Inside an entry (checked while walking) ...
    let s = scratch();
    let sibling = plant(&s);
    std::os::unix::fs::symlink(&sibling, s.tree.join("models/ok/evil")).unwrap();
    assert_refused(
        &s,
        &spec_with(vec!["models/ok".into()], vec![]),
        "nested symlink into tree-evil",
    );
    // ... and as the entry itself (checked before the walk).
    let s = scratch();
    let sibling = plant(&s);
    std::os::unix::fs::symlink(&sibling, s.tree.join("models/evil")).unwrap();
    assert_refused(
        &s,
        &spec_with(vec!["models/evil".into()], vec![]),
        "entry symlink into tree-evil",
    );
}
