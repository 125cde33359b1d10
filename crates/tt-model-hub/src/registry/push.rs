//! Pushing one image to a registry: every blob the repository lacks (mounted from another
//! repository of the same registry when one is known to hold it, else uploaded), then the
//! manifest, byte for byte, under its tag. The manifest goes last, so the repository never
//! names a blob it lacks; a push cut short leaves blobs that the re-run finds and skips.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::client::{Mount, Registry};
use super::error::RegistryError;
use crate::upload::Transfer;

/// One blob of the image, on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobFile {
    /// The blob's digest, `sha256:<hex>`.
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// The file holding the blob's bytes (e.g. `blobs/sha256/<hex>` of an OCI layout).
    pub path: PathBuf,
}

/// The image to push: its manifest (bytes as they will be stored) and the blobs it names.
#[derive(Debug, Clone)]
pub struct ImageToPush {
    /// The manifest's exact bytes; its digest is what the package pins.
    pub manifest: Vec<u8>,
    /// The manifest's media type, sent as `Content-Type` (e.g.
    /// `application/vnd.oci.image.manifest.v1+json`).
    pub media_type: String,
    /// `sha256:` of `manifest`.
    pub manifest_digest: String,
    /// Config first, then the layers.
    pub blobs: Vec<BlobFile>,
}

/// What a push did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushReport {
    /// The digest the registry stored the manifest as (equal to the layout's).
    pub manifest_digest: String,
    /// Blobs the repository already had.
    pub present: usize,
    /// Blobs linked from another repository (cross-repo mount).
    pub mounted: usize,
    /// Blobs uploaded, and their bytes.
    pub uploaded: usize,
    /// Total bytes of the uploaded blobs.
    pub bytes_sent: u64,
}

/// Pushes `image` to `registry` under `tag`. `mount_from` names, per blob digest, a repository
/// of the same registry believed to hold it.
pub async fn push_image(
    registry: &Registry,
    image: &ImageToPush,
    tag: &str,
    mount_from: &HashMap<String, String>,
    transfer: Arc<dyn Transfer>,
) -> Result<PushReport, RegistryError> {
    let mut report = PushReport::default();
    let mut missing = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for blob in image.blobs.iter().filter(|b| seen.insert(b.digest.clone())) {
        if registry.blob_exists(&blob.digest).await? {
            report.present += 1;
        } else {
            missing.push(blob);
        }
    }
    transfer.total(missing.iter().map(|b| b.size).sum());
    let own = &registry.target().repository;
    for blob in missing {
        let session = match mount_from.get(&blob.digest).filter(|from| *from != own) {
            Some(from) => match registry.mount(&blob.digest, from).await? {
                Mount::Mounted => {
                    report.mounted += 1;
                    transfer.bytes(blob.size);
                    continue;
                }
                Mount::Upload(location) => location,
            },
            None => registry.start_upload().await?,
        };
        transfer.file(&blob.digest);
        registry
            .finish_upload(
                &session,
                &blob.digest,
                &blob.path,
                blob.size,
                transfer.clone(),
            )
            .await?;
        report.uploaded += 1;
        report.bytes_sent += blob.size;
    }
    let stored = registry
        .put_manifest(tag, &image.media_type, &image.manifest)
        .await?;
    if stored != image.manifest_digest {
        return Err(RegistryError::ManifestRewritten {
            pushed: image.manifest_digest.clone(),
            stored,
        });
    }
    report.manifest_digest = stored;
    Ok(report)
}
