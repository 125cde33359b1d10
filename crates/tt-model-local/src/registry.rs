//! A package's image in an OCI registry (`image.registry` set): where it lives, and the pull
//! of the pinned image into a layout the engine loads (`pull`, and `serve <id>` through it).

use std::path::{Path, PathBuf};

use tt_model_hub::registry::{Registry, RegistryTarget, pull};
use tt_model_manifest::WireManifest;

use crate::LocalError;
use crate::event::Event;
use crate::progress::{AsUpload, Progress, human_bytes};

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
    let report = pull::pull_layout(
        &registry,
        &digest,
        &ref_name,
        &dest,
        &AsUpload(bar.as_ref()),
    )
    .await;
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
