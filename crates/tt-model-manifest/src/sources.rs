//! The file-system checks of a manifest's sources, shared by `lint --check-sources` and
//! `package` so the two judge a path the same way: the same resolution (`~/` is the home
//! directory, an absolute path stays, anything else is under the base directory), the same
//! wildcard rules ([`crate::glob`]) and the same messages. Each check returns a
//! [`FieldError`] naming the manifest field it is about.

use std::path::{Path, PathBuf};

use crate::field_error::FieldError;
use crate::glob;
use crate::types::{CodeRoot, ComponentSource, KindRuntime, Manifest};

/// The code every finding of this module carries.
pub const CODE: &str = "source-missing";

/// A path as the manifest gives it, against `base`: `~/…` is under `$HOME`, an absolute path
/// is itself, anything else is under `base` (the working directory of `tt-model`, as in the
/// original).
pub fn resolve(base: &Path, p: &str) -> PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    base.join(p)
}

/// The files a wheel entry names, sorted: the file itself, or, when its last component is a
/// pattern ([`glob::is_pattern`]), every file of its directory that matches.
pub fn matching_files(entry: &Path) -> Vec<PathBuf> {
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !glob::is_pattern(&name) {
        return if entry.is_file() {
            vec![entry.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let dir = match entry.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()))
                .filter(|e| glob::fnmatch(&e.file_name().to_string_lossy(), &name))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// A code root (`source.tt_metal`, an `extra_code` root) must be a directory. `label` is how
/// the message names it, `authored` the value as written.
pub fn check_code_root(
    field: &str,
    label: &str,
    authored: &str,
    dir: &Path,
) -> Result<(), FieldError> {
    if dir.is_dir() {
        return Ok(());
    }
    Err(FieldError::new(
        CODE,
        field,
        format!(
            "{label} '{authored}' is not a directory (resolved to {})",
            dir.display()
        ),
    ))
}

/// An allowlist entry (`source.code[i]`, `extra_code[e].paths[i]`) must exist under its root.
pub fn check_code_entry(
    field: &str,
    label: &str,
    entry: &str,
    root_dir: &Path,
) -> Result<(), FieldError> {
    if root_dir.join(entry).exists() {
        return Ok(());
    }
    Err(FieldError::new(
        CODE,
        field,
        format!(
            "{label} path '{entry}' does not exist under {}",
            root_dir.display()
        ),
    ))
}

/// A local Python project (`runtime.plugin.path`, `runtime.vllm.path`) must be a directory
/// holding `pyproject.toml` or `setup.py`.
pub fn check_project(field: &str, authored: &str, dir: &Path) -> Result<(), FieldError> {
    if !dir.is_dir() {
        return Err(FieldError::new(
            CODE,
            field,
            format!(
                "{field} '{authored}' is not a directory (resolved to {})",
                dir.display()
            ),
        ));
    }
    if !dir.join("pyproject.toml").is_file() && !dir.join("setup.py").is_file() {
        return Err(FieldError::new(
            CODE,
            field,
            format!(
                "{field} '{authored}' has neither pyproject.toml nor setup.py; it must be a pip-installable project"
            ),
        ));
    }
    Ok(())
}

/// Which wheel a wheel entry must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WheelRole {
    /// `runtime.vllm.wheel`: vLLM itself (`vllm-*.whl`).
    Vllm,
    /// A `runtime.wheels` entry: any wheel but vLLM.
    Extra,
}

/// The wheels an entry names (a path, or a pattern in its last component), each checked for
/// its role. `label` names the entry in messages (`runtime.wheels entry`).
pub fn check_wheels(
    field: &str,
    label: &str,
    authored: &str,
    resolved: &Path,
    role: WheelRole,
) -> Result<Vec<PathBuf>, FieldError> {
    let wheels = matching_files(resolved);
    if wheels.is_empty() {
        return Err(FieldError::new(
            CODE,
            field,
            format!(
                "{label} '{authored}' matches no file (resolved to {})",
                resolved.display()
            ),
        ));
    }
    for w in &wheels {
        let name = w
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let wrong = match role {
            WheelRole::Vllm if !glob::fnmatch(&name, "vllm-*.whl") => {
                Some("which is not a vLLM wheel (vllm-*.whl)")
            }
            WheelRole::Extra if name.starts_with("vllm-") => {
                Some("a vLLM wheel; vLLM itself goes in runtime.vllm.wheel")
            }
            WheelRole::Extra if !name.ends_with(".whl") => Some("which is not a wheel (*.whl)"),
            _ => None,
        };
        if let Some(wrong) = wrong {
            return Err(FieldError::new(
                "wheel-kind",
                field,
                format!("{label} '{authored}' names {}, {wrong}", w.display()),
            ));
        }
    }
    Ok(wheels)
}

/// Every file-system check of the manifest's local sources, against `base`: the tt-metal tree
/// and its `code` entries, the `extra_code` roots and paths, the local plugin and vLLM
/// projects and the wheels. Git sources are checked when `package` fetches them.
pub fn check(m: &Manifest, base: &Path) -> Vec<FieldError> {
    let mut out = Vec::new();
    if let CodeRoot::Path(root) = &m.source.tt_metal {
        let dir = resolve(base, root);
        match check_code_root("source.tt_metal", "source.tt_metal", root, &dir) {
            Err(e) => out.push(e),
            Ok(()) => out.extend(m.source.code.iter().enumerate().filter_map(|(i, p)| {
                check_code_entry(&format!("source.code[{i}]"), "source.code", p, &dir).err()
            })),
        }
    }
    for (e, extra) in m.source.extra_code.iter().enumerate() {
        let CodeRoot::Path(root) = &extra.root else {
            continue;
        };
        let dir = resolve(base, root);
        let field = format!("source.extra_code[{e}].root");
        if let Err(err) = check_code_root(&field, "source.extra_code root", root, &dir) {
            out.push(err);
            continue;
        }
        out.extend(extra.paths.iter().enumerate().filter_map(|(i, p)| {
            let field = format!("source.extra_code[{e}].paths[{i}]");
            check_code_entry(&field, "source.extra_code", p, &dir).err()
        }));
    }
    // A runtime block whose values do not read has been reported by the runtime checks.
    let Ok(rt) = m.runtime_spec() else {
        return out;
    };
    let (plugin, wheels) = match &rt.kind {
        KindRuntime::VllmPlugin(p) => (p.plugin.as_ref(), p.wheels.as_slice()),
        _ => (None, &[][..]),
    };
    for (key, source) in [("plugin", plugin), ("vllm", rt.vllm())] {
        if let Some(ComponentSource::Path { path }) = source {
            let field = format!("runtime.{key}.path");
            out.extend(check_project(&field, path, &resolve(base, path)).err());
        }
    }
    if let Some(ComponentSource::Wheel { wheel }) = rt.vllm() {
        let field = "runtime.vllm.wheel";
        let resolved = resolve(base, wheel);
        out.extend(check_wheels(field, field, wheel, &resolved, WheelRole::Vllm).err());
    }
    for (i, w) in wheels.iter().enumerate() {
        let field = format!("runtime.wheels[{i}]");
        let resolved = resolve(base, w);
        let label = "runtime.wheels entry";
        out.extend(check_wheels(&field, label, w, &resolved, WheelRole::Extra).err());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_absolute_and_relative_paths_resolve() {
        let base = Path::new("/work/here");
        let home = PathBuf::from(std::env::var_os("HOME").expect("HOME is set in tests"));
        assert_eq!(resolve(base, "~/tt-metal"), home.join("tt-metal"));
        assert_eq!(
            resolve(base, "/opt/tt-metal"),
            PathBuf::from("/opt/tt-metal")
        );
        assert_eq!(resolve(base, "../tt-metal"), base.join("../tt-metal"));
    }

    #[test]
    fn wheels_match_by_pattern_and_by_role() {
        let tmp = std::env::temp_dir().join(format!("tt-model-wheels-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        for f in [
            "vllm-0.10.1-py3-none-any.whl",
            "extra-1.0-py3-none-any.whl",
            "notes.txt",
        ] {
            std::fs::write(tmp.join(f), "").unwrap();
        }
        let got = check_wheels(
            "f",
            "f",
            "w/vllm-*.whl",
            &tmp.join("vllm-*.whl"),
            WheelRole::Vllm,
        )
        .unwrap();
        assert_eq!(got, vec![tmp.join("vllm-0.10.1-py3-none-any.whl")]);
        let err = check_wheels("f", "f", "w/*", &tmp.join("*"), WheelRole::Vllm).unwrap_err();
        assert!(err.message.contains("not a vLLM wheel"), "{err}");
        let err =
            check_wheels("f", "f", "w/v*", &tmp.join("v*.whl"), WheelRole::Extra).unwrap_err();
        assert!(err.message.contains("vLLM itself goes in"), "{err}");
        let err = check_wheels("f", "f", "w/n*", &tmp.join("n*"), WheelRole::Extra).unwrap_err();
        assert!(err.message.contains("not a wheel"), "{err}");
        let err =
            check_wheels("f", "l", "w/x?.whl", &tmp.join("x?.whl"), WheelRole::Extra).unwrap_err();
        assert_eq!(err.code, CODE);
        assert!(
            err.message.starts_with("l 'w/x?.whl' matches no file"),
            "{err}"
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
