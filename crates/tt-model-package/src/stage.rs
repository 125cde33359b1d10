//! Staging: what from the tt-metal tree and the code allowlist enters the build.
//!
//! The tt-metal tree is not copied: its filtered file list is streamed straight into the
//! build context ([`crate::context`]). `code/` is copied (symlinks dereferenced, ignore list
//! applied) into the package output while being hashed in the same pass, and the context
//! takes code from that copy, so `code/` beside the manifest is byte-identical to what
//! entered the image.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::digest::{FileRecord, normal_mode, tree_digest};
use tt_model_manifest::sources;

use crate::error::{FieldError, PackageError};
use crate::spec::PackageSpec;

/// Names dropped anywhere in the tt-metal tree.
const METAL_EXCLUDE_ANYWHERE: &[&str] = &[".git", ".cpmcache", "__pycache__"];

/// Names dropped at the root of the tt-metal tree (sources of the build, dev-only trees and
/// `models/`, whose allowlisted parts arrive through `code/` instead).
const METAL_EXCLUDE_ROOT: &[&str] = &[
    "python_env",
    "generated",
    "built",
    "models",
    "docs",
    "tech_reports",
    "tt-train",
    "model_tracer",
    ".github",
    "infra",
    "jobs",
    "releases",
    "dockerfile",
    "contributing",
    ".claude",
    "build",
    "venv",
];

/// The submodule whose absence means `git submodule update` was never run.
pub const SUBMODULE_SENTINEL: &str = "tt_metal/third_party/umd/CMakeLists.txt";

/// Whether a tt-metal tree path (relative, `/`-separated) is left out of the build.
pub fn metal_excluded(rel: &str, is_dir: bool) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let at_root = !rel.contains('/');
    if METAL_EXCLUDE_ANYWHERE.contains(&name) || name.starts_with(".venv") {
        return true;
    }
    if !is_dir && name.ends_with(".log") {
        return true;
    }
    if at_root {
        if METAL_EXCLUDE_ROOT.contains(&name) {
            return true;
        }
        // Root-level build_* outputs go, the build_*.sh scripts stay.
        let is_script = !is_dir && name.ends_with(".sh");
        if name.starts_with("build_") && !is_script {
            return true;
        }
    }
    false
}

/// Whether a file or directory name is dropped from `code/` (caches, logs, weights).
pub fn code_ignored(name: &str) -> bool {
    const NAMES: &[&str] = &["__pycache__", ".pytest_cache", ".venv", "venv", "logs"];
    const SUFFIXES: &[&str] = &[
        ".pyc",
        ".egg-info",
        ".log",
        ".safetensors",
        ".pt",
        ".pth",
        ".ckpt",
        ".bin",
        ".refpt",
    ];
    NAMES.contains(&name) || SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Checks that `root` looks like an initialised tt-metal checkout.
pub fn check_metal_tree(root: &Path) -> Result<(), PackageError> {
    let problem = |problem: String| PackageError::MetalTree {
        path: root.to_path_buf(),
        problem,
    };
    if !root.is_dir() {
        return Err(problem("does not exist or is not a directory".into()));
    }
    if !root.join("tt_metal").is_dir() {
        return Err(problem(
            "does not look like a tt-metal checkout (no tt_metal/ directory)".into(),
        ));
    }
    if !root.join(SUBMODULE_SENTINEL).is_file() {
        return Err(problem(format!(
            "has uninitialised git submodules ({SUBMODULE_SENTINEL} is missing); run `git -C {} submodule update --init --recursive`",
            root.display()
        )));
    }
    Ok(())
}

/// One file bound for the build context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Path relative to the tree root, `/`-separated.
    pub rel: String,
    /// Where to read it.
    pub source: PathBuf,
    /// Normalised mode.
    pub mode: u32,
    /// Length in bytes when the tree was walked.
    pub size: u64,
}

