//! Load an image from an OCI image layout (the inverse of [`crate::export`]).
//!
//! dockerd 20.10's load endpoint only understands docker-archives (`manifest.json`, a config
//! `<hex>.json`, `<dir>/layer.tar` per layer); OCI-layout input arrived in Docker 25. So we
//! read the layout's index and manifest, then stream a docker-archive built on the fly from
//! the layout's blobs straight into the load request: no temporary copy of the layers.
//!
//! Blobs are opened through the filesystem, so symlinks are followed: a layout inside a
//! Hugging Face snapshot is a farm of symlinks into the content store. Every blob is hashed
//! while it streams; a blob whose bytes do not match its digest aborts the request before the
//! archive's `manifest.json` (written last) is sent, so the engine never loads it. After the
//! load, the image the engine reports under the tag must be the layout's image.

use std::fs;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bollard::query_parameters::ImportImageOptions;
use bytes::Bytes;
use futures_util::StreamExt;
use oci_spec::image::{Arch, Descriptor, DigestAlgorithm, ImageIndex, ImageManifest, MediaType};
use sha2::{Digest, Sha256};

use crate::archive::ArchiveImage;
use crate::client::Client;
use crate::error::{Cause, EngineError};
use crate::export::REF_NAME_ANNOTATION;

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
/// Bytes per chunk sent to the engine; the channel holds a few, bounding memory.
const CHUNK: usize = 1 << 20;
const CHANNEL_CHUNKS: usize = 4;

