//! Interleaved DRAM placement (tt-metal's default `DRAM_MEMORY_CONFIG`): page i goes to bank
//! `i % banks` at offset `(i / banks) * page_size` from the buffer's base in that bank. One
//! page is one tile here, so a tensor's tiles are spread round-robin over the 8 GDDR6 banks.

use serde::{Deserialize, Serialize};

/// DRAM banks tt-metal exposes on Blackhole p150a.
pub const NUM_DRAM_BANKS: usize = 8;

/// Where one page lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DramPlace {
    /// Bank index, `0..banks`.
    pub bank: usize,
    /// Byte offset inside the bank, relative to the buffer's (same-in-every-bank) base.
    pub offset: u64,
}

/// Placement of page `index` of an interleaved buffer with `page_size`-byte pages.
pub const fn interleaved(index: u64, page_size: u64, banks: usize) -> DramPlace {
    DramPlace {
        bank: (index % banks as u64) as usize,
        offset: (index / banks as u64) * page_size,
    }
}

/// Bytes a buffer of `pages` pages occupies in each bank (the per-bank allocation size).
pub const fn bytes_per_bank(pages: u64, page_size: u64, banks: usize) -> u64 {
    pages.div_ceil(banks as u64) * page_size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin() {
        let p = |i| interleaved(i, 1088, NUM_DRAM_BANKS);
        assert_eq!(p(0), DramPlace { bank: 0, offset: 0 });
        assert_eq!(p(7), DramPlace { bank: 7, offset: 0 });
        assert_eq!(
            p(8),
            DramPlace {
                bank: 0,
                offset: 1088
            }
        );
        assert_eq!(
            p(19),
            DramPlace {
                bank: 3,
                offset: 2 * 1088
            }
        );
        assert_eq!(bytes_per_bank(17, 1088, 8), 3 * 1088);
        // Every (bank, offset) pair is hit exactly once for a 1000-page buffer.
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            assert!(seen.insert(p(i)));
        }
    }
}
