//! Content identity of a Hub file, computed while the bytes stream in.
//!
//! The Hub names every file by a hash of its content, and the cache uses that name for the blob:
//! * an LFS file by the sha256 of its content (`lfs.sha256` in the listing, `X-Linked-Etag`);
//! * a regular git file by its git blob id (`blobId` in the listing, the `ETag` of `/resolve`):
//!   sha1 of `"blob <len>\0" + content`, what `git hash-object` and Python's
//!   `huggingface_hub.utils.sha.git_hash` compute.
//!
//! So verifying a download is comparing its hash with its blob name, for both kinds.

use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::error::HubError;

/// Which hash names (and verifies) a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashKind {
    /// sha256 of the content: LFS files.
    LfsSha256,
    /// git blob sha1 (`blob <len>\0` + content): regular files.
    GitBlobSha1,
}

impl HashKind {
    /// Hex digits of a well-formed id of this kind.
    pub fn hex_len(self) -> usize {
        match self {
            HashKind::LfsSha256 => 64,
            HashKind::GitBlobSha1 => 40,
        }
    }

    /// What the Hub calls the expected value, for error messages.
    pub fn published_as(self) -> &'static str {
        match self {
            HashKind::LfsSha256 => "LFS oid",
            HashKind::GitBlobSha1 => "blob id",
        }
    }

    /// Whether `id` is a lowercase hex id of this kind (safe as a blob file name, too).
    pub fn is_valid_id(self, id: &str) -> bool {
        id.len() == self.hex_len()
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }
}

impl std::fmt::Display for HashKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HashKind::LfsSha256 => "sha256",
            HashKind::GitBlobSha1 => "git blob sha1",
        })
    }
}

/// A running hash of one file's content.
pub enum ContentHasher {
    /// sha256 of the content (LFS files).
    Sha256(Sha256),
    /// git blob sha1: sha1 of `blob <len>\0` followed by the content (regular files).
    GitBlob(Sha1),
}

impl ContentHasher {
    /// Start hashing a file of `size` bytes. The git blob header carries the length up front,
    /// so `size` must be the expected length; a body of another length fails the size check
    /// before the hash is compared.
    pub fn new(kind: HashKind, size: u64) -> Self {
        match kind {
            HashKind::LfsSha256 => ContentHasher::Sha256(Sha256::new()),
            HashKind::GitBlobSha1 => {
                let mut h = Sha1::new();
                h.update(format!("blob {size}\0").as_bytes());
                ContentHasher::GitBlob(h)
            }
        }
    }

    /// Feed the next bytes of the content.
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            ContentHasher::Sha256(h) => h.update(bytes),
            ContentHasher::GitBlob(h) => h.update(bytes),
        }
    }

    /// The lowercase hex digest.
    pub fn finish(self) -> String {
        match self {
            ContentHasher::Sha256(h) => hex(&h.finalize()),
            ContentHasher::GitBlob(h) => hex(&h.finalize()),
        }
    }
}

impl std::io::Write for ContentHasher {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The id of a file on disk (used only when a download finished before a crash, so there is
/// no stream to hash).
pub fn hash_file(kind: HashKind, path: &std::path::Path) -> Result<String, HubError> {
    let size = std::fs::metadata(path)
        .map_err(HubError::io("inspect", path))?
        .len();
    let mut h = ContentHasher::new(kind, size);
    let mut file = std::fs::File::open(path).map_err(HubError::io("open", path))?;
    std::io::copy(&mut file, &mut h).map_err(HubError::io("read", path))?;
    Ok(h.finish())
}

/// The git blob id of `bytes` (`git hash-object`).
pub fn git_blob_id(bytes: &[u8]) -> String {
    let mut h = ContentHasher::new(HashKind::GitBlobSha1, bytes.len() as u64);
    h.update(bytes);
    h.finish()
}

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_blob_id_matches_git_hash_object() {
        // `git hash-object` of these contents (the first is the example in huggingface_hub's
        // `git_hash` docstring, the second git's well-known empty blob).
        assert_eq!(
            git_blob_id(b"Hello, World!"),
            "b45ef6fec89518d314f546fd6c3025367b721684"
        );
        assert_eq!(git_blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    }

    #[test]
    fn git_blob_id_agrees_with_the_git_binary_when_present() {
        let tmp = tempfile::tempdir().unwrap();
        let content: Vec<u8> = (0..70_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let path = tmp.path().join("f");
        std::fs::write(&path, &content).unwrap();
        let Ok(out) = std::process::Command::new("git")
            .arg("hash-object")
            .arg(&path)
            .output()
        else {
            return; // no git on this machine: the fixed vectors above still hold
        };
        let git = String::from_utf8(out.stdout).unwrap();
        assert_eq!(git.trim(), git_blob_id(&content));
        assert_eq!(
            hash_file(HashKind::GitBlobSha1, &path).unwrap(),
            git_blob_id(&content)
        );
    }

    #[test]
    fn streaming_in_pieces_equals_one_shot() {
        let data = b"0123456789abcdef".repeat(1000);
        let mut h = ContentHasher::new(HashKind::GitBlobSha1, data.len() as u64);
        for c in data.chunks(777) {
            h.update(c);
        }
        assert_eq!(h.finish(), git_blob_id(&data));
        let mut h = ContentHasher::new(HashKind::LfsSha256, 0);
        for c in data.chunks(777) {
            h.update(c);
        }
        assert_eq!(h.finish(), sha256_hex(&data));
    }

    #[test]
    fn ids_are_checked_for_shape() {
        assert!(HashKind::GitBlobSha1.is_valid_id(&git_blob_id(b"x")));
        assert!(HashKind::LfsSha256.is_valid_id(&sha256_hex(b"x")));
        assert!(!HashKind::GitBlobSha1.is_valid_id(&sha256_hex(b"x")));
        assert!(!HashKind::GitBlobSha1.is_valid_id(&"A".repeat(40)));
        assert!(!HashKind::GitBlobSha1.is_valid_id("../../../../etc/passwd0000000000000000"));
    }
}