fn rel_string(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Lists the tt-metal tree's files that enter the build, sorted, symlinks dereferenced.
pub fn walk_metal(root: &Path) -> Result<Vec<TreeFile>, PackageError> {
    let mut files = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let rel = e
                .path()
                .strip_prefix(root)
                .map(rel_string)
                .unwrap_or_default();
            rel.is_empty() || !metal_excluded(&rel, e.file_type().is_dir())
        });
    for entry in walker {
        let entry = entry.map_err(|e| PackageError::Io {
            action: "Walking the tt-metal tree at",
            path: e.path().unwrap_or(root).to_path_buf(),
            source: e
                .into_io_error()
                .unwrap_or_else(|| std::io::Error::other("symlink loop")),
        })?;
        if !entry.file_type().is_file() {
            continue;
        }
        let meta = entry.metadata().map_err(|e| PackageError::Io {
            action: "Reading",
            path: entry.path().to_path_buf(),
            source: e
                .into_io_error()
                .unwrap_or_else(|| std::io::Error::other("metadata")),
        })?;
        files.push(TreeFile {
            rel: rel_string(
                entry
                    .path()
                    .strip_prefix(root)
                    .expect("walk stays under root"),
            ),
            source: entry.path().to_path_buf(),
            mode: normal_mode(meta.permissions().mode()),
            size: meta.len(),
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(files)
}

/// The result of staging `code/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeStage {
    /// Every staged file, sorted by path.
    pub files: Vec<FileRecord>,
    /// Paths dropped by the ignore list (relative to `code/`).
    pub ignored: Vec<String>,
    /// `code_sha256` (see [`crate::digest`]).
    pub digest: String,
    /// Total bytes staged.
    pub bytes: u64,
}

/// Copies the allowlist (`source.code` from the tt-metal tree, then `extra_code` roots) into
/// `dest`, hashing as it copies.
pub fn stage_code(
    spec: &PackageSpec,
    metal_root: &Path,
    dest: &Path,
) -> Result<CodeStage, PackageError> {
    fs::create_dir_all(dest).map_err(PackageError::io("Creating", dest))?;
    let mut stage = CodeStage {
        files: Vec::new(),
        ignored: Vec::new(),
        digest: String::new(),
        bytes: 0,
    };
    // (the entry's field, how messages name it, its root, the entry): as lint names them.
    let mut roots: Vec<(String, &'static str, &Path, &String)> = spec
        .code
        .iter()
        .enumerate()
        .map(|(i, e)| (format!("source.code[{i}]"), "source.code", metal_root, e))
        .collect();
    for (x, extra) in spec.extra_code.iter().enumerate() {
        roots.extend(extra.paths.iter().enumerate().map(|(i, e)| {
            let field = format!("source.extra_code[{x}].paths[{i}]");
            (field, "source.extra_code", extra.root.as_path(), e)
        }));
    }
    let mut buf = vec![0u8; 1 << 20];
    for (field, label, root, entry) in roots {
        let field = field.as_str();
        let rel = entry.trim_end_matches('/');
        if Path::new(rel).is_absolute() || rel.split('/').any(|c| c == "..") || rel.is_empty() {
            return Err(FieldError::new(
                "path-outside-root",
                field,
                format!("`{label}` paths must be relative to their root: `{entry}`"),
            )
            .into());
        }
        // The allowlist names exactly what ships: a missing entry is an error, not a skip
        // (the check lint runs; here it also covers git checkouts, fetched after lint).
        sources::check_code_entry(field, label, entry, root)?;
        let source = root.join(rel);
        // `PackageSpec` is public: the lint's refusal of `..` is not ours to rely on, and a
        // symlink on the way can leave the root as surely as `..` does.
        let real_root = fs::canonicalize(root).map_err(PackageError::io("Resolving", root))?;
        inside_root(field, entry, &source, &real_root)?;
        let walker = walkdir::WalkDir::new(&source)
            .follow_links(true)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| {
                let ignored = e.depth() > 0 && code_ignored(&e.file_name().to_string_lossy());
                !ignored
            });
        for item in walker {
            let item = item.map_err(|e| PackageError::Io {
                action: "Walking",
                path: e.path().unwrap_or(&source).to_path_buf(),
                source: e
                    .into_io_error()
                    .unwrap_or_else(|| std::io::Error::other("symlink loop")),
            })?;
            if item.path_is_symlink() {
                // Checked before the walk descends into it, so nothing outside is read.
                inside_root(field, entry, item.path(), &real_root)?;
            }
            if !item.file_type().is_file() {
                continue;
            }
            let sub = item.path().strip_prefix(&source).expect("under source");
            let rel_path = if sub.as_os_str().is_empty() {
                rel.to_string()
            } else {
                format!("{rel}/{}", rel_string(sub))
            };
            if stage.files.iter().any(|f| f.path == rel_path) {
                continue; // listed twice (an entry inside another); first copy wins
            }
            let record = copy_hashed(item.path(), &dest.join(&rel_path), &rel_path, &mut buf)?;
            stage.bytes += record.size;
            stage.files.push(record);
        }
        // Report what the ignore list drops (walk the pruned names separately: cheap, shallow;
        // after the walk above, which refused any way out of the root).
        collect_ignored(&source, rel, &mut stage.ignored);
    }
    stage.files.sort();
    stage.ignored.sort();
    stage.ignored.dedup();
    stage.digest = tree_digest(&stage.files);
    Ok(stage)
}

/// Refuses `path` when it resolves (through any symlink) outside `real_root`, which must be
/// canonical.
fn inside_root(
    field: &str,
    entry: &str,
    path: &Path,
    real_root: &Path,
) -> Result<(), PackageError> {
    let real = fs::canonicalize(path).map_err(PackageError::io("Resolving", path))?;
    if real.starts_with(real_root) {
        return Ok(());
    }
    Err(FieldError::new(
        "path-outside-root",
        field,
        format!(
            "`{field}` entry `{entry}` leaves its root {}: {} resolves to {}; only files inside the root ship",
            real_root.display(),
            path.display(),
            real.display()
        ),
    )
    .into())
}

fn collect_ignored(source: &Path, rel: &str, out: &mut Vec<String>) {
    for e in walkdir::WalkDir::new(source)
        .follow_links(true)
        .into_iter()
        .flatten()
    {
        if e.depth() > 0 && code_ignored(&e.file_name().to_string_lossy()) {
            let sub = e
                .path()
                .strip_prefix(source)
                .map(rel_string)
                .unwrap_or_default();
            let path = format!("{rel}/{sub}");
            // Only report the outermost ignored path.
            if !out.iter().any(|p| path.starts_with(&format!("{p}/"))) {
                out.push(path);
            }
        }
    }
}

/// Copies one file, normalising its mode, and returns its digest record.
pub fn copy_hashed(
    from: &Path,
    to: &Path,
    rel: &str,
    buf: &mut [u8],
) -> Result<FileRecord, PackageError> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(PackageError::io("Creating", parent))?;
    }
    let mut input = fs::File::open(from).map_err(PackageError::io("Reading", from))?;
    let mode = normal_mode(
        input
            .metadata()
            .map_err(PackageError::io("Reading", from))?
            .permissions()
            .mode(),
    );
    let mut output = fs::File::create(to).map_err(PackageError::io("Writing", to))?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    loop {
        let n = input.read(buf).map_err(PackageError::io("Reading", from))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        output
            .write_all(&buf[..n])
            .map_err(PackageError::io("Writing", to))?;
        size += n as u64;
    }
    fs::set_permissions(to, fs::Permissions::from_mode(mode))
        .map_err(PackageError::io("Writing", to))?;
    Ok(FileRecord {
        path: rel.to_string(),
        mode,
        size,
        sha256: hasher.finalize().into(),
    })
}

