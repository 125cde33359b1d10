//! `runtime.cargo` builds on a real (tiny, dependency-free) Cargo workspace: the facts
//! recorded for a static binary, the workspace's git state, and the compiler's first error
//! when the code does not compile.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};
use tt_model_package::PackageError;
use tt_model_package::cargo_bin::{build, elf_is_static};
use tt_model_package::spec::CargoBinary;

struct Workspace(PathBuf);

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A one-binary package `hello-srv` 0.3.1 whose `main` is `body`, with its lock file.
fn workspace(tag: &str, body: &str) -> Workspace {
    let dir = std::env::temp_dir().join(format!("tt-model-cargo-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        // Line tables in release, as this repository's own profile has them: package drops them.
        "[package]\nname = \"hello-srv\"\nversion = \"0.3.1\"\nedition = \"2021\"\n\n[workspace]\n\n[profile.release]\ndebug = \"line-tables-only\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), body).unwrap();
    run_ok(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["generate-lockfile", "--offline"])
            .current_dir(&dir),
    );
    Workspace(dir)
}

/// Runs `cmd`, asserting it succeeded.
fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn spec(dir: &Path, package: &str) -> CargoBinary {
    CargoBinary {
        workspace: dir.to_string_lossy().into_owned(),
        package: package.into(),
        bin: None,
        features: vec![],
    }
}

fn git(dir: &Path, args: &[&str]) {
    run_ok(
        Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(dir),
    );
}

/// The section names of a 64-bit little-endian ELF file (its section header table).
fn section_names(elf: &[u8]) -> Vec<String> {
    let u16_at = |o: usize| usize::from(u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()));
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28), u16_at(0x3A), u16_at(0x3C), u16_at(0x3E));
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(header(shstrndx) + 0x18);
    (0..shnum)
        .map(|i| {
            let name = &elf[strtab + u32_at(header(i))..];
            let end = name.iter().position(|&b| b == 0).unwrap();
            String::from_utf8_lossy(&name[..end]).into_owned()
        })
        .collect()
}

#[test]
fn a_static_binary_and_its_provenance() {
    let ws = workspace(
        "ok",
        "fn main() { println!(\"hello from a static binary\"); }\n",
    );
    let mut log = Vec::new();
    let out = build(&spec(&ws.0, "hello-srv"), &mut |l| log.push(l.to_owned())).unwrap();
    let f = &out.facts;
    assert_eq!(
        (f.package.as_str(), f.version.as_str(), f.bin.as_str()),
        ("hello-srv", "0.3.1", "hello-srv")
    );
    assert_eq!(f.path, "/usr/local/bin/hello-srv");
    assert_eq!(f.profile, "release");
    assert!(f.static_link && f.rustc.starts_with("rustc "), "{f:?}");
    let bytes = std::fs::read(&out.binary).unwrap();
    assert_eq!(elf_is_static(&bytes), Some(true), "no ELF interpreter");
    assert_eq!(f.sha256, format!("{:x}", Sha256::digest(&bytes)));
    assert_eq!(f.bytes, bytes.len() as u64);
    let lock = std::fs::read(ws.0.join("Cargo.lock")).unwrap();
    assert_eq!(f.cargo_lock_sha256, format!("{:x}", Sha256::digest(&lock)));
    assert_eq!(f.workspace_commit, None, "not a git checkout");
    assert!(
        log[0].starts_with(
            "+ CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=debuginfo cargo build --release --locked --workspace --bin hello-srv --target "
        ),
        "{log:?}"
    );
    // Shipped without line tables (the workspace profile keeps them): no DWARF section names.
    assert!(!f.debuginfo, "{f:?}");
    let sections = section_names(&bytes);
    assert!(sections.iter().any(|n| n == ".text"), "{sections:?}");
    assert!(
        !sections.iter().any(|n| n.starts_with(".debug_")),
        "the shipped binary carries debuginfo: {sections:?}"
    );
    let run = Command::new(&out.binary).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "hello from a static binary\n"
    );

    // A git checkout: its commit, clean, then dirty once a tracked file changes.
    git(&ws.0, &["init", "-q"]);
    git(&ws.0, &["add", "-A"]);
    git(&ws.0, &["commit", "-qm", "x"]);
    let clean = build(&spec(&ws.0, "hello-srv"), &mut |_| {}).unwrap().facts;
    assert_eq!(clean.workspace_commit.as_deref().map(str::len), Some(40));
    assert!(!clean.workspace_dirty);
    assert_eq!(
        clean.sha256, f.sha256,
        "a no-op rebuild gives the same bytes"
    );
    std::fs::write(
        ws.0.join("src/main.rs"),
        "fn main() { println!(\"changed\"); }\n",
    )
    .unwrap();
    let dirty = build(&spec(&ws.0, "hello-srv"), &mut |_| {}).unwrap().facts;
    assert!(dirty.workspace_dirty);
    assert_ne!(dirty.sha256, f.sha256);
}

