//! A docker-archive (what dockerd 20.10 saves: `manifest.json`, `<id>.json`,
//! `<dir>/layer.tar`) converted into an OCI image layout, and the one writer of our layouts'
//! manifests (the export, and the reproducible rewrite of an export). No engine call: the
//! engine crate saves the archive and hands its path here.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use oci_spec::image::{
    Descriptor, Digest as OciDigest, ImageManifestBuilder, MediaType, SCHEMA_VERSION,
};
use sha2::{Digest, Sha256};

use crate::archive::ArchiveImage;
use crate::index::LayoutWriteError;
#[cfg(test)]
use crate::index::REF_NAME_ANNOTATION;
use crate::layout::LayoutError;

/// Why an image could not be converted or rewritten.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The archive, a layer or the config is not what it should be, or the result cannot be
    /// described as OCI.
    #[error("{0}")]
    Malformed(String),
    /// A file of the layout could not be written (or the input read).
    #[error("cannot write `{path}`")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The layout being rewritten is unreadable or corrupt.
    #[error(transparent)]
    Layout(#[from] LayoutError),
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciExport {
    /// `sha256:…` of the OCI manifest.
    pub manifest_digest: String,
    /// `sha256:…` of the image config (equals the engine's image id on the classic store).
    pub config_digest: String,
    /// Layer digests, base first.
    pub layers: Vec<String>,
    /// Total bytes of all blobs.
    pub bytes: u64,
}

/// A descriptor of `media_type` for the blob `digest` (`sha256:…`) of `size` bytes.
pub fn descriptor(
    media_type: MediaType,
    digest: &str,
    size: u64,
) -> Result<Descriptor, oci_spec::OciSpecError> {
    let digest = OciDigest::from_str(digest)?;
    Ok(Descriptor::new(media_type, size, digest))
}

/// One regular file of the archive, stored as a blob.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) digest: String,
    pub(crate) size: u64,
}

/// Writes the OCI manifest naming `config` and `layers` (uncompressed tars, base first) into
/// `dest`'s blobs, and the index naming it as `ref_name` with `annotations`; returns the
/// manifest's digest and size. The one writer of our layouts' manifests (export, and the
/// reproducible rewrite of an export).
pub(crate) fn write_image(
    dest: &Path,
    config: &Stored,
    layers: &[Stored],
    ref_name: &str,
    annotations: BTreeMap<String, String>,
) -> Result<(String, u64), ImageError> {
    let io = |path: PathBuf| move |source| ImageError::Write { path, source };
    let spec = |e: oci_spec::OciSpecError| {
        ImageError::Malformed(format!("cannot describe the image as OCI: {e}"))
    };
    let oci_manifest = ImageManifestBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(MediaType::ImageConfig, &config.digest, config.size).map_err(spec)?)
        .layers(
            layers
                .iter()
                .map(|l| descriptor(MediaType::ImageLayer, &l.digest, l.size))
                .collect::<Result<Vec<_>, _>>()
                .map_err(spec)?,
        )
        .build()
        .map_err(spec)?;
    let manifest_blob = serde_json::to_vec(&oci_manifest).expect("OCI types serialize");
    let manifest_hex = hex::encode(Sha256::digest(&manifest_blob));
    let path = dest.join("blobs").join("sha256").join(&manifest_hex);
    fs::write(&path, &manifest_blob).map_err(io(path))?;
    let mut entry = descriptor(
        MediaType::ImageManifest,
        &format!("sha256:{manifest_hex}"),
        manifest_blob.len() as u64,
    )
    .map_err(spec)?;
    if !annotations.is_empty() {
        entry.set_annotations(Some(annotations.into_iter().collect()));
    }
    crate::index::write_index(dest, entry, ref_name).map_err(|e| match e {
        LayoutWriteError::Spec(e) => spec(e),
        LayoutWriteError::Io { path, source } => io(path)(source),
    })?;
    Ok((format!("sha256:{manifest_hex}"), manifest_blob.len() as u64))
}

