//! `runtime.cargo`: build the Rust binary an `http-server` image ships, on the build host.
//!
//! Why on the host and statically linked, not in a builder stage: a builder stage needs a Rust
//! toolchain image, and no image can be pulled where tt-model must work (air-gapped build hosts,
//! CI); the host that runs `tt-model package` already has the workspace's toolchain. A binary
//! linked with `-C target-feature=+crt-static` (glibc's static archive, no ELF interpreter) runs
//! on any base image — the busybox base, a distroless one, or the tt-metal runtime image — and
//! `package` checks that it has no interpreter before it ships it.
//!
//! The build is `cargo build --release --locked --workspace --bin <bin> --target <host triple>`:
//! `--locked` builds exactly the versions in `Cargo.lock`; the explicit target keeps these static
//! artifacts in their own directory (`target/<triple>/release`) beside the workspace's ordinary
//! builds, so a no-op re-package is a no-op `cargo build` (well under a second) and the same
//! bytes, which keeps the image's layer cache hit.
//!
//! `--workspace --bin <bin>` rather than `-p <package>`: Cargo resolves dependency features for
//! the packages selected, and `--workspace` selects every member while `--bin` still builds only
//! the one binary and what it depends on. The dependencies are then built with the features the
//! workspace's own `cargo build` and `cargo test --workspace` give them (what the tests ran is
//! what ships; `-p` alone left e.g. `serde_json`'s `preserve_order` out of the shipped
//! `gr00t-server` though every test ran with it), and any other binary of the workspace built the
//! same way shares every dependency unit with this one: `scripts/build.sh` builds the `tt-model`
//! CLI and `gr00t-server` in one invocation and `package` then finds the server built.
//!
//! The shipped binary carries no debuginfo: the workspace's release profile keeps line tables
//! (located panics on a developer's machine), which were 59 MB of the GR00T tiny image's 61.
//! The build overrides the profile through Cargo's own environment
//! (`CARGO_PROFILE_RELEASE_DEBUG=false`, `CARGO_PROFILE_RELEASE_STRIP=debuginfo`) rather than
//! stripping a copy afterwards: the file `built.cargo` hashes is the file cargo wrote and the
//! image ships, no `strip`/`objcopy` is needed on the build host, the line tables are never
//! generated (a faster link), and `scripts/gr00t-tiny-weights.sh` can set the same two
//! variables so its build is the one `package` finds. `TT_MODEL_CARGO_DEBUG=1` keeps the
//! profile's line tables (a debug build of the image); `built.cargo.debuginfo` records which.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};
use tt_model_manifest::wire::CargoBuild;

use crate::error::PackageError;
use crate::spec::CargoBinary;

/// The Cargo profile the image's binary is built with.
pub const PROFILE: &str = "release";

/// Set to `1` to ship the binary with the release profile's line tables.
pub const DEBUG_ENV: &str = "TT_MODEL_CARGO_DEBUG";

/// Whether `TT_MODEL_CARGO_DEBUG` asks for line tables in the shipped binary.
pub fn debuginfo_requested() -> bool {
    std::env::var(DEBUG_ENV).is_ok_and(|v| v == "1")
}

/// The Cargo profile overrides (environment) for the image's build: none with line tables,
/// else no debuginfo and std's stripped as well.
pub fn profile_env(debuginfo: bool) -> &'static [(&'static str, &'static str)] {
    if debuginfo {
        &[]
    } else {
        &[
            ("CARGO_PROFILE_RELEASE_DEBUG", "false"),
            ("CARGO_PROFILE_RELEASE_STRIP", "debuginfo"),
        ]
    }
}

/// The built binary and its provenance.
#[derive(Debug, Clone)]
pub struct CargoOutput {
    /// The binary in the workspace's target directory.
    pub binary: PathBuf,
    /// What `built.cargo` records.
    pub facts: CargoBuild,
}

/// The `cargo` to run: the one running us (`CARGO`, set by `cargo run`/`cargo test`), else
/// `cargo` on `PATH` (a rustup proxy honours the workspace's `rust-toolchain.toml`).
fn cargo_program() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

