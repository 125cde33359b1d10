//! How one weight matrix `[K, N]` (in tiles) is divided among the compute cores.
//!
//! The DiT runs on M = 51 tokens (2 tile rows), so every matmul is weight-bound: the work
//! unit is a strip of weight tiles. Output columns are dealt to cores first; when a matrix has
//! fewer tile columns than there are cores, its K dimension is also cut into `k_split`
//! contiguous pieces so that every core streams roughly the same number of weight tiles (the
//! partial sums are added by the core that owns k-piece 0 of the column).
//!
//! The arena stores each weight's tiles in exactly this order: unit by unit (core order), and
//! inside a unit column by column, K fastest. A core's share is therefore one contiguous byte
//! range of the arena, which is what its reader kernel streams from DRAM.

use serde::{Deserialize, Serialize};

/// One core's share of one matmul weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkUnit {
    /// Compute-core index (0..compute_cores).
    pub core: usize,
    /// First output tile column of the share.
    pub n_start: usize,
    /// Output tile columns in the share.
    pub n_count: usize,
    /// First K tile row of the share (nonzero only when K is split).
    pub k_start: usize,
    /// K tile rows in the share.
    pub k_count: usize,
    /// Index of the unit's first tile inside the weight's tile stream.
    pub first_tile: usize,
}

impl WorkUnit {
    /// Weight tiles in the share: `n_count * k_count`.
    pub const fn tiles(&self) -> usize {
        self.n_count * self.k_count
    }
}

/// The division of one `[kt, nt]`-tile weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatmulSplit {
    /// K (input features) in tiles.
    pub kt: usize,
    /// N (output features) in tiles.
    pub nt: usize,
    /// Pieces K is cut into (1 when there are at least as many columns as cores).
    pub k_split: usize,
    /// At most one unit per core, in core order.
    pub units: Vec<WorkUnit>,
}

/// `[start, start+count)` of part `i` when `total` items are dealt into `parts` contiguous,
/// balanced parts (the first `total % parts` parts get one more).
pub const fn balanced(total: usize, parts: usize, i: usize) -> (usize, usize) {
    let base = total / parts;
    let extra = total % parts;
    let start = i * base + if i < extra { i } else { extra };
    (start, base + if i < extra { 1 } else { 0 })
}

/// Split a `[kt, nt]`-tile weight over `cores` compute cores.
pub fn split_matmul(kt: usize, nt: usize, cores: usize) -> MatmulSplit {
    assert!(
        kt > 0 && nt > 0 && cores > 0,
        "split_matmul: empty matrix or no cores"
    );
    let mut units = Vec::new();
    let mut first_tile = 0;
    let k_split = if nt >= cores {
        1
    } else {
        (cores / nt).clamp(1, kt)
    };
    if k_split == 1 {
        for core in 0..cores.min(nt) {
            let (n_start, n_count) = balanced(nt, cores.min(nt), core);
            let u = WorkUnit {
                core,
                n_start,
                n_count,
                k_start: 0,
                k_count: kt,
                first_tile,
            };
            first_tile += u.tiles();
            units.push(u);
        }
    } else {
        for n in 0..nt {
            for s in 0..k_split {
                let (k_start, k_count) = balanced(kt, k_split, s);
                let core = n * k_split + s;
                let u = WorkUnit {
                    core,
                    n_start: n,
                    n_count: 1,
                    k_start,
                    k_count,
                    first_tile,
                };
                first_tile += u.tiles();
                units.push(u);
            }
        }
    }
    MatmulSplit {
        kt,
        nt,
        k_split,
        units,
    }
}

impl MatmulSplit {
    /// Tile (k, n) of the weight for every position of its stream, in stream order.
    pub fn stream_order(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.units.iter().flat_map(|u| {
            (u.n_start..u.n_start + u.n_count)
                .flat_map(move |n| (u.k_start..u.k_start + u.k_count).map(move |k| (k, n)))
        })
    }

    /// Largest share any core streams, in tiles.
    pub fn max_tiles_per_core(&self) -> usize {
        self.units.iter().map(WorkUnit::tiles).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_cover(kt: usize, nt: usize, cores: usize) {
        let s = split_matmul(kt, nt, cores);
        let mut seen = vec![0u8; kt * nt];
        for (k, n) in s.stream_order() {
            seen[k * nt + n] += 1;
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "kt={kt} nt={nt} cores={cores}"
        );
        assert!(s.units.len() <= cores);
        let mut next = 0;
        for (i, u) in s.units.iter().enumerate() {
            assert_eq!(u.first_tile, next);
            next += u.tiles();
            assert!(i == 0 || u.core > s.units[i - 1].core);
        }
    }

    #[test]
    fn covers_every_tile_once() {
        for (kt, nt) in [
            (48, 48),
            (64, 48),
            (48, 96),
            (48, 192),
            (192, 48),
            (2, 2),
            (5, 1),
            (1, 200),
            (7, 13),
        ] {
            for cores in [1, 3, 96, 97] {
                check_cover(kt, nt, cores);
            }
        }
    }

    #[test]
    fn full_size_shares() {
        // D x D: 48 columns, K cut in 2 → 96 units of 24 tiles.
        let s = split_matmul(48, 48, 96);
        assert_eq!(
            (s.k_split, s.units.len(), s.max_tiles_per_core()),
            (2, 96, 24)
        );
        // FF up: 192 columns → 2 columns of full K per core.
        let s = split_matmul(48, 192, 96);
        assert_eq!(
            (s.k_split, s.units.len(), s.max_tiles_per_core()),
            (1, 96, 96)
        );
        assert_eq!(balanced(10, 4, 0), (0, 3));
        assert_eq!(balanced(10, 4, 3), (8, 2));
    }
}
