//! Scaffolding shared by the tests that drive the real `tt-model` binary against the real
//! engine: isolated state directories, the binary runner, the engine probe, the example
//! package under another name, and small HTTP/JSON helpers.
#![allow(dead_code)]

pub mod registry;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tt_model_testkit::hub::{FakeFile, FakeRepo};

/// The local base image `scripts/make-base-images.sh` builds (no registry here).
pub const BASE: &str = "local/busybox:tt-model";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A directory removed on drop (this crate has no tempfile dependency).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("tt-model-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary with every state directory inside `tmp`.
pub fn tt_model(tmp: &Path, extra_env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tt-model"));
    c.current_dir(tmp)
        .args(args)
        .env("NO_COLOR", "1")
        .env("TT_MODEL_HOME", tmp.join("state"))
        .env("XDG_CACHE_HOME", tmp.join("xdg"))
        .env("HF_HOME", tmp.join("hf"))
        .env("HF_HUB_CACHE", tmp.join("hub"))
        .env("TT_MODEL_ALLOC_LOCK", tmp.join("alloc.lock"))
        .env("TT_MODEL_NETWORK", "host")
        .env_remove("HF_TOKEN");
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    eprintln!(
        "$ tt-model {} ({})\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[allow(unused_imports)] // each test binary uses its own subset (login_hub needs no engine)
pub use tt_model_testkit::engine::engine_or_skip as engine;

/// Builds [`BASE`] if it is missing (idempotent).
pub fn make_base_images() {
    let base = Command::new("bash")
        .arg(repo_root().join("scripts/make-base-images.sh"))
        .output()
        .unwrap();
    assert!(
        base.status.success(),
        "{}",
        String::from_utf8_lossy(&base.stderr)
    );
}

/// `examples/minimal-http` as package `name` (its own image tag, so tests using other names
/// do not disturb each other), with the fixture tree as an absolute path. Returns the YAML.
pub fn example_yaml(dir: &Path, name: &str) -> PathBuf {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join("examples/minimal-http/tt-model.yaml")).unwrap();
    let fixture = root.join("tests/fixtures/tt-metal-tree");
    let text = text
        .replace("name: minimal-http", &format!("name: {name}"))
        .replace(
            "tt_metal: ../../tests/fixtures/tt-metal-tree",
            &format!("tt_metal: {}", fixture.display()),
        );
    assert!(text.contains(&format!("name: {name}")) && text.contains(&*fixture.to_string_lossy()));
    let path = dir.join("tt-model.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `tt-model package --container` of [`example_yaml`] as package `name` on [`BASE`], into
/// `tmp/out`; asserts it succeeded and returns the staged directory `tmp/out/<name>`.
pub fn package_example(tmp: &Path, env: &[(&str, &str)], name: &str) -> PathBuf {
    let yaml = example_yaml(tmp, name);
    let out_dir = tmp.join("out");
    let pkg = package(tmp, env, &yaml, &out_dir);
    assert!(pkg.status.success(), "{}", stderr(&pkg));
    out_dir.join(name)
}

/// `tt-model package --container <yaml> --base-image BASE --out <out_dir>`, run in `tmp`.
pub fn package(tmp: &Path, env: &[(&str, &str)], yaml: &Path, out_dir: &Path) -> Output {
    tt_model(
        tmp,
        env,
        &[
            "package",
            "--container",
            yaml.to_str().unwrap(),
            "--base-image",
            BASE,
            "--out",
            out_dir.to_str().unwrap(),
        ],
    )
}

pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// The `list --json` row of `id`.
pub fn row<'a>(rows: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} is listed: {rows}"))
}

pub fn free_port() -> String {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string()
}

/// The raw HTTP/1.0 response of `GET /health` on 127.0.0.1:`port`.
pub fn health(port: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    write!(s, "GET /health HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// The weights `examples/minimal-http` pins (`acme/minimal-http-weights@0123…`), as a Hub repo.
pub fn example_weights_repo() -> FakeRepo {
    let mut weights = FakeRepo::new(
        "acme/minimal-http-weights",
        vec![FakeFile::lfs("model.safetensors", vec![1u8; 4096])],
    );
    weights.commit = "0123456789abcdef0123456789abcdef01234567".into();
    weights
}

/// Every file under `dir` as a Hub repo file; OCI blobs go to LFS.
pub fn repo_files(dir: &Path, under: &str, out: &mut Vec<FakeFile>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let rel = if under.is_empty() {
            name
        } else {
            format!("{under}/{name}")
        };
        if e.file_type().unwrap().is_dir() {
            repo_files(&e.path(), &rel, out);
        } else {
            let bytes = std::fs::read(e.path()).unwrap();
            out.push(if rel.starts_with("image/blobs/") {
                FakeFile::lfs(&rel, bytes)
            } else {
                FakeFile::regular(&rel, bytes)
            });
        }
    }
}

/// Copies every file under `src` to `dest` (skipping `__pycache__`).
pub fn copy_tree(src: &Path, dest: &Path) {
    for e in walk(src) {
        let rel = e.strip_prefix(src).unwrap();
        let to = dest.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&e, &to).unwrap();
    }
}

/// Every file under `dir`, recursively (skipping `__pycache__`).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "__pycache__") {
                continue;
            }
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
