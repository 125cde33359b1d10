//! `package` locates its source problems as `lint --check-sources` does: the same finding at
//! the same `tt-model.yaml:LINE:COL`, with `~/` paths judged the same way by both.

use crate::common;

use common::{TempDir, repo_root, stderr, stdout, tt_model};

/// No engine listens here: a package that gets past its checks fails on the engine.
const NO_ENGINE: (&str, &str) = (
    "DOCKER_HOST",
    "unix:///nonexistent/tt-model-test/docker.sock",
);

/// minimal-http with its tree at `~/tt-metal` and `code` as given.
fn manifest(code: &str) -> String {
    std::fs::read_to_string(repo_root().join("examples/minimal-http/tt-model.yaml"))
        .unwrap()
        .replace(
            "tt_metal: ../../tests/fixtures/tt-metal-tree",
            "tt_metal: ~/tt-metal",
        )
        .replace("code: [models/demos/minimal_http]", code)
}

/// A HOME under `t` that holds the fixture tree at `~/tt-metal`, so `~/tt-metal` resolves
/// there for lint and package alike; returns the HOME.
fn home_with_tree(t: &std::path::Path) -> String {
    let home = t.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::os::unix::fs::symlink(
        repo_root().join("tests/fixtures/tt-metal-tree"),
        home.join("tt-metal"),
    )
    .unwrap();
    home.to_str().unwrap().to_string()
}

/// `file:LINE:COL` of the first occurrence of `needle` in `src` (1-based, as lint prints).
fn place(file: &str, src: &str, needle: &str) -> String {
    let (n, line) = src
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(needle))
        .expect("needle in the manifest");
    let col = line[..line.find(needle).unwrap()].chars().count() + 1;
    format!("{file}:{}:{col}", n + 1)
}

#[test]
fn a_missing_code_path_fails_package_where_lint_shows_it() {
    let tmp = TempDir::new("package-located");
    let t = &tmp.0;
    let home = home_with_tree(t);
    let home_env = ("HOME", home.as_str());
    let src = manifest("code: [models/demos/minimal_http, models/gone]");
    std::fs::write(t.join("tt-model.yaml"), &src).unwrap();
    let at = place("tt-model.yaml", &src, "models/gone");

    let lint = tt_model(
        t,
        &[home_env],
        &["lint", "--check-sources", "tt-model.yaml"],
    );
    let lint_out = stdout(&lint);
    assert_eq!(lint.status.code(), Some(1), "{lint_out}");
    assert!(lint_out.contains(&at), "lint at {at}:\n{lint_out}");
    assert!(lint_out.contains("error[source-missing]"), "{lint_out}");
    assert!(
        lint_out.contains("source.code path 'models/gone' does not exist under"),
        "{lint_out}"
    );

    let out = t.join("pkgs");
    let pkg = tt_model(
        t,
        &[home_env, NO_ENGINE],
        &[
            "package",
            "--container",
            "tt-model.yaml",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let err = stderr(&pkg);
    assert_eq!(pkg.status.code(), Some(1), "{err}");
    // The same located block lint prints: header, `--> file:line:col`, snippet, caret.
    let block = lint_out
        .split("\n\n")
        .find(|b| b.contains(&at))
        .expect("lint's block for the finding");
    assert!(
        err.contains(block.trim_end()),
        "package:\n{err}\nvs lint's block:\n{block}"
    );
    assert!(
        !out.exists(),
        "nothing is written for a manifest with errors"
    );
}

#[test]
fn home_paths_pass_lint_and_package_alike() {
    let tmp = TempDir::new("package-home");
    let t = &tmp.0;
    let home = home_with_tree(t);
    let home_env = ("HOME", home.as_str());
    std::fs::write(
        t.join("tt-model.yaml"),
        manifest("code: [models/demos/minimal_http]"),
    )
    .unwrap();
    let lint = tt_model(
        t,
        &[home_env],
        &["lint", "--check-sources", "tt-model.yaml"],
    );
    assert_eq!(lint.status.code(), Some(0), "{}", stdout(&lint));
    // package gets past every source check and stops only at the (absent) engine.
    let pkg = tt_model(
        t,
        &[home_env, NO_ENGINE],
        &["package", "--container", "tt-model.yaml"],
    );
    let err = stderr(&pkg);
    assert_eq!(pkg.status.code(), Some(1), "{err}");
    assert!(!err.contains("source-missing"), "{err}");
    assert!(err.contains("✗"), "the engine card: {err}");
}