/// Rewrites a docker-archive tar at `archive` into an OCI layout at `dest`: every layer tar
/// and the config become content-addressed blobs unchanged (their digests are the image's
/// diff ids and image id), then the OCI manifest and the index naming it as `ref_name`.
/// Deterministic for a given archive.
pub fn docker_archive_to_oci(
    archive: &Path,
    dest: &Path,
    ref_name: &str,
) -> Result<OciExport, ImageError> {
    let bad = ImageError::Malformed;
    let io = |path: PathBuf| move |source| ImageError::Write { path, source };
    let blobs = dest.join("blobs").join("sha256");
    fs::create_dir_all(&blobs).map_err(io(blobs.clone()))?;

    let file = fs::File::open(archive).map_err(io(archive.to_path_buf()))?;
    let mut tar = tar::Archive::new(file);
    let mut stored: BTreeMap<String, Stored> = BTreeMap::new();
    let mut links: BTreeMap<String, String> = BTreeMap::new();
    let mut small: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let entries = tar.entries().map_err(io(archive.to_path_buf()))?;
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.map_err(io(archive.to_path_buf()))?;
        let name = entry
            .path()
            .map_err(io(archive.to_path_buf()))?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_string();
        let kind = entry.header().entry_type();
        if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(io(archive.to_path_buf()))?
                .ok_or_else(|| bad(format!("symlink `{name}` has no target")))?;
            let resolved = normalize(
                &Path::new(&name)
                    .parent()
                    .unwrap_or(Path::new(""))
                    .join(target),
            );
            links.insert(name, resolved);
            continue;
        }
        if !kind.is_file() {
            continue;
        }
        let tmp = blobs.join(format!(".incoming-{index}"));
        let mut out = fs::File::create(&tmp).map_err(io(tmp.clone()))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        let keep_small = name.ends_with(".json") || name == "repositories";
        let mut kept = Vec::new();
        loop {
            let n = entry.read(&mut buf).map_err(io(archive.to_path_buf()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(io(tmp.clone()))?;
            if keep_small {
                kept.extend_from_slice(&buf[..n]);
            }
            size += n as u64;
        }
        drop(out);
        let hex = hex::encode(hasher.finalize());
        let final_path = blobs.join(&hex);
        if final_path.exists() {
            fs::remove_file(&tmp).map_err(io(tmp.clone()))?;
        } else {
            fs::rename(&tmp, &final_path).map_err(io(final_path.clone()))?;
        }
        if keep_small {
            small.insert(name.clone(), kept);
        }
        stored.insert(
            name,
            Stored {
                digest: format!("sha256:{hex}"),
                size,
            },
        );
    }

    let manifest_bytes = small
        .get("manifest.json")
        .ok_or_else(|| bad("no manifest.json in the saved archive".into()))?;
    let manifest: Vec<ArchiveImage> = serde_json::from_slice(manifest_bytes).map_err(|e| {
        bad(format!(
            "manifest.json is not a docker-archive manifest: {e}"
        ))
    })?;
    let first = manifest
        .first()
        .ok_or_else(|| bad("manifest.json lists no image".into()))?;
    let lookup = |name: &str| -> Result<Stored, ImageError> {
        let resolved = links.get(name).map(String::as_str).unwrap_or(name);
        stored
            .get(resolved)
            .cloned()
            .ok_or_else(|| bad(format!("the archive lacks `{name}`")))
    };
    let config = lookup(&first.config)?;
    let mut layers = Vec::new();
    for name in &first.layers {
        layers.push(lookup(name)?);
    }

    // Drop the blobs of archive metadata (manifest.json, repositories, legacy json files).
    let mut keep: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    keep.push(&config.digest);
    for s in stored.values() {
        if !keep.contains(&s.digest.as_str()) {
            let path = blobs.join(s.digest.trim_start_matches("sha256:"));
            let _ = fs::remove_file(path);
        }
    }

    let (manifest_digest, manifest_size) =
        write_image(dest, &config, &layers, ref_name, BTreeMap::new())?;

    let mut bytes = config.size + manifest_size;
    let mut seen = Vec::new();
    for l in &layers {
        if !seen.contains(&&l.digest) {
            bytes += l.size;
            seen.push(&l.digest);
        }
    }
    Ok(OciExport {
        manifest_digest,
        config_digest: config.digest,
        layers: layers.into_iter().map(|l| l.digest).collect(),
        bytes,
    })
}

/// Resolves `.`/`..` in an archive-internal path without touching the filesystem.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for comp in path.components() {
        match comp {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(builder: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, data).unwrap();
    }

    #[test]
    fn converts_a_docker_archive_with_a_symlinked_layer() {
        let dir = tempfile::tempdir().unwrap();
        let layer = b"layer-bytes".to_vec();
        let config = br#"{"rootfs":{"type":"layers"}}"#.to_vec();
        let config_hex = hex::encode(Sha256::digest(&config));
        let mut builder = tar::Builder::new(Vec::new());
        add(&mut builder, "aaa/layer.tar", &layer);
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        header.set_cksum();
        builder
            .append_link(&mut header, "bbb/layer.tar", "../aaa/layer.tar")
            .unwrap();
        add(&mut builder, &format!("{config_hex}.json"), &config);
        let manifest = format!(
            r#"[{{"Config":"{config_hex}.json","RepoTags":["x:y"],"Layers":["aaa/layer.tar","bbb/layer.tar"]}}]"#
        );
        add(&mut builder, "manifest.json", manifest.as_bytes());
        let archive = dir.path().join("save.tar");
        fs::write(&archive, builder.into_inner().unwrap()).unwrap();

        let dest = dir.path().join("oci");
        let out = docker_archive_to_oci(&archive, &dest, "x:y").unwrap();
        assert_eq!(out.config_digest, format!("sha256:{config_hex}"));
        let layer_digest = format!("sha256:{}", hex::encode(Sha256::digest(&layer)));
        assert_eq!(out.layers, vec![layer_digest.clone(), layer_digest]);
        let index: serde_json::Value =
            serde_json::from_slice(&fs::read(dest.join("index.json")).unwrap()).unwrap();
        assert_eq!(
            index["manifests"][0]["digest"],
            out.manifest_digest.as_str()
        );
        assert_eq!(
            index["manifests"][0]["annotations"][REF_NAME_ANNOTATION],
            "x:y"
        );
        // Exactly config + layer + manifest remain; archive metadata was dropped.
        let blobs: Vec<_> = fs::read_dir(dest.join("blobs/sha256")).unwrap().collect();
        assert_eq!(blobs.len(), 3);
        assert!(dest.join("oci-layout").exists());
        // Every blob's name is its digest.
        for blob in blobs {
            let path = blob.unwrap().path();
            let hex = hex::encode(Sha256::digest(fs::read(&path).unwrap()));
            assert_eq!(path.file_name().unwrap().to_str().unwrap(), hex);
        }
    }

    #[test]
    fn an_archive_without_manifest_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut builder = tar::Builder::new(Vec::new());
        add(&mut builder, "x/layer.tar", b"x");
        let archive = dir.path().join("save.tar");
        fs::write(&archive, builder.into_inner().unwrap()).unwrap();
        let err = docker_archive_to_oci(&archive, &dir.path().join("o"), "r").unwrap_err();
        assert!(err.to_string().contains("manifest.json"), "{err}");
    }
}
