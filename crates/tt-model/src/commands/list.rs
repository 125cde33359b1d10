//! `tt-model list`: the installed packages (the installed-packages database, plus pulled
//! manifests from before it existed) and whether each can serve now.

use tt_model_engine::Client;
use tt_model_engine::images::{ImageState, judge};
use tt_model_local::localdb::{Entry, Source};

use crate::ExitStatus;
use crate::args::ListArgs;
use crate::events::DiagnosisCard;
use crate::printer::Printer;
use crate::progress::human_bytes;
use tt_model_local::Local;
use tt_model_local::host;
use tt_model_local::installed;
use tt_model_local::package::Package;

/// One line of the listing, with why it cannot serve.
struct Row {
    entry: Entry,
    size: Option<i64>,
    running: usize,
    problems: Vec<String>,
}

/// Checks one entry against its manifest and the engine (`None`: engine unreachable).
async fn check(mut entry: Entry, client: Option<&Client>) -> Row {
    let mut problems = Vec::new();
    let manifest_ok = entry.manifest.is_file();
    if manifest_ok {
        // The manifest is the truth for what serve will run; the entry may be older.
        if let Ok(pkg) = Package::load(&entry.manifest) {
            entry.image = pkg.image.clone();
            entry.kind = pkg.kind.clone();
            entry.profile = pkg.default_profile.clone();
            if let Some(d) = pkg.recorded_digest() {
                entry.image_digest = Some(d);
            }
        }
    } else {
        problems.push(format!(
            "manifest {} is missing (install dir removed); forget it: tt-model rm {}",
            entry.manifest.display(),
            entry.repo_id
        ));
    }
    let (mut size, mut running) = (None, 0);
    match client {
        None => problems.push(
            "the container engine is not reachable, so the image could not be checked".into(),
        ),
        Some(c) => {
            let digest = entry.image_digest.clone();
            let known = entry.known_loaded_id(digest.as_deref());
            match c.image(&entry.image).await.map(|f| judge(f, digest.as_deref(), known)) {
                Err(e) => problems.push(format!("cannot inspect image {}: {e}", entry.image)),
                Ok(ImageState::Matches(f)) => size = Some(f.size),
                Ok(ImageState::Missing) => problems.push(format!(
                    "image {} is not loaded; {}",
                    entry.image,
                    reload_hint(&entry)
                )),
                Ok(ImageState::Different { facts, expected }) => problems.push(format!(
                    "image {} is a different build than recorded (expected {expected}, loaded {}); {}",
                    entry.image,
                    facts.id,
                    reload_hint(&entry)
                )),
            }
            running = tt_model_local::containers::of_package(c, &entry.name, None, false)
                .await
                .map(|v| v.len())
                .unwrap_or(0);
        }
    }
    Row {
        entry,
        size,
        running,
        problems,
    }
}

/// How to get the recorded image back.
fn reload_hint(e: &Entry) -> String {
    let staged_layout = e
        .manifest
        .parent()
        .is_some_and(|d| d.join("image/oci-layout").is_file());
    if staged_layout {
        return format!(
            "serve loads it from the staged layout: tt-model serve {}",
            e.manifest.display()
        );
    }
    match e.source {
        Source::Pulled => format!("re-pull: tt-model pull {}", e.repo_id),
        Source::Staged => "re-build: tt-model package --container <tt-model.yaml>".into(),
    }
}

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

fn json_row(r: &Row) -> serde_json::Value {
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
        let entries = installed::all(local, &mut |w| printer.warn(&w));
        let (client, unreachable) = match host::engine().await {
            Ok(c) => (Some(c), None),
            Err(e) => (None, crate::diagnosis_for(&e.into(), local)),
        };
        let mut rows = Vec::new();
        for e in entries {
            rows.push(check(e, client.as_ref()).await);
        }
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
    rows: &[Row],
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
