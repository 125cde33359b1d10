//! An OCI image layout read and checked: its index, the chosen image manifest, and every
//! blob it names (present, of its descriptor's size, the small ones hashed at open).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use oci_spec::image::{Arch, Descriptor, DigestAlgorithm, ImageIndex, ImageManifest, MediaType};
use sha2::{Digest, Sha256};

use crate::index::REF_NAME_ANNOTATION;

/// The Docker v2 schema 2 manifest and manifest list: loadable like their OCI counterparts.
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// Whether a descriptor names an image manifest we can load (OCI or Docker v2 schema 2).
fn is_image_manifest(m: &MediaType) -> bool {
    matches!(m, MediaType::ImageManifest)
        || matches!(m, MediaType::Other(o) if o == DOCKER_MANIFEST)
}

/// Whether a descriptor names an index, followed one level down to a linux/amd64 (or the
/// only) manifest.
fn is_index(m: &MediaType) -> bool {
    matches!(m, MediaType::ImageIndex) || matches!(m, MediaType::Other(o) if o == DOCKER_LIST)
}

/// Why a layout could not be read, or is not what it claims.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The directory has no `oci-layout` file.
    #[error("`{path}` is not an OCI image layout (no oci-layout file)")]
    NotALayout {
        /// The directory given as the layout.
        path: PathBuf,
    },
    /// A layout file could not be read.
    #[error("Cannot read `{path}`")]
    Read {
        /// The file that could not be read (`<archive stream>` for a docker-archive being
        /// written).
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The layout's JSON is not what the OCI spec says.
    #[error("The OCI layout at `{path}` is malformed: {detail}")]
    BadLayout {
        /// The layout directory.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A blob's size on disk differs from its descriptor.
    #[error("Blob {digest} in `{path}` is {found} bytes; its descriptor says {expected}")]
    BlobSize {
        /// The blob file.
        path: PathBuf,
        /// The blob's digest, `sha256:<hex>`.
        digest: String,
        /// Size in bytes according to its descriptor.
        expected: u64,
        /// Size in bytes of the file.
        found: u64,
    },
    /// A blob's bytes do not hash to its digest (a truncated or corrupt download).
    #[error("Blob {digest} in `{path}` is corrupt: its bytes hash to {found}")]
    BlobDigest {
        /// The blob file.
        path: PathBuf,
        /// The digest that names the blob, `sha256:<hex>`.
        digest: String,
        /// The digest its bytes hash to.
        found: String,
    },
    /// The layout holds another image than the one the package records.
    #[error("The OCI layout at `{path}` holds image {found}, but the package records {expected}")]
    LayoutMismatch {
        /// The layout directory.
        path: PathBuf,
        /// The image digest the package records.
        expected: String,
        /// The layout's config digest (its image id on the classic store).
        found: String,
    },
}

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
    pub(crate) fn hex(&self) -> &str {
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
    pub fn open(dir: &Path) -> Result<Self, LayoutError> {
        if !dir.join("oci-layout").is_file() {
            return Err(LayoutError::NotALayout {
                path: dir.to_path_buf(),
            });
        }
        let bad = |detail: String| LayoutError::BadLayout {
            path: dir.to_path_buf(),
            detail,
        };
        let index_path = dir.join("index.json");
        let index_bytes = fs::read(&index_path).map_err(|source| LayoutError::Read {
            path: index_path.clone(),
            source,
        })?;
        let index = ImageIndex::from_reader(index_bytes.as_slice()).map_err(|e| {
            LayoutError::BadLayout {
                path: index_path,
                detail: e.to_string(),
            }
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
    pub fn expect(&self, expected: &str) -> Result<(), LayoutError> {
        if self.is_image(expected) {
            Ok(())
        } else {
            Err(LayoutError::LayoutMismatch {
                path: self.dir.clone(),
                expected: expected.to_string(),
                found: self.config.digest.clone(),
            })
        }
    }

    /// Layer blobs without repeats, in first-use order.
    pub(crate) fn unique_layers(&self) -> Vec<&Blob> {
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
pub(crate) fn choose_manifest(
    dir: &Path,
    index: &ImageIndex,
    depth: usize,
) -> Result<(Descriptor, Option<String>), LayoutError> {
    let bad = |detail: String| LayoutError::BadLayout {
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
pub(crate) fn descriptor(dir: &Path, d: &Descriptor) -> Result<Blob, LayoutError> {
    let digest = d.digest();
    if *digest.algorithm() != DigestAlgorithm::Sha256 {
        return Err(LayoutError::BadLayout {
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
pub(crate) fn read_verified(blob: &Blob) -> Result<Vec<u8>, LayoutError> {
    check_size(blob)?;
    let bytes = fs::read(&blob.path).map_err(|source| LayoutError::Read {
        path: blob.path.clone(),
        source,
    })?;
    let found = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    if found != blob.digest {
        return Err(LayoutError::BlobDigest {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            found,
        });
    }
    Ok(bytes)
}

/// Follows symlinks: the size that counts is the target's.
pub(crate) fn check_size(blob: &Blob) -> Result<(), LayoutError> {
    let found = fs::metadata(&blob.path)
        .map_err(|source| LayoutError::Read {
            path: blob.path.clone(),
            source,
        })?
        .len();
    if found != blob.size {
        return Err(LayoutError::BlobSize {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            expected: blob.size,
            found,
        });
    }
    Ok(())
}