/// Why loading a layout failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The directory has no `oci-layout` file.
    #[error("`{path}` is not an OCI image layout (no oci-layout file)")]
    NotALayout {
        /// The directory given as the layout.
        path: PathBuf,
    },
    /// A layout file could not be read.
    #[error("Cannot read `{path}`")]
    Read {
        /// The file that could not be read (`<archive stream>` for the stream sent to the engine).
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
    /// The load request failed (engine unreachable, connection dropped).
    #[error("Loading image `{reference}` into the engine failed")]
    Request {
        /// The reference the image was loaded under.
        reference: String,
        /// The client library's error.
        #[source]
        source: Cause,
    },
    /// The engine refused the archive.
    #[error("The engine refused to load image `{reference}`: {message}")]
    Refused {
        /// The reference the image was to be loaded under.
        reference: String,
        /// The engine's error message.
        message: String,
    },
    /// After the load the tag points at another image (or at none).
    #[error("After loading, `{reference}` is {found}, not the layout's image {expected}")]
    NotLoaded {
        /// The reference the image was loaded under.
        reference: String,
        /// The layout's image id.
        expected: String,
        /// The id the reference resolves to now, or `absent`.
        found: String,
    },
    /// Inspecting the loaded image failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
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
    fn hex(&self) -> &str {
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

/// What a load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The engine's id of the loaded image.
    pub id: String,
    /// The tag it was loaded under.
    pub reference: String,
    /// Archive bytes streamed.
    pub bytes: u64,
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
    fn unique_layers(&self) -> Vec<&Blob> {
        let mut out: Vec<&Blob> = Vec::new();
        for l in &self.layers {
            if !out.iter().any(|o| o.digest == l.digest) {
                out.push(l);
            }
        }
        out
    }

    /// Writes the image as a docker-archive tagged `reference` (no tag when `reference` is
    /// empty or pinned by digest). Blobs are hashed as they are copied; `manifest.json` comes
    /// last, so a corrupt blob ends the archive before the engine could load it. Returns the
    /// bytes written.
    pub fn write_docker_archive<W: Write>(
        &self,
        reference: &str,
        out: W,
    ) -> Result<u64, LoadError> {
        let mut counted = CountingWriter { inner: out, n: 0 };
        let mut tar = tar::Builder::new(&mut counted);
        let config_name = format!("{}.json", self.config.hex());
        append_blob(&mut tar, &self.config, &config_name)?;
        for layer in self.unique_layers() {
            append_blob(&mut tar, layer, &format!("{}/layer.tar", layer.hex()))?;
        }
        let tags: Vec<&str> = if reference.is_empty() || reference.contains('@') {
            vec![]
        } else {
            vec![reference]
        };
        let manifest = [ArchiveImage {
            config: config_name,
            repo_tags: tags.into_iter().map(str::to_string).collect(),
            layers: self
                .layers
                .iter()
                .map(|l| format!("{}/layer.tar", l.hex()))
                .collect(),
        }];
        let bytes = serde_json::to_vec(&manifest).expect("the archive manifest serializes");
        let mut header = tar_header(bytes.len() as u64);
        tar.append_data(&mut header, "manifest.json", bytes.as_slice())
            .map_err(stream_err)?;
        tar.finish().map_err(stream_err)?;
        drop(tar);
        counted.flush().map_err(stream_err)?;
        Ok(counted.n)
    }
}

/// Picks the image manifest descriptor from an index (following a nested index once).
fn choose_manifest(
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
fn descriptor(dir: &Path, d: &Descriptor) -> Result<Blob, LoadError> {
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
fn read_verified(blob: &Blob) -> Result<Vec<u8>, LoadError> {
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
fn check_size(blob: &Blob) -> Result<(), LoadError> {
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

fn tar_header(size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    h
}

/// A write failure of the archive: the receiving side went away, or a blob read failed.
fn stream_err(source: io::Error) -> LoadError {
    LoadError::Read {
        path: PathBuf::from("<archive stream>"),
        source,
    }
}

/// Copies one blob into the archive under `name`, hashing it on the way.
fn append_blob<W: Write>(
    tar: &mut tar::Builder<W>,
    blob: &Blob,
    name: &str,
) -> Result<(), LoadError> {
    let read_err = |source| LoadError::Read {
        path: blob.path.clone(),
        source,
    };
    let file = fs::File::open(&blob.path).map_err(read_err)?;
    let mut reader = HashingReader {
        inner: file.take(blob.size),
        hasher: Sha256::new(),
        n: 0,
    };
    let mut header = tar_header(blob.size);
    tar.append_data(&mut header, name, &mut reader)
        .map_err(stream_err)?;
    if reader.n != blob.size {
        return Err(LoadError::BlobSize {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            expected: blob.size,
            found: reader.n,
        });
    }
    let found = format!("sha256:{}", hex::encode(reader.hasher.finalize()));
    if found != blob.digest {
        return Err(LoadError::BlobDigest {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            found,
        });
    }
    Ok(())
}

struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    n: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.n += n as u64;
        Ok(n)
    }
}

struct CountingWriter<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The write end of the request body: each buffered chunk becomes one body frame.
struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<Result<Bytes, io::Error>>,
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the engine closed the load request",
                )
            })?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Client {
    /// Loads the image of `layout` tagged `reference` and checks that the tag then names the
    /// layout's image. The archive is generated while it uploads.
    pub async fn load_oci_layout(
        &self,
        layout: &OciLayout,
        reference: &str,
    ) -> Result<Loaded, LoadError> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, io::Error>>(CHANNEL_CHUNKS);
        // The producer's own error wins over the engine's view of the aborted upload.
        let failure: Arc<Mutex<Option<LoadError>>> = Arc::default();
        let producer = {
            let (layout, reference, failure) =
                (layout.clone(), reference.to_string(), failure.clone());
            tokio::task::spawn_blocking(move || {
                let writer = BufWriter::with_capacity(CHUNK, ChannelWriter { tx: tx.clone() });
                match layout.write_docker_archive(&reference, writer) {
                    Ok(n) => Some(n),
                    Err(e) => {
                        // An error item aborts the request body, so the engine sees a
                        // truncated archive without manifest.json and loads nothing.
                        let _ = tx.blocking_send(Err(io::Error::other(e.to_string())));
                        *failure.lock().expect("not poisoned") = Some(e);
                        None
                    }
                }
            })
        };
        let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let options = ImportImageOptions {
            quiet: true,
            ..Default::default()
        };
        let mut responses =
            self.docker()
                .import_image(options, bollard::body_try_stream(body), None);
        let mut engine_err = None;
        while let Some(item) = responses.next().await {
            if let Err(e) = item {
                engine_err = Some(e);
                break;
            }
        }
        drop(responses);
        let bytes = producer.await.ok().flatten();
        if let Some(e) = failure.lock().expect("not poisoned").take() {
            return Err(e);
        }
        match engine_err {
            Some(bollard::errors::Error::DockerStreamError { error }) => {
                return Err(LoadError::Refused {
                    reference: reference.to_string(),
                    message: error.trim().to_string(),
                });
            }
            Some(source) => {
                return Err(LoadError::Request {
                    reference: reference.to_string(),
                    source,
                });
            }
            None => {}
        }
        let pinned = reference.is_empty() || reference.contains('@');
        let look_up = if pinned { layout.image_id() } else { reference };
        let found = self.image(look_up).await?;
        match found {
            Some(facts) if layout.is_image(&facts.id) => Ok(Loaded {
                id: facts.id,
                reference: reference.to_string(),
                bytes: bytes.unwrap_or_default(),
            }),
            other => Err(LoadError::NotLoaded {
                reference: reference.to_string(),
                expected: layout.image_id().to_string(),
                found: other.map_or_else(|| "absent".to_string(), |f| f.id),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::docker_archive_to_oci;
    use serde_json::{Value, json};

    fn add(builder: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
        let mut header = tar_header(data.len() as u64);
        builder.append_data(&mut header, name, data).unwrap();
    }

    /// A docker-archive with two layers (one listed twice) and its config.
    fn saved_archive(dir: &Path) -> PathBuf {
        let (l1, l2) = (b"base-layer".to_vec(), b"top-layer".to_vec());
        let diff = |b: &[u8]| format!("sha256:{}", hex::encode(Sha256::digest(b)));
        let config = serde_json::to_vec(&json!({
            "architecture": "amd64", "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [diff(&l1), diff(&l2), diff(&l1)]}
        }))
        .unwrap();
        let config_hex = hex::encode(Sha256::digest(&config));
        let mut b = tar::Builder::new(Vec::new());
        add(&mut b, "a/layer.tar", &l1);
        add(&mut b, "b/layer.tar", &l2);
        add(&mut b, &format!("{config_hex}.json"), &config);
        let manifest = json!([{"Config": format!("{config_hex}.json"), "RepoTags": ["x:y"],
            "Layers": ["a/layer.tar", "b/layer.tar", "a/layer.tar"]}]);
        add(&mut b, "manifest.json", manifest.to_string().as_bytes());
        let path = dir.join("save.tar");
        fs::write(&path, b.into_inner().unwrap()).unwrap();
        path
    }

    /// The test archive converted to an OCI layout at `dir/oci`.
    fn saved_layout(dir: &Path) -> crate::export::OciExport {
        docker_archive_to_oci(&saved_archive(dir), &dir.join("oci"), "x:y", "x:y").unwrap()
    }

    #[test]
    fn layout_round_trips_through_a_docker_archive() {
        let dir = tempfile::tempdir().unwrap();
        let first = saved_layout(dir.path());
        let layout = OciLayout::open(&dir.path().join("oci")).unwrap();
        assert_eq!(layout.manifest_digest, first.manifest_digest);
        assert_eq!(layout.image_id(), first.config_digest);
        assert_eq!(layout.ref_name.as_deref(), Some("x:y"));
        assert!(layout.is_image(&first.manifest_digest));
        assert!(layout.expect("sha256:00").is_err());

        let mut archive = Vec::new();
        let n = layout
            .write_docker_archive("tt-model/x:1", &mut archive)
            .unwrap();
        assert_eq!(n, archive.len() as u64);
        // The regenerated archive names the tag and converts back to the very same image.
        let again = dir.path().join("again.tar");
        fs::write(&again, &archive).unwrap();
        let second = docker_archive_to_oci(&again, &dir.path().join("oci2"), "x:y", "x:y").unwrap();
        assert_eq!(second, first);
        let mut names = Vec::new();
        let mut manifest = Value::Null;
        for e in tar::Archive::new(archive.as_slice()).entries().unwrap() {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            if name == "manifest.json" {
                manifest = serde_json::from_reader(&mut e).unwrap();
            }
            names.push(name);
        }
        assert_eq!(
            names.len(),
            4,
            "config, two unique layers, manifest: {names:?}"
        );
        assert_eq!(
            names.last().unwrap(),
            "manifest.json",
            "manifest.json comes last"
        );
        assert_eq!(manifest[0]["RepoTags"], json!(["tt-model/x:1"]));
        assert_eq!(manifest[0]["Layers"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn symlinked_blobs_are_dereferenced() {
        let dir = tempfile::tempdir().unwrap();
        let out = saved_layout(dir.path());
        // Rebuild the layout as an HF-style symlink farm pointing into a content store.
        let store = dir.path().join("store");
        fs::create_dir_all(&store).unwrap();
        let blobs = dir.path().join("oci/blobs/sha256");
        for e in fs::read_dir(&blobs).unwrap() {
            let p = e.unwrap().path();
            let target = store.join(p.file_name().unwrap());
            fs::rename(&p, &target).unwrap();
            std::os::unix::fs::symlink(&target, &p).unwrap();
        }
        let layout = OciLayout::open(&dir.path().join("oci")).unwrap();
        let mut archive = Vec::new();
        layout.write_docker_archive("", &mut archive).unwrap();
        let mut kinds = Vec::new();
        for e in tar::Archive::new(archive.as_slice()).entries().unwrap() {
            let e = e.unwrap();
            kinds.push((e.header().entry_type(), e.size()));
        }
        assert!(kinds.iter().all(|(k, _)| k.is_file()), "{kinds:?}");
        assert_eq!(
            kinds[0].1,
            fs::metadata(store.join(out.config_digest.trim_start_matches("sha256:")))
                .unwrap()
                .len()
        );
    }

    /// Flips one byte of `path` in place (same size): `needle`'s first byte becomes `to`,
    /// so JSON stays JSON and only a hash can tell.
    fn flip_in_place(path: &Path, needle: &[u8], to: u8) {
        let mut bytes = fs::read(path).unwrap();
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("needle present");
        bytes[at] = to;
        fs::write(path, &bytes).unwrap();
    }

    fn blob_path(dir: &Path, digest: &str) -> PathBuf {
        dir.join("oci/blobs/sha256")
            .join(digest.trim_start_matches("sha256:"))
    }

    #[test]
    fn a_same_size_corrupt_config_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let out = saved_layout(dir.path());
        flip_in_place(&blob_path(dir.path(), &out.config_digest), b"amd64", b'b');
        let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
        assert!(
            matches!(&err, LoadError::BlobDigest { digest, .. } if *digest == out.config_digest),
            "{err}"
        );
        assert!(err.to_string().contains(&out.config_digest), "{err}");
    }

    #[test]
    fn a_same_size_corrupt_manifest_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let out = saved_layout(dir.path());
        let manifest = blob_path(dir.path(), &out.manifest_digest);
        flip_in_place(&manifest, b"application", b'b');
        // Still a well-formed manifest: only its digest betrays it.
        let text: Value = serde_json::from_slice(&fs::read(&manifest).unwrap()).unwrap();
        assert!(text.get("config").is_some());
        let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
        assert!(
            matches!(&err, LoadError::BlobDigest { digest, .. } if *digest == out.manifest_digest),
            "{err}"
        );
        assert!(err.to_string().contains(&out.manifest_digest), "{err}");
    }

    #[test]
    fn corrupt_and_missing_blobs_are_typed_errors() {
        let dir = tempfile::tempdir().unwrap();
        let out = saved_layout(dir.path());
        let layer = dir
            .path()
            .join("oci/blobs/sha256")
            .join(out.layers[1].trim_start_matches("sha256:"));
        // Same size, other bytes: only the streaming hash can tell.
        let mut bytes = fs::read(&layer).unwrap();
        bytes[0] ^= 0xff;
        fs::write(&layer, &bytes).unwrap();
        let layout = OciLayout::open(&dir.path().join("oci")).unwrap();
        let mut archive = Vec::new();
        let err = layout
            .write_docker_archive("x:y", &mut archive)
            .unwrap_err();
        assert!(
            matches!(err, LoadError::BlobDigest { ref digest, .. } if *digest == out.layers[1]),
            "{err}"
        );
        // The archive stops before manifest.json, so an engine would load nothing.
        let names: Vec<String> = tar::Archive::new(archive.as_slice())
            .entries()
            .unwrap()
            .filter_map(|e| {
                e.ok()
                    .map(|e| e.path().unwrap().to_string_lossy().into_owned())
            })
            .collect();
        assert!(!names.iter().any(|n| n == "manifest.json"), "{names:?}");

        fs::write(&layer, b"short").unwrap();
        let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
        assert!(matches!(err, LoadError::BlobSize { found: 5, .. }), "{err}");
        fs::remove_file(&layer).unwrap();
        let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
        assert!(matches!(err, LoadError::Read { .. }), "{err}");
        let err = OciLayout::open(dir.path()).unwrap_err();
        assert!(matches!(err, LoadError::NotALayout { .. }), "{err}");
    }
}
