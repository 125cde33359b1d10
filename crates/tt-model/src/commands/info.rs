//! `tt-model info <org/name[@rev]> [--json]`: what a published package is, read from the Hub
//! without downloading it: kind, arch, hardware, image (size of its layout, digest), weights
//! pin, card summary, visibility, catalog listing, commit.

use serde_json::{Value, json};
use tt_model_hub::card_tags::CATALOG_TAG;
use tt_model_local::Local;
use tt_model_manifest::WireManifest;

use super::hub;
use crate::args::InfoArgs;
use crate::printer::Printer;
use crate::progress::human_bytes;
use crate::{ExitStatus, UserError};
use tt_model_local::state::WIRE_MANIFEST;
use tt_model_local::target;

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
    let (id, rev) = target::split_repo(&args.id).ok_or_else(|| {
        UserError(format!(
            "{} is not a package id: expected <org>/<name>[@<revision>]",
            args.id
        ))
    })?;
    hub::check_repo_id(&id)?;
    let client = hub::client(local, false)?;
    let rt = crate::runtime()?;
    let nothing = "nothing was read";
    let meta = rt
        .block_on(client.repo_meta(&id))
        .map_err(hub::consequence(nothing))?
        .ok_or_else(|| {
            anyhow::Error::new(tt_model_hub::HubError::NotFound {
                repo: id.clone(),
                revision: rev.clone().unwrap_or_else(|| "main".into()),
                endpoint: client.env.endpoint.clone(),
                status: 404,
            })
        })?;
    let at = rev.unwrap_or_else(|| meta.sha.clone());
    if !meta.siblings.iter().any(|s| s.rfilename == WIRE_MANIFEST) {
        return Err(UserError(format!(
            "{id} is not a tt-model package (no {WIRE_MANIFEST})."
        ))
        .into());
    }
    let bytes = rt
        .block_on(client.read_file(&id, &at, WIRE_MANIFEST))
        .map_err(hub::consequence(nothing))?;
    let wire = WireManifest::from_json(&String::from_utf8_lossy(&bytes)).map_err(|e| {
        UserError(format!(
            "the published {WIRE_MANIFEST} of {id} cannot be read: {e}"
        ))
    })?;
    let f = facts(&meta, &wire);
    if args.json {
        printer.out(&serde_json::to_string_pretty(&f)?);
        return Ok(ExitStatus::Success);
    }
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let lines = [
        ("package", format!("{} ({})", s(&f["id"]), s(&f["name"]))),
        ("commit", s(&f["commit"])),
        ("kind", s(&f["kind"])),
        ("arch", s(&f["arch"])),
        (
            "hardware",
            f["hardware"]
                .as_array()
                .map(|a| a.iter().map(s).collect::<Vec<_>>().join(", "))
                .unwrap_or_default(),
        ),
        (
            "image",
            format!(
                "{} · {} · {}",
                s(&f["image"]),
                s(&f["image_digest"]),
                human_bytes(f["image_bytes"].as_u64().unwrap_or(0))
            ),
        ),
        (
            "weights",
            f["weights"]
                .as_object()
                .map(|w| format!("{}@{}", s(&w["repo"]), s(&w["revision"])))
                .unwrap_or_else(|| "-".into()),
        ),
        ("card", s(&f["card"]["summary"])),
        (
            "card gate",
            match (
                f["card"]["performance"].as_bool(),
                f["card"]["limitations"].as_bool(),
            ) {
                (Some(true), Some(true)) => "performance and limitations given".to_string(),
                _ => "incomplete: performance or limitations missing (publish is refused)"
                    .to_string(),
            },
        ),
        (
            "visibility",
            if f["private"] == true {
                "private".into()
            } else {
                "public".into()
            },
        ),
        (
            "listed",
            if f["listed"] == true {
                "yes (community catalog)".into()
            } else {
                "no".into()
            },
        ),
    ];
    for (k, v) in lines {
        printer.out(&format!("{k:<11} {v}"));
    }
    Ok(ExitStatus::Success)
}
