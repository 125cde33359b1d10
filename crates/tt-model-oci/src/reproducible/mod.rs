//! A build's image normalised so that the same inputs give the same bytes: each layer tar
//! ([`layer`]) and the image config ([`config`]) rewritten for one epoch (the tree's commit
//! time, `SOURCE_DATE_EPOCH`), and a whole exported layout rewritten with them
//! ([`normalize_layout`]). The engine crate exports the built image, calls this, and loads the
//! result back (`tt_model_engine::reproducible`, whose header says why after the fact).
//!
//! The base image's layers are never rewritten: they are already fixed, and rewriting them
//! would stop the image from sharing them with the base. The layout's index records the
//! engine's id of the image it was made from ([`BUILD_ID_ANNOTATION`]): a re-package whose
//! build is served from the layer cache (the same raw id) reuses the previous result.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::convert::{ImageError, Stored, write_image};
use crate::layout::OciLayout;

pub mod config;
pub mod layer;

#[cfg(test)]
mod layout_tests;

/// The index annotation naming the engine's image a reproducible layout was made from.
pub const BUILD_ID_ANNOTATION: &str = "org.tenstorrent.tt-model.build-id";

/// The fixed epoch when the sources give none: 1980-01-01T00:00:00Z, the earliest time a zip
/// can hold (Python wheels built under `SOURCE_DATE_EPOCH` refuse anything earlier).
pub const FALLBACK_EPOCH: u64 = 315_532_800;

/// What [`normalize_layout`] made (and the engine crate's `reproducible_image`, which loads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reproduced {
    /// The normalised image's id (its config digest).
    pub id: String,
    /// The tag the layout names it by, `<repository>:<12 hex>`.
    pub reference: String,
    /// The layout's manifest digest.
    pub manifest_digest: String,
    /// Bytes of the layout's blobs.
    pub bytes: u64,
    /// Layers rewritten (the ones the build added).
    pub layers_rewritten: usize,
    /// Tar headers whose time was after the epoch.
    pub clamped: u64,
}

/// Rewrites the OCI layout at `dir` (an export of the image `built`) in place: every layer
/// past the common prefix with `base_layers` normalised, the config normalised to match, a new
/// manifest, and the index naming it as `ref_name(config digest)` with the build id. Blobs no
/// longer referenced are removed.
pub fn normalize_layout(
    dir: &Path,
    base_layers: &[String],
    epoch: u64,
    built: &str,
    ref_name: impl FnOnce(&str) -> String,
) -> Result<Reproduced, ImageError> {
    let bad = |detail: String| ImageError::Malformed(format!("image {built}: {detail}"));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ImageError::Write { path, source }
    };
    let layout = OciLayout::open(dir)?;
    let blobs = dir.join("blobs").join("sha256");
    let keep = layout
        .layers
        .iter()
        .zip(base_layers)
        .take_while(|(l, b)| &l.digest == *b)
        .count();
    let mut rewritten: BTreeMap<String, Stored> = BTreeMap::new();
    let mut layers = Vec::with_capacity(layout.layers.len());
    let mut clamped = 0;
    for (i, blob) in layout.layers.iter().enumerate() {
        if i < keep {
            layers.push(Stored {
                digest: blob.digest.clone(),
                size: blob.size,
            });
            continue;
        }
        if let Some(done) = rewritten.get(&blob.digest) {
            layers.push(done.clone());
            continue;
        }
        let tmp = blobs.join(format!(".normalizing-{i}"));
        let input = fs::File::open(&blob.path).map_err(io(&blob.path))?;
        let out = fs::File::create(&tmp).map_err(io(&tmp))?;
        let mut hashed = Hashing {
            inner: BufWriter::with_capacity(1 << 20, out),
            hasher: Sha256::new(),
        };
        let stats =
            layer::normalize_layer(BufReader::with_capacity(1 << 20, input), &mut hashed, epoch)
                .map_err(|e| match e {
                    layer::LayerError::Io(source) => io(&blob.path)(source),
                    malformed => bad(format!("layer {}: {malformed}", blob.digest)),
                })?;
        hashed.inner.flush().map_err(io(&tmp))?;
        clamped += stats.clamped;
        let hex = hex::encode(hashed.hasher.finalize());
        let path = blobs.join(&hex);
        fs::rename(&tmp, &path).map_err(io(&path))?;
        let stored = Stored {
            digest: format!("sha256:{hex}"),
            size: stats.bytes,
        };
        rewritten.insert(blob.digest.clone(), stored.clone());
        layers.push(stored);
    }
    let raw = fs::read(&layout.config.path).map_err(io(&layout.config.path))?;
    let diff_ids: Vec<String> = layers.iter().map(|l| l.digest.clone()).collect();
    let config_bytes = config::normalize_config(&raw, epoch, &diff_ids).map_err(bad)?;
    let config_hex = hex::encode(Sha256::digest(&config_bytes));
    let config_path = blobs.join(&config_hex);
    fs::write(&config_path, &config_bytes).map_err(io(&config_path))?;
    let config = Stored {
        digest: format!("sha256:{config_hex}"),
        size: config_bytes.len() as u64,
    };
    let reference = ref_name(&config.digest);
    let annotations = BTreeMap::from([(BUILD_ID_ANNOTATION.to_string(), built.to_string())]);
    let (manifest_digest, manifest_size) =
        write_image(dir, &config, &layers, &reference, annotations)?;
    // Drop what the new manifest no longer names (the raw layers, config and manifest).
    let live: HashSet<&str> = layers
        .iter()
        .map(|l| l.digest.as_str())
        .chain([config.digest.as_str(), manifest_digest.as_str()])
        .map(|d| d.trim_start_matches("sha256:"))
        .collect();
    let mut bytes = 0;
    for entry in fs::read_dir(&blobs).map_err(io(&blobs))? {
        let entry = entry.map_err(io(&blobs))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if live.contains(name.as_str()) {
            bytes += entry.metadata().map_err(io(&entry.path()))?.len();
        } else {
            fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
        }
    }
    debug_assert!(bytes >= manifest_size);
    Ok(Reproduced {
        id: config.digest,
        reference,
        manifest_digest,
        bytes,
        layers_rewritten: layers.len() - keep,
        clamped,
    })
}

/// The build id a layout records ([`BUILD_ID_ANNOTATION`]), if any.
pub fn recorded_build_id(layout_dir: &Path) -> Option<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(layout_dir.join("index.json")).ok()?).ok()?;
    index["manifests"][0]["annotations"][BUILD_ID_ANNOTATION]
        .as_str()
        .map(str::to_string)
}

struct Hashing<W> {
    inner: W,
    hasher: Sha256,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
