//! The image's trip through an OCI registry, for a package whose manifest sets
//! `image.registry`: `push` sends the staged layout's blobs and manifest (skipping what the
//! registry has, mounting what another repository of it holds); `pull`/`serve <id>` fetch the
//! image by the digest the package pins through `tt_model_local::registry`.
//!
//! Which repository holds which blob is remembered in the state root's blob index
//! ([`tt_model_local::blob_index`]), so a second package on the same base mounts the base
//! layers instead of sending them again.

use std::path::Path;
use std::sync::Arc;

use tt_model_hub::registry::Registry;
use tt_model_hub::registry::push::{BlobFile, ImageToPush, PushReport, push_image};
use tt_model_local::Local;
use tt_model_local::blob_index::BlobIndex;
use tt_model_local::registry::target_of;
use tt_model_manifest::WireManifest;
use tt_model_oci::OciLayout;

use super::UploadBar;
use crate::UserError;
use crate::printer::Printer;
use crate::progress::human_bytes;

/// The staged layout as the registry will store it; refuses a layout that is not the image
/// the manifest pins (a package staged before registry pinning, or edited since).
fn image_to_push(dir: &Path, wire: &WireManifest) -> anyhow::Result<ImageToPush> {
    let layout = OciLayout::open(&dir.join("image")).map_err(|e| UserError(e.to_string()))?;
    let pinned = wire.container.image.digest.as_deref().unwrap_or_default();
    if pinned != layout.manifest_digest {
        return Err(UserError(format!(
            "{}: image.digest ({}) is not the staged layout's manifest ({}); a registry package pins the manifest it pushes.\n  → re-stage it: tt-model package --container tt-model.yaml",
            dir.display(),
            if pinned.is_empty() { "none" } else { pinned },
            layout.manifest_digest
        ))
        .into());
    }
    let manifest_path = dir
        .join("image/blobs/sha256")
        .join(layout.manifest_digest.trim_start_matches("sha256:"));
    let manifest = std::fs::read(&manifest_path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", manifest_path.display()))?;
    let media_type = layout.manifest_media_type.clone();
    let blobs = std::iter::once(&layout.config)
        .chain(&layout.layers)
        .map(|b| BlobFile {
            digest: b.digest.clone(),
            size: b.size,
            path: b.path.clone(),
        })
        .collect();
    Ok(ImageToPush {
        manifest,
        media_type,
        manifest_digest: layout.manifest_digest,
        blobs,
    })
}

/// Pushes the staged image of `dir` to its registry; returns what it did and the pinned
/// reference (`host/repository@digest`).
pub(crate) async fn push(
    local: &Local,
    dir: &Path,
    wire: &WireManifest,
    printer: &Printer,
) -> anyhow::Result<(PushReport, String)> {
    let target = target_of(wire)?;
    let image = image_to_push(dir, wire)?;
    let tag = wire
        .container
        .image
        .tag
        .clone()
        .unwrap_or_else(|| "latest".into());
    let index = BlobIndex::under(local);
    let known = index.known(&target.host);
    let mut sources: Vec<String> = known.values().cloned().collect();
    sources.sort();
    sources.dedup();
    let registry = Registry::connect(target.clone(), true, &sources).await?;
    let bar = Arc::new(UploadBar::new(&format!(
        "{}/{}",
        target.host, target.repository
    )));
    let report = push_image(&registry, &image, &tag, &known, bar.clone()).await;
    bar.finish();
    let report = report?;
    let digests: Vec<String> = image.blobs.iter().map(|b| b.digest.clone()).collect();
    index.remember(&target.host, &target.repository, &digests);
    let pinned = target.pinned(&report.manifest_digest);
    printer.done(
        &format!("pushed image {}:{tag}", target.repository),
        Some(&format!(
            "{} · {} blobs sent ({}) · {} already there · {} mounted",
            target.host,
            report.uploaded,
            human_bytes(report.bytes_sent),
            report.present,
            report.mounted
        )),
    );
    Ok((report, pinned))
}