#[test]
fn a_compile_error_stops_with_the_compilers_first_error() {
    let ws = workspace(
        "err",
        "fn main() {\n    let x: u32 = \"text\";\n    let y: u8 = 1.5;\n}\n",
    );
    let err = build(&spec(&ws.0, "hello-srv"), &mut |_| {}).unwrap_err();
    let PackageError::CargoBuild {
        package,
        first_error,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(package, "hello-srv");
    assert!(
        first_error.starts_with("error[E0308]: mismatched types"),
        "{first_error}"
    );
    assert!(
        first_error.contains("src/main.rs:2:"),
        "the first error: {first_error}"
    );
    assert!(
        !first_error.contains("src/main.rs:3:"),
        "only the first: {first_error}"
    );
    assert!(
        err.to_string()
            .starts_with("`runtime.cargo`: building `hello-srv` failed:\nerror[E0308]")
    );
}

#[test]
fn an_unknown_package_or_a_missing_workspace_is_named() {
    let ws = workspace("pkg", "fn main() {}\n");
    let err = build(&spec(&ws.0, "nope"), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the workspace has no package `nope` (runtime.cargo.package)"),
        "{err}"
    );
    let err = build(&spec(&ws.0.join("missing"), "x"), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("has no Cargo.toml"), "{err}");
}

/// The shipped binary's dependencies get the features the whole workspace gives them (its
/// `cargo build` and `cargo test --workspace`), not only what its own package asks for: a
/// dependency feature only another member turns on is on in the shipped binary too, and only
/// the package's own feature of a name two members share is on.
#[test]
fn dependencies_get_the_workspaces_features() {
    let dir = std::env::temp_dir().join(format!("tt-model-cargo-unify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ws = Workspace(dir.clone());
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let package = |name: &str, deps: &str, features: &str| {
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{deps}\n[features]\n{features}\n"
        )
    };
    write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"srv\", \"other\", \"flag\"]\nresolver = \"2\"\n",
    );
    write("flag/Cargo.toml", &package("flag", "", "on = []\n"));
    write(
        "flag/src/lib.rs",
        "pub fn on() -> bool { cfg!(feature = \"on\") }\n",
    );
    write(
        "srv/Cargo.toml",
        &package("srv", "flag = { path = \"../flag\" }\n", "loud = []\n"),
    );
    write(
        "srv/src/main.rs",
        "fn main() { println!(\"flag {} loud {}\", flag::on(), cfg!(feature = \"loud\")); }\n",
    );
    write(
        "other/Cargo.toml",
        &package(
            "other",
            "flag = { path = \"../flag\", features = [\"on\"] }\n",
            "loud = []\n",
        ),
    );
    write(
        "other/src/main.rs",
        "fn main() { assert!(flag::on() && cfg!(feature = \"loud\")); }\n",
    );
    run_ok(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["generate-lockfile", "--offline"])
            .current_dir(&dir),
    );
    let mut s = spec(&ws.0, "srv");
    s.features = vec!["loud".into()];
    let mut log = Vec::new();
    let out = build(&s, &mut |l| log.push(l.to_owned())).unwrap();
    assert!(
        log[0].contains("--workspace --bin srv --target ")
            && log[0].contains("--features srv/loud"),
        "{log:?}"
    );
    let run = Command::new(&out.binary).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "flag true loud true\n"
    );
    // Only the one binary was built: the other member's is not there.
    assert!(!out.binary.with_file_name("other").exists(), "{out:?}");
}
