//! The arena cache file: versioned, checksummed, memory-mappable.
//!
//! ```text
//! 0        magic "TTBHARNA"                      8 B
//! 8        layout version (u32 LE)               4 B
//! 12       header size = 64 (u32 LE)             4 B
//! 16       index length (u64 LE)                 8 B
//! 24       data offset (u64 LE, 4 KiB aligned)   8 B
//! 32       data length (u64 LE)                  8 B
//! 40       file length (u64 LE)                  8 B
//! 48       zero                                 16 B
//! 64       index: JSON {key, index} (index length bytes)
//! …        zero padding up to the data offset
//! data     the arena (data length bytes): weights in stream order
//! end-48   SHA-256 over header ‖ index JSON ‖ every weight's SHA-256 (binary, index order)
//! end-16   magic "TTBHEND\0"                     8 B
//! end-8    file length (u64 LE)                  8 B
//! ```
//!
//! The index carries one SHA-256 per weight, and the trailer seals the header, the index and
//! those digests: one checksum over the whole file layout (sizes, offsets, every weight's
//! digest). Opening checks, in order: size and both magics, layout version, the key (weights
//! revision + dtype + layout version), that the index matches the layout the caller expects,
//! and the seal. Any failure there means "rebuild": the file is never used.
//!
//! The weights' own bytes (1.15 GB at full size) are not hashed at open: a warm open only maps
//! the file and checks the sealed index, so it costs milliseconds instead of a full read of the
//! arena. Each weight is checked against its sealed digest the first time it is read
//! ([`Arena::weight`]), or all at once, in parallel, by [`Arena::verified_data`] (what a DRAM
//! upload reads); a mismatch is [`ArenaError::WeightChecksum`], naming the file and the weight.
//! The file is written to a temporary name in the same directory, synced, then renamed over the
//! old one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memmap2::{Mmap, MmapMut};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::build::{fill_arena, hex};
use super::layout::{ArenaEntry, ArenaIndex, LAYOUT_VERSION};
use super::{ArenaError, TensorSource, io_err};
use crate::format::ArenaDtype;

const MAGIC: &[u8; 8] = b"TTBHARNA";
const END_MAGIC: &[u8; 8] = b"TTBHEND\0";
const HEADER: usize = 64;
const TRAILER: usize = 48;
const DATA_ALIGN: u64 = 4096;

/// What decides whether a cached arena may be reused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArenaKey {
    /// Identity of the source weights (checkpoint revision or content hash).
    pub weights_revision: String,
    /// Storage format of the arena's weights; a different dtype is a different cache file.
    pub dtype: ArenaDtype,
    /// [`LAYOUT_VERSION`] the file was written with; a mismatch forces a rebuild.
    pub layout_version: u32,
}

impl ArenaKey {
    /// Key for `weights_revision` in `dtype`, stamped with this build's [`LAYOUT_VERSION`].
    pub fn new(weights_revision: impl Into<String>, dtype: ArenaDtype) -> Self {
        ArenaKey {
            weights_revision: weights_revision.into(),
            dtype,
            layout_version: LAYOUT_VERSION,
        }
    }

    /// Cache file name inside `GR00T_TT_CACHE`: one file per dtype, so a new revision
    /// replaces the old arena instead of piling up next to it.
    pub fn file_name(&self) -> String {
        format!("dit-arena-{}.ttarena", self.dtype.name())
    }
}

#[derive(Serialize, Deserialize)]
struct IndexDoc {
    key: ArenaKey,
    index: ArenaIndex,
}

/// An opened arena: the mapped file, its sealed index, and which weights were checked.
#[derive(Debug)]
pub struct Arena {
    /// The key stored in the file's index (equal to the one the caller asked for).
    pub key: ArenaKey,
    /// Where each weight sits in [`Arena::data`], with its per-weight SHA-256.
    pub index: ArenaIndex,
    /// The cache file the map was opened from.
    pub path: PathBuf,
    map: Mmap,
    data_offset: usize,
    /// Per index entry: whether its bytes matched the sealed digest, once checked.
    checked: Vec<OnceLock<bool>>,
}

impl Arena {
    /// All weight bytes, in stream order, as mapped: NOT checked against their digests (the
    /// index and layout are). Use [`Arena::verified_data`] for bytes that leave the process
    /// (a DRAM upload) and [`Arena::weight`] for one weight.
    pub fn data(&self) -> &[u8] {
        &self.map[self.data_offset..self.data_offset + self.index.total_bytes as usize]
    }

    /// The bytes of one weight as mapped, unchecked (see [`Arena::weight`]).
    pub fn weight_bytes(&self, e: &ArenaEntry) -> &[u8] {
        &self.data()[e.offset as usize..(e.offset + e.bytes) as usize]
    }

