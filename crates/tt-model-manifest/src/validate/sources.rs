//! `--check-sources`: the file-system checks `package` runs before staging. Paths resolve
//! against a base directory (the working directory of `tt-model`, as in the original).

use std::path::Path;

use super::Checker;
use crate::types::{CodeRoot, ComponentSource, KindRuntime, RuntimeSpec, TtDitServerRuntime};

pub(super) fn check(c: &mut Checker<'_>, base: &Path) {
    let m = c.m;
    if let CodeRoot::Path(root) = &m.source.tt_metal {
        let root_dir = base.join(root);
        if !root_dir.is_dir() {
            c.error(
                "source-missing",
                "source.tt_metal",
                format!(
                    "source.tt_metal '{root}' is not a directory (resolved to {})",
                    root_dir.display()
                ),
            );
        } else {
            for (i, p) in m.source.code.iter().enumerate() {
                if !root_dir.join(p).exists() {
                    c.error(
                        "source-missing",
                        &format!("source.code[{i}]"),
                        format!(
                            "source.code path '{p}' does not exist under {}",
                            root_dir.display()
                        ),
                    );
                }
            }
        }
    }
    for (e, extra) in m.source.extra_code.iter().enumerate() {
        let CodeRoot::Path(root) = &extra.root else {
            continue;
        };
        let root_dir = base.join(root);
        if !root_dir.is_dir() {
            c.error(
                "source-missing",
                &format!("source.extra_code[{e}].root"),
                format!(
                    "source.extra_code root '{root}' is not a directory (resolved to {})",
                    root_dir.display()
                ),
            );
            continue;
        }
        for (i, p) in extra.paths.iter().enumerate() {
            if !root_dir.join(p).exists() {
                c.error(
                    "source-missing",
                    &format!("source.extra_code[{e}].paths[{i}]"),
                    format!(
                        "source.extra_code path '{p}' does not exist under {}",
                        root_dir.display()
                    ),
                );
            }
        }
    }
    local_runtime_sources(c, base);
    if let Ok(RuntimeSpec {
        kind: KindRuntime::TtDitServer(TtDitServerRuntime { app: Some(app), .. }),
        ..
    }) = m.runtime_spec()
    {
        let package = app.split([':', '.']).next().unwrap_or_default();
        let shipped = m.source.all_code_paths().any(|p| {
            let first = p
                .trim_start_matches("./")
                .split('/')
                .next()
                .unwrap_or_default();
            first == package || first == format!("{package}.py")
        });
        if !package.is_empty() && !shipped {
            c.error(
                "app-not-shipped",
                "runtime.app",
                format!("runtime.app '{app}' imports package '{package}', which no source.code or source.extra_code entry ships"),
            )
            .help = Some(format!("add '{package}' to source.code or to an extra_code entry's paths"));
        }
    }
}

/// A path as the manifest gives it, against `base` (`~/` is the home directory).
fn resolve(base: &Path, p: &str) -> std::path::PathBuf {
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return std::path::PathBuf::from(home).join(rest);
    }
    base.join(p)
}

/// Whether a wheel entry (a path, or a `*` glob in its last component) names a file.
fn wheel_exists(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.contains('*') {
        return path.is_file();
    }
    let (prefix, suffix) = name.split_once('*').unwrap_or((&name, ""));
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.filter_map(Result::ok).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.len() >= prefix.len() + suffix.len() && n.starts_with(prefix) && n.ends_with(suffix)
        })
    })
}

/// `runtime.plugin.path` and `runtime.vllm.path` (pip-installable directories),
/// `runtime.vllm.wheel` and `runtime.wheels` (files), as `package` stages them.
fn local_runtime_sources(c: &mut Checker<'_>, base: &Path) {
    // A block whose values do not read has been reported by the runtime checks already.
    let Ok(rt) = c.m.runtime_spec() else { return };
    let mut findings: Vec<(String, String)> = Vec::new();
    let (plugin, wheels) = match &rt.kind {
        KindRuntime::VllmPlugin(p) => (p.plugin.as_ref(), p.wheels.as_slice()),
        _ => (None, &[][..]),
    };
    for (key, source) in [("plugin", plugin), ("vllm", rt.vllm())] {
        let Some(ComponentSource::Path { path: p }) = source else {
            continue;
        };
        let dir = resolve(base, p);
        let path = format!("runtime.{key}.path");
        if !dir.is_dir() {
            findings.push((
                path.clone(),
                format!(
                    "{path} '{p}' is not a directory (resolved to {})",
                    dir.display()
                ),
            ));
        } else if !dir.join("pyproject.toml").is_file() && !dir.join("setup.py").is_file() {
            findings.push((path.clone(), format!("{path} '{p}' has neither pyproject.toml nor setup.py; it must be a pip-installable project")));
        }
    }
    if let Some(ComponentSource::Wheel { wheel: w }) = rt.vllm()
        && !wheel_exists(&resolve(base, w))
    {
        findings.push((
            "runtime.vllm.wheel".into(),
            format!(
                "runtime.vllm.wheel '{w}' matches no file (resolved to {})",
                resolve(base, w).display()
            ),
        ));
    }
    for (i, w) in wheels.iter().enumerate() {
        if !wheel_exists(&resolve(base, w)) {
            findings.push((
                format!("runtime.wheels[{i}]"),
                format!(
                    "runtime.wheels entry '{w}' matches no file (resolved to {})",
                    resolve(base, w).display()
                ),
            ));
        }
    }
    for (path, message) in findings {
        c.error("source-missing", &path, message);
    }
}
