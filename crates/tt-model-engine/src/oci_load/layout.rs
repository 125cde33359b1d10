//! An OCI image layout read and checked: its index, the chosen image manifest, and every
//! blob it names (present, of its descriptor's size, the small ones hashed at open).

use super::*;

/// One content-addressed blob of a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// `sha256:<64 hex>`.
    pub digest: String,
    /// Size from the descriptor.
    pub size: u64,
    /// Path inside the layout (may be a symlink).
    pub path: PathBuf,
}

impl Blob {
    pub(super) fn hex(&self) -> &str {
        self.digest.strip_prefix("sha256:").unwrap_or(&self.digest)
    }
}

/// The image an OCI layout holds, resolved to its blobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciLayout {
    /// The layout directory (the one holding `oci-layout` and `index.json`).
    pub dir: PathBuf,
    /// `sha256:…` of the image manifest (the image id on a containerd image store).
    pub manifest_digest: String,
    /// The manifest's media type, as the index names it (what a registry is told).
    pub manifest_media_type: String,
    /// The config blob; its digest is the image id on the classic image store.
    pub config: Blob,
    /// Layer blobs, base first (repeats kept, as the manifest lists them).
    pub layers: Vec<Blob>,
    /// `org.opencontainers.image.ref.name` of the chosen manifest, if any.
    pub ref_name: Option<String>,
}

impl OciLayout {
    /// Reads `dir/oci-layout`, `index.json` and the image manifest, and checks that every
    /// blob exists with its descriptor's size (contents are hashed while loading).
    pub fn open(dir: &Path) -> Result<Self, LoadError> {
        if !dir.join("oci-layout").is_file() {
            return Err(LoadError::NotALayout {
                path: dir.to_path_buf(),
            });
        }
        let bad = |detail: String| LoadError::BadLayout {
            path: dir.to_path_buf(),
            detail,
        };
        let index_path = dir.join("index.json");
        let index_bytes = fs::read(&index_path).map_err(|source| LoadError::Read {
            path: index_path.clone(),
            source,
        })?;
        let index =
            ImageIndex::from_reader(index_bytes.as_slice()).map_err(|e| LoadError::BadLayout {
                path: index_path,
                detail: e.to_string(),
            })?;
        let (manifest_desc, ref_name) = choose_manifest(dir, &index, 0)?;
        let manifest_blob = descriptor(dir, &manifest_desc)?;
        // The manifest names every other blob, so it is trusted only once its bytes match
        // the digest index.json gives it; the config (small, and what the engine keys the
        // image on) likewise before any byte is streamed. Layers are hashed while streaming.
        let manifest = ImageManifest::from_reader(read_verified(&manifest_blob)?.as_slice())
            .map_err(|e| bad(format!("the image manifest: {e}")))?;
        let config = descriptor(dir, manifest.config())?;
        read_verified(&config)?;
        let mut layers = Vec::new();
        for l in manifest.layers() {
            let blob = descriptor(dir, l)?;
            check_size(&blob)?;
            layers.push(blob);
        }
        Ok(OciLayout {
            dir: dir.to_path_buf(),
            manifest_digest: manifest_blob.digest,
            manifest_media_type: manifest_desc.media_type().to_string(),
            config,
            layers,
            ref_name,
        })
    }

    /// The image id the classic image store gives this image (the config digest).
    pub fn image_id(&self) -> &str {
        &self.config.digest
    }

    /// Whether `digest` names this image, as a config digest (classic store) or a manifest
    /// digest (containerd store).
    pub fn is_image(&self, digest: &str) -> bool {
        digest == self.config.digest || digest == self.manifest_digest
    }

    /// Refuses when the layout holds another image than `expected`.
    pub fn expect(&self, expected: &str) -> Result<(), LoadError> {
        if self.is_image(expected) {
            Ok(())
        } else {
            Err(LoadError::LayoutMismatch {
                path: self.dir.clone(),
                expected: expected.to_string(),
                found: self.config.digest.clone(),
            })
        }
    }

    /// Layer blobs without repeats, in first-use order.
    pub(super) fn unique_layers(&self) -> Vec<&Blob> {
        let mut out: Vec<&Blob> = Vec::new();
        for l in &self.layers {
            if !out.iter().any(|o| o.digest == l.digest) {
                out.push(l);
            }
        }
        out
    }
}

/// Picks the image manifest descriptor from an index (following a nested index once).
pub(super) fn choose_manifest(
    dir: &Path,
    index: &ImageIndex,
    depth: usize,
) -> Result<(Descriptor, Option<String>), LoadError> {
    let bad = |detail: String| LoadError::BadLayout {
        path: dir.to_path_buf(),
        detail,
    };
    if index.manifests().is_empty() {
        return Err(bad("index.json lists no manifests".into()));
    }
    let amd64 = |d: &&Descriptor| {
        d.platform()
            .as_ref()
            .is_none_or(|p| *p.architecture() == Arch::Amd64)
    };
    let chosen = index
        .manifests()
        .iter()
        .filter(|d| is_image_manifest(d.media_type()) || is_index(d.media_type()))
        .find(amd64)
        .ok_or_else(|| bad("index.json has no linux/amd64 image manifest".into()))?;
    let ref_name = chosen
        .annotations()
        .as_ref()
        .and_then(|a| a.get(REF_NAME_ANNOTATION))
        .cloned();
    if is_index(chosen.media_type()) {
        if depth > 0 {
            return Err(bad("indexes nest more than one level".into()));
        }
        let nested = descriptor(dir, chosen)?;
        let inner = ImageIndex::from_reader(read_verified(&nested)?.as_slice())
            .map_err(|e| bad(format!("the nested index: {e}")))?;
        let (desc, inner_ref) = choose_manifest(dir, &inner, depth + 1)?;
        return Ok((desc, inner_ref.or(ref_name)));
    }
    Ok((chosen.clone(), ref_name))
}

/// A descriptor's digest, size and blob path (sha256 blobs only).
pub(super) fn descriptor(dir: &Path, d: &Descriptor) -> Result<Blob, LoadError> {
    let digest = d.digest();
    if *digest.algorithm() != DigestAlgorithm::Sha256 {
        return Err(LoadError::BadLayout {
            path: dir.to_path_buf(),
            detail: format!("unsupported digest `{digest}` (sha256 only)"),
        });
    }
    Ok(Blob {
        digest: digest.to_string(),
        size: d.size(),
        path: dir.join("blobs").join("sha256").join(digest.digest()),
    })
}

/// A whole blob's bytes, refused unless they have its descriptor's size and digest.
pub(super) fn read_verified(blob: &Blob) -> Result<Vec<u8>, LoadError> {
    check_size(blob)?;
    let bytes = fs::read(&blob.path).map_err(|source| LoadError::Read {
        path: blob.path.clone(),
        source,
    })?;
    let found = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    if found != blob.digest {
        return Err(LoadError::BlobDigest {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            found,
        });
    }
    Ok(bytes)
}

/// Follows symlinks: the size that counts is the target's.
pub(super) fn check_size(blob: &Blob) -> Result<(), LoadError> {
    let found = fs::metadata(&blob.path)
        .map_err(|source| LoadError::Read {
            path: blob.path.clone(),
            source,
        })?
        .len();
    if found != blob.size {
        return Err(LoadError::BlobSize {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            expected: blob.size,
            found,
        });
    }
    Ok(())
}