    /// The bytes of the `i`-th weight of the index, checked against its sealed digest on
    /// the first read (later reads reuse the verdict).
    pub fn weight_at(&self, i: usize) -> Result<&[u8], ArenaError> {
        let e = self
            .index
            .entries
            .get(i)
            .ok_or_else(|| ArenaError::NoSuchTensor(format!("#{i}")))?;
        let bytes = self.weight_bytes(e);
        let ok = *self.checked[i].get_or_init(|| hex(&Sha256::digest(bytes)) == e.sha256);
        if ok {
            Ok(bytes)
        } else {
            Err(ArenaError::WeightChecksum {
                path: self.path.clone(),
                name: e.name.clone(),
            })
        }
    }

    /// The bytes of the weight stored under checkpoint name `name`, checked on first read.
    pub fn weight(&self, name: &str) -> Result<&[u8], ArenaError> {
        let i = self
            .index
            .entries
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| ArenaError::NoSuchTensor(name.to_string()))?;
        self.weight_at(i)
    }

    /// All weight bytes, every weight not yet checked verified now (in parallel): what a
    /// full read of the arena (a DRAM upload) should use. The first bad weight in index
    /// order is the error.
    pub fn verified_data(&self) -> Result<&[u8], ArenaError> {
        (0..self.index.entries.len())
            .into_par_iter()
            .map(|i| self.weight_at(i).map(|_| ()))
            .collect::<Result<Vec<()>, ArenaError>>()?;
        Ok(self.data())
    }

    /// Weights whose digest has been checked so far (and matched or not).
    pub fn checked_weights(&self) -> usize {
        self.checked.iter().filter(|c| c.get().is_some()).count()
    }

    /// Decode one weight by checkpoint name to row-major `[K, N]` f32 (checked first).
    pub fn decode(&self, name: &str) -> Result<Vec<f32>, ArenaError> {
        let bytes = self.weight(name)?;
        let e = self
            .index
            .by_name(name)
            .ok_or_else(|| ArenaError::NoSuchTensor(name.to_string()))?;
        super::build::decode_weight(e, self.index.compute_cores, bytes)
    }
}

/// Whether [`open_or_build`] reused the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// The existing cache file passed every check and was mapped as-is.
    Hit,
    /// Built; `reason` says why the old file (if any) was not used.
    Built {
        /// The open error that rejected the old file, or `"no cache file"`.
        reason: String,
    },
}