fn run_capture(cmd: &mut Command, what: &str, workspace: &Path) -> Result<String, PackageError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| cargo_error(workspace, format!("cannot run {what}: {e}")))?;
    if !out.status.success() {
        return Err(cargo_error(
            workspace,
            format!(
                "{what} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cargo_error(workspace: &Path, detail: String) -> PackageError {
    PackageError::Cargo {
        workspace: workspace.to_path_buf(),
        detail,
    }
}

/// `rustc -vV` → (`rustc 1.95.0 (59807616e 2026-04-14)`, host triple).
pub fn parse_rustc_version(verbose: &str) -> Option<(String, String)> {
    let first = verbose.lines().next()?.trim().to_string();
    let host = verbose
        .lines()
        .find_map(|l| l.strip_prefix("host: "))?
        .trim()
        .to_string();
    first.starts_with("rustc ").then_some((first, host))
}

/// What one line of `cargo build --message-format=json` says.
#[derive(Debug, PartialEq)]
pub enum CargoMessage {
    /// A compiler error, as rustc rendered it.
    Error(String),
    /// The executable of binary target `name`.
    Executable {
        /// The binary target's name.
        name: String,
        /// The `Cargo.toml` of the package the target belongs to.
        manifest: PathBuf,
        /// Where cargo wrote the executable.
        path: PathBuf,
    },
    /// Anything else.
    Other,
}

/// Parses one JSON line of `cargo build --message-format=json`.
pub fn parse_message(line: &str) -> CargoMessage {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return CargoMessage::Other;
    };
    match v["reason"].as_str() {
        Some("compiler-message") if v["message"]["level"] == "error" => CargoMessage::Error(
            v["message"]["rendered"]
                .as_str()
                .or_else(|| v["message"]["message"].as_str())
                .unwrap_or("error")
                .trim_end()
                .to_string(),
        ),
        Some("compiler-artifact") => match (
            v["target"]["name"].as_str(),
            v["manifest_path"].as_str(),
            v["executable"].as_str(),
        ) {
            (Some(name), Some(manifest), Some(path)) => CargoMessage::Executable {
                name: name.to_string(),
                manifest: PathBuf::from(manifest),
                path: PathBuf::from(path),
            },
            _ => CargoMessage::Other,
        },
        _ => CargoMessage::Other,
    }
}

/// Whether an ELF file has no program interpreter (`PT_INTERP`): it needs no dynamic loader
/// and so no libc from the image. `None`: not a 64-bit little-endian ELF.
pub fn elf_is_static(bytes: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        if u32_at(phoff + i * phentsize)? == PT_INTERP {
            return Some(false);
        }
    }
    Some(true)
}

fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((format!("{:x}", h.finalize()), n))
}

/// The workspace's git commit and whether it has uncommitted changes (tracked files).
fn workspace_git(dir: &Path) -> (Option<String>, bool) {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"]).filter(|s| s.len() == 40);
    let dirty = commit.is_some()
        && git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    (commit, dirty)
}

