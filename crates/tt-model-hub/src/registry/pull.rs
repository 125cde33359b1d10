//! Pulling one image by digest into an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/…`) that the engine loader reads. Every byte is checked against the digest
//! that names it; the layout is written into a fresh temp directory beside `dest` and renamed
//! into place only when complete, so no half layout is ever left under `dest`.

use std::path::Path;

use std::str::FromStr as _;

use oci_spec::image::{Descriptor, Digest, DigestAlgorithm, ImageManifest, MediaType};

use tt_model_oci::index::LayoutWriteError;

use super::client::Registry;
use super::error::RegistryError;
use crate::upload::Transfer;

/// What a pull wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullReport {
    /// Blobs fetched (config and layers) and their bytes.
    pub blobs: usize,
    /// Total bytes of the blobs fetched.
    pub bytes: u64,
}

/// Pulls the manifest `digest` and its blobs into the OCI layout `dest` (which must not
/// exist), naming the image `ref_name` in the index.
pub async fn pull_layout(
    registry: &Registry,
    digest: &str,
    ref_name: &str,
    dest: &Path,
    transfer: &dyn Transfer,
) -> Result<PullReport, RegistryError> {
    let (manifest, media_type) = registry.get_manifest(digest).await?;
    let bad = |detail: &str| RegistryError::BadResponse {
        url: registry.target().pinned(digest),
        detail: detail.to_string(),
    };
    let doc = ImageManifest::from_reader(manifest.as_slice()).map_err(|e| {
        bad(&format!(
            "not an image manifest (an index is not pulled): {e}"
        ))
    })?;
    let mut blobs = Vec::new();
    for d in std::iter::once(doc.config()).chain(doc.layers()) {
        if *d.digest().algorithm() != DigestAlgorithm::Sha256 {
            return Err(bad(&format!(
                "unsupported blob digest {} (sha256 only)",
                d.digest()
            )));
        }
        blobs.push((d.digest().to_string(), d.size()));
    }
    blobs.sort();
    blobs.dedup();
    transfer.total(blobs.iter().map(|(_, s)| s).sum());

    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(RegistryError::io("Cannot create", parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".pull-")
        .tempdir_in(parent)
        .map_err(RegistryError::io("Cannot create a temp dir in", parent))?;
    let sha = tmp.path().join("blobs/sha256");
    std::fs::create_dir_all(&sha).map_err(RegistryError::io("Cannot create", &sha))?;
    let mut report = PullReport { blobs: 0, bytes: 0 };
    for (d, size) in &blobs {
        transfer.file(d);
        let path = sha.join(d.trim_start_matches("sha256:"));
        registry.get_blob(d, *size, &path, transfer).await?;
        report.blobs += 1;
        report.bytes += size;
    }
    let write = |name: &str, bytes: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).map_err(RegistryError::io("Cannot write", p))
    };
    write(
        &format!("blobs/sha256/{}", digest.trim_start_matches("sha256:")),
        &manifest,
    )?;
    let spec = |e: oci_spec::OciSpecError| bad(&e.to_string());
    let entry = Descriptor::new(
        MediaType::from(media_type.as_str()),
        manifest.len() as u64,
        Digest::from_str(digest).map_err(spec)?,
    );
    tt_model_oci::index::write_index(tmp.path(), entry, ref_name).map_err(|e| match e {
        LayoutWriteError::Spec(e) => spec(e),
        LayoutWriteError::Io { path, source } => RegistryError::io("Cannot write", path)(source),
    })?;
    let done = tmp.keep();
    std::fs::rename(&done, dest).map_err(|e| {
        let _ = std::fs::remove_dir_all(&done);
        RegistryError::io("Cannot move the pulled layout to", dest)(e)
    })?;
    Ok(report)
}
