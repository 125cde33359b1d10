//! SHA-256 as used by the arena (per-weight digests, cache trailer), exposed so callers can
//! derive cache keys (e.g. a checkpoint revision) without their own hashing dependency.

use sha2::{Digest, Sha256};

/// Incremental SHA-256 with a lowercase-hex result.
#[derive(Debug, Clone, Default)]
pub struct Hasher(Sha256);

impl Hasher {
    /// A hasher over no bytes yet.
    pub fn new() -> Self {
        Hasher(Sha256::new())
    }

    /// Feed more bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Finish: the 32-byte digest as 64 lowercase hex characters.
    pub fn hex(self) -> String {
        self.0
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_vector() {
        let mut h = super::Hasher::new();
        h.update(b"abc");
        assert_eq!(
            h.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
