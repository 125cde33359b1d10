//! A package's image in an OCI registry (`image.registry` set): where it lives, `push` sending
//! the staged layout's blobs and manifest (skipping what the registry has, mounting what
//! another repository of it holds, as the blob index remembers), and the pull of the pinned
//! image into a layout the engine loads (`pull`, and `serve <id>` through it).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tt_model_hub::registry::push::{BlobFile, ImageToPush, PushReport, push_image};
use tt_model_hub::registry::{Registry, RegistryTarget, pull};
use tt_model_manifest::WireManifest;
use tt_model_oci::OciLayout;

use crate::blob_index::BlobIndex;
use crate::event::Event;
use crate::progress::{Progress, Transfer, human_bytes};
use crate::{Local, LocalError};

/// Where the package's image goes: `image.registry` + `image.repository` (default: the name).
pub fn target_of(wire: &WireManifest) -> Result<RegistryTarget, LocalError> {
    let image = &wire.container.image;
    let repository = if image.repository.is_empty() {
        wire.name.as_str()
    } else {
        image.repository.as_str()
    };
    RegistryTarget::new(&image.registry, repository)
        .map_err(|e| LocalError::refused("image", e.to_string()))
}

/// Fetches the image the package pins (by digest) from its registry into a fresh layout under
/// `under`, its bytes as the `image` step's progress; returns the layout's directory.
pub async fn pull_layout(
    wire: &WireManifest,
    under: &Path,
    progress: &dyn Progress,
) -> Result<PathBuf, LocalError> {
    let target = target_of(wire)?;
    let Some(digest) = wire
        .container
        .image
        .digest
        .clone()
        .filter(|d| !d.is_empty())
    else {
        return Err(LocalError::refused(
            "image",
            format!(
                "{} names registry {} but pins no image digest: ask its publisher to push it again",
                wire.name, wire.container.image.registry
            ),
        ));
    };
    let dest = under.join(digest.trim_start_matches("sha256:"));
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|detail| LocalError::Io {
            action: "clear",
            path: dest.clone(),
            detail,
        })?;
    }
    let registry = Registry::connect(target.clone(), false, &[]).await?;
    let bar = progress.transfer("image", &format!("{}/{}", target.host, target.repository));
    let ref_name = wire.container.image.tag.clone().unwrap_or_default();
    let report = pull::pull_layout(&registry, &digest, &ref_name, &dest, bar.as_ref()).await;
    bar.finish();
    let report = report?;
    progress.emit(Event::done(
        format!("fetched image {}", target.pinned(&digest)),
        Some(format!(
            "{} blobs · {} downloaded",
            report.blobs,
            human_bytes(report.bytes)
        )),
    ));
    Ok(dest)
}

/// The staged layout as the registry will store it; refuses a layout that is not the image
/// the manifest pins (a package staged before registry pinning, or edited since).
fn image_to_push(dir: &Path, wire: &WireManifest) -> Result<ImageToPush, LocalError> {
    let layout = OciLayout::open(&dir.join("image"))
        .map_err(|e| LocalError::refused("image", e.to_string()))?;
    let pinned = wire.container.image.digest.as_deref().unwrap_or_default();
    if pinned != layout.manifest_digest {
        return Err(LocalError::refused(
            "image",
            format!(
                "{}: image.digest ({}) is not the staged layout's manifest ({}); a registry package pins the manifest it pushes.\n  → re-stage it: tt-model package --container tt-model.yaml",
                dir.display(),
                if pinned.is_empty() { "none" } else { pinned },
                layout.manifest_digest
            ),
        ));
    }
    let manifest_path = dir
        .join("image/blobs/sha256")
        .join(layout.manifest_digest.trim_start_matches("sha256:"));
    let manifest = std::fs::read(&manifest_path).map_err(|detail| LocalError::Io {
        action: "read",
        path: manifest_path.clone(),
        detail,
    })?;
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
pub async fn push(
    local: &Local,
    dir: &Path,
    wire: &WireManifest,
    progress: &dyn Progress,
) -> Result<(PushReport, String), LocalError> {
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
    let bar: Arc<dyn Transfer> = progress
        .transfer("push", &format!("{}/{}", target.host, target.repository))
        .into();
    let report = push_image(&registry, &image, &tag, &known, bar.clone()).await;
    bar.finish();
    let report = report?;
    let digests: Vec<String> = image.blobs.iter().map(|b| b.digest.clone()).collect();
    index.remember(&target.host, &target.repository, &digests);
    let pinned = target.pinned(&report.manifest_digest);
    progress.emit(Event::done(
        format!("pushed image {}:{tag}", target.repository),
        Some(format!(
            "{} · {} blobs sent ({}) · {} already there · {} mounted",
            target.host,
            report.uploaded,
            human_bytes(report.bytes_sent),
            report.present,
            report.mounted
        )),
    ));
    Ok((report, pinned))
}
