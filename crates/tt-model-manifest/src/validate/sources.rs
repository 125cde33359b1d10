//! `--check-sources`: the file-system checks `package` runs before staging. Paths resolve
//! against a base directory (the working directory of `tt-model`, as in the original).

use std::path::Path;

use super::Checker;
use crate::types::{CodeRoot, Kind};

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
    if m.kind == Kind::TtDitServer
        && let Some(app) = m.runtime.get("app").and_then(|v| v.as_str())
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