/// tt-metal's torch pin from `tt_metal/python_env/requirements-dev.txt` text: the
/// `torch==X` line (an x86_64 marker is allowed), without the local suffix.
pub fn torch_pin(requirements: &str) -> Option<String> {
    requirements.lines().find_map(|line| {
        let line = line.split('#').next()?.trim();
        let (spec, marker) = match line.split_once(';') {
            Some((s, m)) => (s.trim(), Some(m.trim())),
            None => (line, None),
        };
        if let Some(m) = marker
            && !m.contains("x86_64")
        {
            return None;
        }
        let version = spec
            .strip_prefix("torch")?
            .trim_start()
            .strip_prefix("==")?
            .trim();
        (!version.is_empty()).then(|| version.split('+').next().unwrap_or(version).to_string())
    })
}

/// Reads the torch pin from a tt-metal tree, if the requirements file is there.
pub fn read_torch_pin(metal_root: &Path) -> Option<String> {
    let path = metal_root.join("tt_metal/python_env/requirements-dev.txt");
    fs::read_to_string(path).ok().and_then(|t| torch_pin(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metal_filter_matches_the_original_rules() {
        for (rel, dir, excluded) in [
            (".git", true, true),
            ("tt_metal/third_party/umd/.git", false, true),
            ("models", true, true),
            ("ttnn/ttnn/models", true, false),
            ("build", true, true),
            ("build_Release", true, true),
            ("build_metal.sh", false, false),
            ("build_tools.sh", false, false),
            ("tt_metal/build_Release", true, false),
            ("docs", true, true),
            ("tt_metal/docs", true, false),
            (".venv-3.12", true, true),
            ("run.log", false, true),
            ("tt_metal/impl/device.cpp", false, false),
            ("python_env", true, true),
            ("tt_metal/python_env", true, false),
            ("tt_metal/foo/__pycache__", true, true),
        ] {
            assert_eq!(metal_excluded(rel, dir), excluded, "{rel}");
        }
    }

    #[test]
    fn code_ignore_list() {
        for name in [
            "__pycache__",
            "x.pyc",
            "m.safetensors",
            "w.pt",
            "a.egg-info",
            "logs",
            "run.log",
        ] {
            assert!(code_ignored(name), "{name}");
        }
        for name in ["model.py", "config.json", "binary", "log.py"] {
            assert!(!code_ignored(name), "{name}");
        }
    }

    #[test]
    fn torch_pin_parsing() {
        let text = "numpy==1.26\n# comment\ntorch==2.7.1+cpu ; platform_machine == 'x86_64'\ntorch==2.7.1 ; platform_machine == 'aarch64'\n";
        assert_eq!(torch_pin(text).as_deref(), Some("2.7.1"));
        assert_eq!(torch_pin("torch == 2.2.0\n").as_deref(), Some("2.2.0"));
        assert_eq!(torch_pin("torchvision==0.1\n"), None);
        assert_eq!(torch_pin(""), None);
    }
}
