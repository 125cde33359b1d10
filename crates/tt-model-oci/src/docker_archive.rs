//! The docker-archive dockerd 20.10 loads, written on the fly from a layout's blobs: each
//! blob hashed as it is copied, `manifest.json` last.

use std::fs;
use std::io::{self, Read, Write};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::archive::ArchiveImage;
use crate::layout::{Blob, LayoutError, OciLayout};

impl OciLayout {
    /// Writes this image to `out` as a docker-archive whose `manifest.json` tags it
    /// `reference` (no tag when `reference` is empty or pinned by digest). Blobs are hashed as
    /// they are copied; `manifest.json` comes last, so a corrupt blob ends the archive before
    /// the engine could load it. Returns the bytes written ([`OciLayout::archive_size`]).
    pub fn write_docker_archive<W: Write>(
        &self,
        reference: &str,
        out: W,
    ) -> Result<u64, LayoutError> {
        let mut counted = CountingWriter { inner: out, n: 0 };
        let mut tar = tar::Builder::new(&mut counted);
        let config_name = format!("{}.json", self.config.hex());
        append_blob(&mut tar, &self.config, &config_name)?;
        for layer in self.unique_layers() {
            append_blob(&mut tar, layer, &format!("{}/layer.tar", layer.hex()))?;
        }
        let bytes = self.archive_manifest(reference);
        let mut header = tar_header(bytes.len() as u64);
        tar.append_data(&mut header, "manifest.json", bytes.as_slice())
            .map_err(stream_err)?;
        tar.finish().map_err(stream_err)?;
        drop(tar);
        counted.flush().map_err(stream_err)?;
        Ok(counted.n)
    }
}

impl OciLayout {
    /// The archive's `manifest.json` for `reference`: the config and layer file names, and
    /// the tag (none when `reference` is empty or pinned by digest).
    fn archive_manifest(&self, reference: &str) -> Vec<u8> {
        let tagged = !(reference.is_empty() || reference.contains('@'));
        let manifest = [ArchiveImage {
            config: format!("{}.json", self.config.hex()),
            repo_tags: tagged.then(|| reference.to_string()).into_iter().collect(),
            layers: self
                .layers
                .iter()
                .map(|l| format!("{}/layer.tar", l.hex()))
                .collect(),
        }];
        serde_json::to_vec(&manifest).expect("the archive manifest serializes")
    }

    /// The bytes [`OciLayout::write_docker_archive`] writes for `reference`, exactly: every
    /// blob and `manifest.json` with its tar header and padding, and the two end blocks (the
    /// entry names are under 100 bytes, so no long-name records). The total of a load's
    /// progress.
    pub fn archive_size(&self, reference: &str) -> u64 {
        let entry = |size: u64| 512 + size.div_ceil(512) * 512;
        entry(self.config.size)
            + self
                .unique_layers()
                .iter()
                .map(|l| entry(l.size))
                .sum::<u64>()
            + entry(self.archive_manifest(reference).len() as u64)
            + 1024
    }
}

/// A regular file's tar header: `size` bytes, mode 0644, mtime 0.
pub fn tar_header(size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_entry_type(tar::EntryType::Regular);
    h
}

/// A write failure of the archive: the receiving side went away, or a blob read failed.
pub(crate) fn stream_err(source: io::Error) -> LayoutError {
    LayoutError::Read {
        path: PathBuf::from("<archive stream>"),
        source,
    }
}

/// Copies one blob into the archive under `name`, hashing it on the way.
pub(crate) fn append_blob<W: Write>(
    tar: &mut tar::Builder<W>,
    blob: &Blob,
    name: &str,
) -> Result<(), LayoutError> {
    let read_err = |source| LayoutError::Read {
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
        return Err(LayoutError::BlobSize {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            expected: blob.size,
            found: reader.n,
        });
    }
    let found = format!("sha256:{}", hex::encode(reader.hasher.finalize()));
    if found != blob.digest {
        return Err(LayoutError::BlobDigest {
            path: blob.path.clone(),
            digest: blob.digest.clone(),
            found,
        });
    }
    Ok(())
}

pub(crate) struct HashingReader<R> {
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

/// A writer that counts the bytes it passes on (the layer rewriter in `reproducible` uses it too).
pub(crate) struct CountingWriter<W> {
    pub(crate) inner: W,
    pub(crate) n: u64,
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
