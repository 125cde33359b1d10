//! `tt-model list`: the installed packages (the installed-packages database, plus pulled
//! manifests from before it existed) and whether each can serve now.

use crate::ExitStatus;
use crate::args::ListArgs;
use crate::events::DiagnosisCard;
use crate::printer::Printer;
use crate::progress::human_bytes;
use tt_model_local::Local;
use tt_model_local::readiness::{self, Readiness};

/// The tag part of an image reference (`tt-model/x:7c27…` → `7c27…`).
fn tag_of(image: &str) -> &str {
    if let Some((_, digest)) = image.split_once('@') {
        return digest;
    }
    match image.rsplit_once(['@', ':']) {
        Some((repo, tag)) if !tag.contains('/') && !repo.is_empty() => tag,
        _ => image,
    }
}

fn json_row(r: &Readiness) -> serde_json::Value {
    let e = &r.entry;
    serde_json::json!({
        "id": e.repo_id,
        "name": e.name,
        "source": e.source,
        "kind": e.kind,
        "arch": e.arch,
        "image": e.image,
        "image_digest": e.image_digest,
        "image_loaded_id": e.image_loaded_id,
        "size": r.size,
        "profiles": e.profiles,
        "default_profile": e.profile,
        "revision": e.revision,
        "manifest": e.manifest,
        "ready": r.problems.is_empty(),
        "running": r.running,
        "problem": r.problems.first(),
        "problems": r.problems,
    })
}

/// Runs `tt-model list`.
pub fn run(args: &ListArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    crate::block_on(async {
        let listing = readiness::listing(local, &mut |w| printer.warn(&w)).await;
        let unreachable = listing
            .engine
            .and_then(|e| crate::diagnosis_for(&e.into(), local));
        let rows = listing.packages;
        if args.json {
            let v: Vec<_> = rows.iter().map(json_row).collect();
            printer.out(&serde_json::to_string_pretty(&v)?);
            return Ok(engine_verdict(printer, &rows, unreachable));
        }
        if rows.is_empty() {
            printer.skipped(
                "No packages installed.",
                Some("pull one: tt-model pull <org>/<name>, or stage one: tt-model package --container <tt-model.yaml>"),
            );
            return Ok(ExitStatus::Success);
        }
        for r in &rows {
            let e = &r.entry;
            let glyph = if r.problems.is_empty() { "✓" } else { "✗" };
            let size = r
                .size
                .map(|s| human_bytes(s.max(0) as u64))
                .unwrap_or_else(|| "-".into());
            let run = if r.running > 0 {
                format!("  ▶ {} running", r.running)
            } else {
                String::new()
            };
            printer.out(&format!(
                "{glyph} {}  {}  {}  image {}  {size}  profile {}{run}",
                e.repo_id,
                e.kind,
                e.arch.as_deref().unwrap_or("-"),
                tag_of(&e.image),
                e.profile
            ));
        }
        for r in &rows {
            for p in &r.problems {
                printer.warn(&format!("{}: {p}", r.entry.repo_id));
            }
        }
        Ok(engine_verdict(printer, &rows, unreachable))
    })
}

/// Without the engine, whether a package can serve is unknown: the listing stands, then the
/// engine's card and exit 1 (nothing installed needs no engine).
fn engine_verdict(
    printer: &Printer,
    rows: &[Readiness],
    unreachable: Option<DiagnosisCard>,
) -> ExitStatus {
    match unreachable {
        Some(card) if !rows.is_empty() => {
            printer.fail(&DiagnosisCard {
                consequence: Some("whether each package can serve is unknown".into()),
                ..card
            });
            ExitStatus::Failure
        }
        _ => ExitStatus::Success,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_of_references() {
        assert_eq!(tag_of("tt-model/x:7c27"), "7c27");
        assert_eq!(tag_of("reg:5000/x:1"), "1");
        assert_eq!(tag_of("reg:5000/x"), "reg:5000/x");
        assert_eq!(tag_of("x@sha256:ab"), "sha256:ab");
    }
}
