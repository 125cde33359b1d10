//! Pulling one image by digest into an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/…`) that the engine loader reads. Every byte is checked against the digest
//! that names it; the layout is written into a fresh temp directory beside `dest` and renamed
//! into place only when complete, so no half layout is ever left under `dest`.

use std::path::Path;

use serde_json::{Value, json};

use super::client::Registry;
use super::error::RegistryError;
use crate::upload::UploadReporter;

/// What a pull wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullReport {
    /// Blobs fetched (config and layers) and their bytes.
    pub blobs: usize,
    pub bytes: u64,
}

/// A descriptor's digest and size.
fn descriptor(v: &Value) -> Option<(String, u64)> {
    Some((v["digest"].as_str()?.to_string(), v["size"].as_u64()?))
}

/// Pulls the manifest `digest` and its blobs into the OCI layout `dest` (which must not
/// exist), naming the image `ref_name` in the index.
pub async fn pull_layout(
    registry: &Registry,
    digest: &str,
    ref_name: &str,
    dest: &Path,
    reporter: &dyn UploadReporter,
) -> Result<PullReport, RegistryError> {
    let (manifest, media_type) = registry.get_manifest(digest).await?;
    let bad = |detail: &str| RegistryError::BadResponse {
        url: registry.target().pinned(digest),
        detail: detail.to_string(),
    };
    let doc: Value = serde_json::from_slice(&manifest)
        .map_err(|e| bad(&format!("the manifest is not JSON: {e}")))?;
    if doc["manifests"].is_array() {
        return Err(bad("the digest names an index, not an image manifest"));
    }
    let mut blobs =
        vec![descriptor(&doc["config"]).ok_or_else(|| bad("the manifest has no config"))?];
    for l in doc["layers"]
        .as_array()
        .ok_or_else(|| bad("the manifest has no layers"))?
    {
        blobs.push(descriptor(l).ok_or_else(|| bad("a layer descriptor lacks digest or size"))?);
    }
    for (d, _) in &blobs {
        if d.strip_prefix("sha256:")
            .is_none_or(|h| h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(bad(&format!("unsupported blob digest {d}")));
        }
    }
    blobs.sort();
    blobs.dedup();
    reporter.planned(blobs.iter().map(|(_, s)| s).sum());

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
        reporter.file_started(d);
        let path = sha.join(d.trim_start_matches("sha256:"));
        registry.get_blob(d, *size, &path, reporter).await?;
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
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": media_type,
            "digest": digest,
            "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": ref_name},
        }],
    });
    write("index.json", index.to_string().as_bytes())?;
    write("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    let done = tmp.keep();
    std::fs::rename(&done, dest).map_err(|e| {
        let _ = std::fs::remove_dir_all(&done);
        RegistryError::io("Cannot move the pulled layout to", dest)(e)
    })?;
    Ok(report)
}