/// Open the cached arena in `dir` if it is intact and matches `key` and `layout`; otherwise
/// build it from `source`, write it atomically and open that.
pub fn open_or_build(
    dir: &Path,
    key: &ArenaKey,
    layout: &ArenaIndex,
    source: &dyn TensorSource,
) -> Result<(Arena, CacheOutcome), ArenaError> {
    let path = dir.join(key.file_name());
    let reason = match open(&path, key, layout) {
        Ok(a) => return Ok((a, CacheOutcome::Hit)),
        Err(ArenaError::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound => {
            "no cache file".to_string()
        }
        Err(e) => e.to_string(),
    };
    write(&path, key, layout, source)?;
    // The data digests were computed from the bytes just written through the same mapping:
    // re-check the structure and the seal, and count every weight as checked.
    let arena = open(&path, key, layout)?;
    arena.checked.iter().for_each(|c| {
        let _ = c.set(true);
    });
    Ok((arena, CacheOutcome::Built { reason }))
}

fn corrupt(path: &Path, reason: impl Into<String>) -> ArenaError {
    ArenaError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// The seal over header, index and every tensor's digest; a malformed digest makes `path`
/// corrupt.
fn seal(
    path: &Path,
    header: &[u8],
    index_json: &[u8],
    entries: &[ArenaEntry],
) -> Result<[u8; 32], ArenaError> {
    let mut h = Sha256::new();
    h.update(header);
    h.update(index_json);
    for e in entries {
        h.update(
            unhex(&e.sha256).ok_or_else(|| corrupt(path, format!("bad digest for {}", e.name)))?,
        );
    }
    Ok(h.finalize().into())
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Open a cache file: structure, key, layout and seal checked now; the weights' bytes on
/// first read (see the module docs).
pub fn open(path: &Path, key: &ArenaKey, layout: &ArenaIndex) -> Result<Arena, ArenaError> {
    let file = File::open(path).map_err(io_err(path))?;
    // SAFETY: the file is only read through the map; the cache directory belongs to this
    // runtime and files in it are replaced by rename, never rewritten in place.
    let map = unsafe { Mmap::map(&file) }.map_err(io_err(path))?;
    let len = map.len();
    if len < HEADER + TRAILER {
        return Err(corrupt(
            path,
            format!("file is {len} bytes, shorter than header + trailer"),
        ));
    }
    let hdr = &map[..HEADER];
    if &hdr[..8] != MAGIC {
        return Err(corrupt(path, "bad magic"));
    }
    let version = u32::from_le_bytes(hdr[8..12].try_into().unwrap_or([0; 4]));
    if version != LAYOUT_VERSION {
        return Err(corrupt(
            path,
            format!("layout version {version}, expected {LAYOUT_VERSION}"),
        ));
    }
    let (index_len, data_offset, data_len, file_len) = (
        u64_at(hdr, 16),
        u64_at(hdr, 24),
        u64_at(hdr, 32),
        u64_at(hdr, 40),
    );
    if file_len != len as u64 {
        return Err(corrupt(
            path,
            format!("file is {len} bytes, header says {file_len} (partial write?)"),
        ));
    }
    let data_end = data_offset
        .checked_add(data_len)
        .and_then(|e| e.checked_add(TRAILER as u64));
    if data_offset < (HEADER as u64).saturating_add(index_len) || data_end != Some(file_len) {
        return Err(corrupt(path, "inconsistent section sizes"));
    }
    let tr = &map[len - TRAILER..];
    if &tr[32..40] != END_MAGIC || u64_at(tr, 40) != file_len {
        return Err(corrupt(path, "bad trailer"));
    }
    let index_json = &map[HEADER..HEADER + index_len as usize];
    let doc: IndexDoc = serde_json::from_slice(index_json)
        .map_err(|e| corrupt(path, format!("index JSON: {e}")))?;
    if &doc.key != key {
        return Err(corrupt(
            path,
            format!("key {:?} does not match wanted {:?}", doc.key, key),
        ));
    }
    if !doc.index.same_layout(layout) || doc.index.total_bytes != data_len {
        return Err(corrupt(path, "index does not match the expected layout"));
    }
    let sealed = seal(path, hdr, index_json, &doc.index.entries)?;
    if sealed[..] != tr[..32] {
        return Err(corrupt(path, "header/index checksum mismatch"));
    }
    let checked = doc.index.entries.iter().map(|_| OnceLock::new()).collect();
    Ok(Arena {
        key: doc.key,
        index: doc.index,
        path: path.to_path_buf(),
        map,
        data_offset: data_offset as usize,
        checked,
    })
}

/// Build the arena straight into a mapped temporary file, seal it, sync, rename over `path`.
pub fn write(
    path: &Path,
    key: &ArenaKey,
    layout: &ArenaIndex,
    source: &dyn TensorSource,
) -> Result<(), ArenaError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("arena"),
        std::process::id()
    ));
    let result = write_to(&tmp, key, layout, source)
        .and_then(|()| fs::rename(&tmp, path).map_err(io_err(path)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_to(
    tmp: &Path,
    key: &ArenaKey,
    layout: &ArenaIndex,
    source: &dyn TensorSource,
) -> Result<(), ArenaError> {
    // The index JSON length depends on the digests, whose length is fixed (64 hex chars), so
    // size the file with placeholder digests, fill the data, then write the real index.
    let mut placeholder = layout.clone();
    placeholder
        .entries
        .iter_mut()
        .for_each(|e| e.sha256 = "0".repeat(64));
    let index_len = serde_json::to_vec(&IndexDoc {
        key: key.clone(),
        index: placeholder,
    })
    .map_err(|e| corrupt(tmp, e.to_string()))?
    .len() as u64;
    let data_offset = (HEADER as u64 + index_len).div_ceil(DATA_ALIGN) * DATA_ALIGN;
    let data_len = layout.total_bytes;
    let file_len = data_offset + data_len + TRAILER as u64;

    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .map_err(io_err(tmp))?;
    file.set_len(file_len).map_err(io_err(tmp))?;
    // SAFETY: the temporary file has a per-process name and nobody else maps it.
    let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(io_err(tmp))?;
    let index = fill_arena(
        layout,
        source,
        &mut map[data_offset as usize..(data_offset + data_len) as usize],
    )?;
    let index_json = serde_json::to_vec(&IndexDoc {
        key: key.clone(),
        index,
    })
    .map_err(|e| corrupt(tmp, e.to_string()))?;
    assert_eq!(
        index_json.len() as u64,
        index_len,
        "index JSON length changed"
    );

    let mut hdr = [0u8; HEADER];
    hdr[..8].copy_from_slice(MAGIC);
    hdr[8..12].copy_from_slice(&LAYOUT_VERSION.to_le_bytes());
    hdr[12..16].copy_from_slice(&(HEADER as u32).to_le_bytes());
    hdr[16..24].copy_from_slice(&index_len.to_le_bytes());
    hdr[24..32].copy_from_slice(&data_offset.to_le_bytes());
    hdr[32..40].copy_from_slice(&data_len.to_le_bytes());
    hdr[40..48].copy_from_slice(&file_len.to_le_bytes());
    let doc: IndexDoc =
        serde_json::from_slice(&index_json).map_err(|e| corrupt(tmp, e.to_string()))?;
    let sealed = seal(tmp, &hdr, &index_json, &doc.index.entries)?;

    map[..HEADER].copy_from_slice(&hdr);
    map[HEADER..HEADER + index_json.len()].copy_from_slice(&index_json);
    let t = map.len() - TRAILER;
    map[t..t + 32].copy_from_slice(&sealed);
    map[t + 32..t + 40].copy_from_slice(END_MAGIC);
    map[t + 40..].copy_from_slice(&file_len.to_le_bytes());
    map.flush().map_err(io_err(tmp))?;
    drop(map);
    let mut f = file;
    f.flush().map_err(io_err(tmp))?;
    f.sync_all().map_err(io_err(tmp))?;
    Ok(())
}
