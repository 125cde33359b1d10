//! `tt-model info <org/name[@rev]> [--arch A] [--json]`: a published package read from the Hub
//! without downloading it. As the original: the manifest (`tt_kernel_manifest.json`, pretty
//! JSON) on stdout, an empty line, then the verdict against this machine (`✓ compatible …`, or
//! `! compatibility issues` and one `[FATAL]`/`[warn] field: bundle='…' local='…'` line each).
//! `tt model info` parses exactly that: the JSON object first, the rest as the verdict text, so
//! nothing else may reach stdout. `--json` is ours: a summary (kind, arch, hardware, image and
//! its size, weights pin, card, visibility, listing, commit) with the verdict as an object.

use serde_json::{Value, json};
use tt_model_hub::card_tags::CATALOG_TAG;
use tt_model_local::Local;
use tt_model_local::compat::{self, CompatibilityReport, EnvSource};
use tt_model_manifest::WireManifest;

use crate::ExitStatus;
use crate::args::InfoArgs;
use crate::printer::Printer;
use tt_model_local::published;

/// The facts `info` shows (pure: from the repo listing and the manifest).
pub(crate) fn facts(meta: &tt_model_hub::hub::RepoMeta, wire: &WireManifest) -> Value {
    let c = &wire.container;
    let mut hardware: Vec<String> = c.serve.hardware.iter().cloned().collect();
    for p in &c.serve_profiles {
        if let Ok((_, s)) = wire.resolve_profile(Some(&p.name))
            && let Some(h) = s.hardware
            && !hardware.contains(&h)
        {
            hardware.push(h);
        }
    }
    let image_bytes: u64 = meta
        .siblings
        .iter()
        .filter(|s| s.rfilename.starts_with("image/blobs/"))
        .filter_map(|s| s.size.or(s.lfs.as_ref().map(|l| l.size)))
        .sum();
    let digest = wire.recorded_image_digest();
    let card = c.card.as_ref();
    let summary = card
        .and_then(|k| k.description.as_deref())
        .map(|d| d.lines().next().unwrap_or("").to_string());
    let has = |v: Option<&String>| v.is_some_and(|s| !s.trim().is_empty());
    json!({
        "id": meta.id,
        "commit": meta.sha,
        "name": wire.name,
        "kind": c.kind.as_str(),
        "arch": wire.arch,
        "hardware": hardware,
        "image": wire.run_image(),
        "image_digest": digest,
        "image_bytes": image_bytes,
        "registry": c.image.pull_ref(),
        "weights": wire.weights.as_ref().map(|w| json!({ "repo": w.repo_id, "revision": w.revision })),
        "card": {
            "summary": summary,
            "performance": has(card.and_then(|k| k.performance.as_ref())),
            "limitations": has(card.and_then(|k| k.limitations.as_ref())),
        },
        "private": meta.private,
        "listed": meta.tags.iter().any(|t| t == CATALOG_TAG),
    })
}

/// Runs `tt-model info`.
pub fn run(args: &InfoArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let published = crate::block_on(async { Ok(published::read(local, &args.id).await?) })?;
    let (meta, wire) = (&published.meta, &published.wire);
    let report = compat::compare(wire, &compat::detect_here(args.arch.as_deref()));
    if args.json {
        let mut f = facts(meta, wire);
        f["compatibility"] = serde_json::to_value(&report)?;
        printer.out(&serde_json::to_string_pretty(&f)?);
        return Ok(ExitStatus::Success);
    }
    printer.out_raw(&wire.to_json());
    printer.out("");
    for line in verdict_lines(&report, wire.container.runs_without_card()) {
        printer.out(&line);
    }
    Ok(ExitStatus::Success)
}

/// The verdict as the original prints it after the manifest; `cardless`: the package's runtime
/// needs no Tenstorrent device, said when no card was there to judge against.
pub(crate) fn verdict_lines(report: &CompatibilityReport, cardless: bool) -> Vec<String> {
    if !report.compatible {
        let mut lines = vec!["  ! compatibility issues".to_string()];
        for i in &report.issues {
            let tag = if i.fatal { "FATAL" } else { "warn" };
            lines.push(format!(
                "    [{tag}] {}: bundle={} local={}",
                i.field,
                py_repr(&i.expected),
                py_repr(&i.detected)
            ));
        }
        return lines;
    }
    if report.local.source != EnvSource::None {
        return vec!["✓ compatible with the local environment".into()];
    }
    // The original says "compatible" here too, having judged nothing; say what was not judged.
    if cardless {
        return vec![
            "✓ compatible with the local environment (its runtime needs no Tenstorrent card)"
                .into(),
        ];
    }
    vec![
        "○ no Tenstorrent card detected, so arch and chip count were not judged (--arch <arch> judges against one)"
            .into(),
    ]
}

/// A string as Python's `repr` writes it (`'blackhole'`), as the original's verdict lines do.
fn py_repr(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}
