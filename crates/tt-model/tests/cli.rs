//! The `tt-model` binary end to end: exit classes, `lint` formats, `schema`, `--version`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tt_model(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_manifest(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tt-model-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const GOOD: &str = "schema: \"5.1\"\nrepo: acme/m\nname: m\nweights: {repo: acme/w, revision: 0123456789abcdef0123456789abcdef01234567}\narch: blackhole\nsource: {tt_metal: tt, code: [models/m], ubuntu: \"22.04\", python: \"3.12\"}\nruntime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}\nserve: {hardware: p150, mesh_device: P150, max_num_seqs: 32, block_size: 64}\n";

#[test]
fn version_is_bare() {
    let o = tt_model(&["--version"]);
    assert!(o.status.success());
    let text = stdout(&o);
    let v = text.trim();
    assert!(
        v.split('.').count() == 3 && v.split('.').all(|p| p.parse::<u32>().is_ok()),
        "{v:?}"
    );
}

#[test]
fn examples_lint_clean() {
    let mut args = vec!["lint".to_owned()];
    for entry in std::fs::read_dir(root().join("examples")).unwrap() {
        let p = entry.unwrap().path().join("tt-model.yaml");
        if p.is_file() {
            args.push(p.strip_prefix(root()).unwrap().display().to_string());
        }
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = tt_model(&refs);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("0 errors"), "{}", stderr(&o));
}

#[test]
fn lint_exit_codes() {
    let good = temp_manifest("good.yaml", GOOD);
    let o = tt_model(&["lint", good.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("✓"), "{}", stderr(&o));

    let bad = temp_manifest(
        "bad.yaml",
        &GOOD.replace("mesh_device: P150", "mesh_devcie: P150"),
    );
    let o = tt_model(&["lint", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains("error[unknown-key]: unknown key `mesh_devcie` in `serve`"),
        "{out}"
    );
    assert!(
        out.contains("bad.yaml:8:25 at `serve.mesh_devcie`"),
        "{out}"
    );
    assert!(
        out.contains("^^^^^^^^^^^ did you mean `mesh_device`?"),
        "{out}"
    );
    assert!(!out.contains('\x1b'), "no ANSI escapes when piped");

    let warn = temp_manifest(
        "warn.yaml",
        &GOOD.replace(
            "revision: 0123456789abcdef0123456789abcdef01234567",
            "revision: main",
        ),
    );
    assert_eq!(
        tt_model(&["lint", warn.to_str().unwrap()]).status.code(),
        Some(0)
    );
    assert_eq!(
        tt_model(&["lint", "--deny-warnings", warn.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );

    // Usage errors and unreadable files are exit 2.
    assert_eq!(tt_model(&["lint"]).status.code(), Some(2));
    assert_eq!(
        tt_model(&["lint", "--format", "xml", good.to_str().unwrap()])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        tt_model(&["lint", "/nonexistent/tt-model.yaml"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn lint_github_annotations() {
    let bad = temp_manifest(
        "gh.yaml",
        &GOOD.replace("arch: blackhole", "arch: blakhole"),
    );
    let o = tt_model(&["lint", "--format", "github", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let line = out.lines().next().unwrap_or_default();
    assert!(line.starts_with("::error file="), "{out}");
    assert!(line.contains("gh.yaml,line=5,col=7,title=tt-model lint%3A invalid-value::`arch`: arch must be one of ('blackhole', 'wormhole_b0'), got 'blakhole' (did you mean `blackhole`?)"), "{out}");
}

#[test]
fn lint_json_report() {
    let bad = temp_manifest("j.yaml", &GOOD.replace("block_size: 64", "block_size: big"));
    let o = tt_model(&["lint", "--format", "json", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["errors"], 1);
    let d = &v["files"][0]["diagnostics"][0];
    assert_eq!(d["code"], "type");
    assert_eq!(d["path"], "serve.block_size");
    assert_eq!(d["line"], 8);
    assert_eq!(d["severity"], "error");
}

#[test]
fn lint_check_sources_resolves_against_the_working_directory() {
    let o = tt_model(&[
        "lint",
        "--check-sources",
        "examples/gr00t-n1.6-3b-p150/tt-model.yaml",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "the seed's sources are not on this machine"
    );
    assert!(
        stdout(&o).contains("error[source-missing]"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn schema_prints_and_writes_the_checked_in_file() {
    let o = tt_model(&["schema"]);
    assert!(o.status.success());
    let checked_in =
        std::fs::read_to_string(root().join("schemas/tt-model-5.1.schema.json")).unwrap();
    assert_eq!(stdout(&o), checked_in);
    let out = std::env::temp_dir().join(format!("tt-model-schema-{}.json", std::process::id()));
    let o = tt_model(&["schema", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), checked_in);
    std::fs::remove_file(out).unwrap();
}

#[test]
fn no_command_prints_help_and_exits_2() {
    let o = tt_model(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("Usage:"), "{}", stdout(&o));
}