/// `--features` for the package's features while every member is selected: each one named
/// `package/feature` (one already qualified is kept), so no other member's feature of the same
/// name is turned on.
pub fn qualified_features(package: &str, features: &[String]) -> String {
    features
        .iter()
        .map(|f| {
            if f.contains('/') {
                f.clone()
            } else {
                format!("{package}/{f}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Builds `spec`'s binary; `log` gets every line cargo prints. A compile failure is
/// [`PackageError::CargoBuild`] carrying the compiler's first error.
pub fn build(spec: &CargoBinary, log: &mut dyn FnMut(&str)) -> Result<CargoOutput, PackageError> {
    let ws = Path::new(&spec.workspace);
    let bin = spec.bin_name();
    if !ws.join("Cargo.toml").is_file() {
        return Err(cargo_error(
            ws,
            "has no Cargo.toml (runtime.cargo.workspace is read from the working directory)".into(),
        ));
    }
    // The toolchain the workspace resolves to (rustup proxies read rust-toolchain.toml there).
    let rustc_vv = run_capture(
        Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
            .arg("-vV")
            .current_dir(ws),
        "rustc -vV",
        ws,
    )?;
    let (rustc, target) = parse_rustc_version(&rustc_vv)
        .ok_or_else(|| cargo_error(ws, format!("unexpected `rustc -vV` output: {rustc_vv}")))?;
    let metadata = run_capture(
        Command::new(cargo_program())
            .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
            .current_dir(ws),
        "cargo metadata",
        ws,
    )?;
    let metadata: serde_json::Value = serde_json::from_str(&metadata)
        .map_err(|e| cargo_error(ws, format!("cargo metadata printed no JSON: {e}")))?;
    let package = metadata["packages"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == spec.package.as_str()));
    // The package's own Cargo.toml tells its binary from a same-named one of another member.
    let package_manifest = package
        .and_then(|p| p["manifest_path"].as_str())
        .map(PathBuf::from);
    let version = package
        .and_then(|p| p["version"].as_str())
        .ok_or_else(|| {
            cargo_error(
                ws,
                format!(
                    "the workspace has no package `{}` (runtime.cargo.package)",
                    spec.package
                ),
            )
        })?
        .to_string();
    let lock = metadata["workspace_root"]
        .as_str()
        .map(|r| Path::new(r).join("Cargo.lock"))
        .unwrap_or_else(|| ws.join("Cargo.lock"));
    let (cargo_lock_sha256, _) = sha256_file(&lock).map_err(|e| {
        cargo_error(
            ws,
            format!(
                "cannot read {} ({e}): --locked needs a lock file",
                lock.display()
            ),
        )
    })?;

    let mut cmd = Command::new(cargo_program());
    // Every member selected (the workspace's feature resolution), one binary built: see the
    // module's docs.
    cmd.args(["build", "--release", "--locked", "--message-format=json"])
        .args(["--workspace", "--bin", bin])
        .args(["--target", &target])
        .current_dir(ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let features = qualified_features(&spec.package, &spec.features);
    if !features.is_empty() {
        cmd.args(["--features", &features]);
    }
    // Static glibc for the target artifacts only (build scripts and proc macros stay dynamic:
    // with --target, RUSTFLAGS does not reach host artifacts).
    let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    if !flags.is_empty() {
        flags.push(' ');
    }
    flags.push_str("-C target-feature=+crt-static");
    cmd.env("RUSTFLAGS", flags)
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    let debuginfo = debuginfo_requested();
    // Either way the profile comes from here, not from the caller's environment.
    cmd.env_remove("CARGO_PROFILE_RELEASE_DEBUG")
        .env_remove("CARGO_PROFILE_RELEASE_STRIP");
    let overrides = profile_env(debuginfo);
    cmd.envs(overrides.iter().copied());
    log(&format!(
        "+ {}cargo build --release --locked --workspace --bin {} --target {target}{} (in {})",
        overrides
            .iter()
            .map(|(k, v)| format!("{k}={v} "))
            .collect::<String>(),
        bin,
        if features.is_empty() {
            String::new()
        } else {
            format!(" --features {features}")
        },
        ws.display()
    ));
    let mut child = cmd
        .spawn()
        .map_err(|e| cargo_error(ws, format!("cannot run cargo: {e}")))?;
    let stderr = child.stderr.take().expect("piped");
    let stderr_lines = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let mut first_error = None;
    let mut binary = None;
    for line in BufReader::new(child.stdout.take().expect("piped"))
        .lines()
        .map_while(Result::ok)
    {
        match parse_message(&line) {
            CargoMessage::Error(text) => {
                log(&text);
                first_error.get_or_insert(text);
            }
            CargoMessage::Executable {
                name,
                manifest,
                path,
            } if name == bin && package_manifest.as_ref().is_none_or(|m| *m == manifest) => {
                binary = Some(path)
            }
            _ => {}
        }
    }
    let status = child
        .wait()
        .map_err(|e| cargo_error(ws, format!("waiting for cargo: {e}")))?;
    let stderr = stderr_lines.join().unwrap_or_default();
    for l in &stderr {
        log(l);
    }
    if !status.success() {
        let first = first_error.unwrap_or_else(|| {
            // No compiler message: cargo itself refused (a stale lock under --locked, an unknown
            // package or feature). Its own `error:` paragraph says why.
            let at = stderr
                .iter()
                .position(|l| l.starts_with("error"))
                .unwrap_or(0);
            stderr[at.min(stderr.len())..].join("\n")
        });
        return Err(PackageError::CargoBuild {
            package: spec.package.clone(),
            first_error: first,
        });
    }
    let binary = binary.ok_or_else(|| {
        cargo_error(
            ws,
            format!(
                "cargo built no executable `{}` in package `{}`",
                bin, spec.package
            ),
        )
    })?;
    let head = {
        let mut f = std::fs::File::open(&binary)
            .map_err(PackageError::io("Reading the built binary", &binary))?;
        let mut head = vec![0u8; 64 * 1024];
        let n = f
            .read(&mut head)
            .map_err(PackageError::io("Reading the built binary", &binary))?;
        head.truncate(n);
        head
    };
    if elf_is_static(&head) != Some(true) {
        return Err(cargo_error(
            ws,
            format!(
                "{} is not a statically linked ELF executable (it needs a dynamic loader the base image may lack); a dependency may force dynamic linking",
                binary.display()
            ),
        ));
    }
    let (sha256, bytes) =
        sha256_file(&binary).map_err(PackageError::io("Hashing the built binary", &binary))?;
    let (workspace_commit, workspace_dirty) = workspace_git(ws);
    Ok(CargoOutput {
        facts: CargoBuild {
            package: spec.package.clone(),
            version,
            bin: bin.to_owned(),
            path: spec.image_path(),
            sha256,
            bytes,
            features: spec.features.clone(),
            profile: PROFILE.into(),
            target,
            static_link: true,
            debuginfo,
            rustc,
            workspace_commit,
            workspace_dirty,
            cargo_lock_sha256,
        },
        binary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustc_version_and_host() {
        let vv = "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\ncommit-hash: 5980\nhost: x86_64-unknown-linux-gnu\nrelease: 1.95.0\n";
        assert_eq!(
            parse_rustc_version(vv),
            Some((
                "rustc 1.95.0 (59807616e 2026-04-14)".into(),
                "x86_64-unknown-linux-gnu".into()
            ))
        );
        assert_eq!(parse_rustc_version("hello"), None);
    }

    #[test]
    fn messages_give_the_first_error_and_the_executable() {
        let err = r#"{"reason":"compiler-message","message":{"level":"error","message":"mismatched types","rendered":"error[E0308]: mismatched types\n --> src/main.rs:2:18\n"}}"#;
        assert_eq!(
            parse_message(err),
            CargoMessage::Error("error[E0308]: mismatched types\n --> src/main.rs:2:18".into())
        );
        let warn = r#"{"reason":"compiler-message","message":{"level":"warning","rendered":"warning: x"}}"#;
        assert_eq!(parse_message(warn), CargoMessage::Other);
        let art = r#"{"reason":"compiler-artifact","manifest_path":"/w/crates/gr00t-server/Cargo.toml","target":{"name":"gr00t-server"},"executable":"/w/target/x/release/gr00t-server"}"#;
        assert_eq!(
            parse_message(art),
            CargoMessage::Executable {
                name: "gr00t-server".into(),
                manifest: "/w/crates/gr00t-server/Cargo.toml".into(),
                path: "/w/target/x/release/gr00t-server".into()
            }
        );
        let lib = r#"{"reason":"compiler-artifact","target":{"name":"serde"},"executable":null}"#;
        assert_eq!(parse_message(lib), CargoMessage::Other);
        assert_eq!(parse_message("not json"), CargoMessage::Other);
    }

    #[test]
    fn features_are_the_packages_own_while_every_member_is_selected() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(qualified_features("srv", &[]), "");
        assert_eq!(
            qualified_features("srv", &f(&["device", "tokio/tracing"])),
            "srv/device,tokio/tracing"
        );
    }

    #[test]
    fn the_shipped_profile_drops_debuginfo_unless_asked() {
        assert_eq!(
            profile_env(false),
            &[
                ("CARGO_PROFILE_RELEASE_DEBUG", "false"),
                ("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
            ]
        );
        assert!(profile_env(true).is_empty());
    }

    #[test]
    fn static_and_dynamic_elves() {
        // The running test binary is dynamically linked (the default for -gnu).
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(elf_is_static(&me), Some(false));
        assert_eq!(elf_is_static(b"#!/bin/sh\n"), None);
        // A minimal ELF64 header with no program headers: nothing asks for an interpreter.
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x36] = 56;
        assert_eq!(elf_is_static(&elf), Some(true));
    }
}
