//! `tt-model list`: the installed (pulled) packages and whether each can serve now.

use std::path::PathBuf;

use super::serve::package::{Package, WIRE_MANIFEST};
use super::serve::{host, target};
use crate::ExitStatus;
use crate::args::ListArgs;
use crate::printer::Printer;

/// Every pulled package manifest, sorted by directory name.
pub(crate) fn installed() -> Vec<(PathBuf, anyhow::Result<Package>)> {
    let dir = target::state_root().join("pulled");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path().join(WIRE_MANIFEST))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter()
        .map(|p| (p.clone(), Package::load(&p)))
        .collect()
}

/// Runs `tt-model list`.
pub fn run(args: &ListArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let entries = installed();
        let client = host::engine().await.ok();
        let mut rows = Vec::new();
        for (path, pkg) in &entries {
            let id = path.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().replacen("__", "/", 1)).unwrap_or_default();
            let pkg = match pkg {
                Ok(p) => p,
                Err(e) => {
                    rows.push(serde_json::json!({"id": id, "manifest": path, "ready": false, "problem": e.to_string()}));
                    continue;
                }
            };
            let (loaded, running) = match &client {
                Some(c) => {
                    let loaded = c.image(&pkg.image).await.ok().flatten().is_some();
                    let running = super::stop::running_of(c, &pkg.name, None, false).await.map(|v| v.len()).unwrap_or(0);
                    (Some(loaded), running)
                }
                None => (None, 0),
            };
            let problem = match loaded {
                Some(true) => None,
                Some(false) => Some(format!("image {} is not loaded; re-pull: tt-model pull {id}", pkg.image)),
                None => Some("the container engine is not reachable, so the image could not be checked".to_string()),
            };
            rows.push(serde_json::json!({
                "id": id,
                "name": pkg.name,
                "kind": pkg.kind,
                "image": pkg.image,
                "profiles": pkg.profile_names(),
                "default_profile": pkg.default_profile,
                "weights": pkg.weights.as_ref().map(|w| format!("{}@{}", w.repo_id, w.revision)),
                "manifest": path,
                "ready": problem.is_none(),
                "running": running,
                "problem": problem,
            }));
        }
        if args.json {
            printer.out(&serde_json::to_string_pretty(&rows)?);
            return Ok(ExitStatus::Success);
        }
        if rows.is_empty() {
            printer.skipped("No packages installed.", Some("pull one: tt-model pull <org>/<name>"));
            return Ok(ExitStatus::Success);
        }
        for r in &rows {
            let s = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("-").to_string();
            let glyph = if r["ready"].as_bool() == Some(true) { "✓" } else { "✗" };
            let running = r["running"].as_u64().unwrap_or(0);
            let run = if running > 0 { format!("  ▶ {running} running") } else { String::new() };
            printer.out(&format!("{glyph} {}  {}  image {}  profile {}{run}", s("id"), s("kind"), s("image"), s("default_profile")));
        }
        for r in &rows {
            if let Some(p) = r.get("problem").and_then(|v| v.as_str()) {
                printer.warn(&format!("{}: {p}", r["id"].as_str().unwrap_or("?")));
            }
        }
        Ok(ExitStatus::Success)
    })
}
