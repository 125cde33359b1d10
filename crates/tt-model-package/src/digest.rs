//! `code_sha256`: an unambiguous digest of a file tree.
//!
//! Scheme `tt-model-tree-v1`: each file contributes a record
//! `u64 len(path) ‖ path ‖ u32 mode ‖ u64 size ‖ sha256(bytes)` (big-endian integers, path
//! relative with `/` separators), records sorted by path, and the digest is SHA-256 over
//! the scheme name followed by all records. Length prefixes make every record boundary
//! explicit (no two trees share a byte stream), and hashing file contents separately lets
//! staging hash while it copies.

use sha2::{Digest, Sha256};

/// The scheme tag hashed first, so a future scheme can never collide with this one.
pub const TREE_SCHEME: &[u8] = b"tt-model-tree-v1\n";

/// One file of a tree, as the digest sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileRecord {
    /// Relative path with `/` separators.
    pub path: String,
    /// Normalised mode: `0o644` or `0o755`.
    pub mode: u32,
    /// Length of the contents in bytes.
    pub size: u64,
    /// SHA-256 of the contents.
    pub sha256: [u8; 32],
}

/// The tree digest over `records` (any order; they are sorted here), `sha256:<hex>`.
pub fn tree_digest(records: &[FileRecord]) -> String {
    let mut sorted: Vec<&FileRecord> = records.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut h = Sha256::new();
    h.update(TREE_SCHEME);
    for r in sorted {
        h.update((r.path.len() as u64).to_be_bytes());
        h.update(r.path.as_bytes());
        h.update(r.mode.to_be_bytes());
        h.update(r.size.to_be_bytes());
        h.update(r.sha256);
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// Normalises a file mode the way the image sees it: executable or not.
pub fn normal_mode(mode: u32) -> u32 {
    if mode & 0o111 != 0 { 0o755 } else { 0o644 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(path: &str, mode: u32, data: &[u8]) -> FileRecord {
        FileRecord {
            path: path.into(),
            mode,
            size: data.len() as u64,
            sha256: Sha256::digest(data).into(),
        }
    }

    #[test]
    fn order_independent_and_sensitive_to_path_mode_and_bytes() {
        let a = [rec("a", 0o644, b"x"), rec("b/c", 0o644, b"y")];
        let b = [rec("b/c", 0o644, b"y"), rec("a", 0o644, b"x")];
        assert_eq!(tree_digest(&a), tree_digest(&b));
        assert_ne!(
            tree_digest(&a),
            tree_digest(&[rec("a", 0o755, b"x"), rec("b/c", 0o644, b"y")])
        );
        assert_ne!(
            tree_digest(&a),
            tree_digest(&[rec("a", 0o644, b"z"), rec("b/c", 0o644, b"y")])
        );
        assert_ne!(
            tree_digest(&a),
            tree_digest(&[rec("A", 0o644, b"x"), rec("b/c", 0o644, b"y")])
        );
    }

    #[test]
    fn path_and_content_boundaries_are_unambiguous() {
        // The naive "path then bytes" concatenation hashes these two trees identically.
        let one = [rec("ab", 0o644, b"c")];
        let two = [rec("a", 0o644, b"bc")];
        assert_ne!(tree_digest(&one), tree_digest(&two));
        // Splitting one file into two must change the digest too.
        assert_ne!(
            tree_digest(&[rec("a", 0o644, b"xy")]),
            tree_digest(&[rec("a", 0o644, b"x"), rec("a/y", 0o644, b"y")])
        );
    }

    #[test]
    fn empty_tree_has_a_fixed_digest() {
        let want = format!("sha256:{}", hex::encode(Sha256::digest(TREE_SCHEME)));
        assert_eq!(tree_digest(&[]), want);
    }

    #[test]
    fn modes() {
        assert_eq!(normal_mode(0o100600), 0o644);
        assert_eq!(normal_mode(0o100700), 0o755);
        assert_eq!(normal_mode(0o100654), 0o755);
    }
}
