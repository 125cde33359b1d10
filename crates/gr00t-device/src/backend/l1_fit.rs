//! A matmul's units cut to fit a core's L1 at the activation's rows: our matmul kernels hold a
//! unit's whole activation block (`m_tiles × k_count` bf16 tiles) and two weight strips in L1,
//! which the DiT's few rows never outgrow, but the backbone's hundreds of tokens do (SigLIP2's
//! `fc2`: 11 tile rows × 68 K tiles is 1.5 MB). Such a unit is cut into one unit per output
//! column, each cut again into K blocks that fit, all on the unit's own core (the kernels take a
//! core's units in turn); every block writes its partials as a K piece of its own, which the
//! matmul's end sums with the others as it sums a split column's. The weight is read once as
//! before; what grows is the partials' DRAM traffic (one fp32 tile per block and output tile).

use tt_blackhole::plan::{KERNEL_CONFIG_CUT, L1_BUDGET};

use super::super::graph_steps::{MatmulCbs, MatmulUnit};

/// L1 a matmul core's activation, weight and partial CBs may take together: the plan's CB
/// budget less room for the task tables (CBs 30 and 31) and the semaphores.
pub(crate) const MATMUL_L1: usize = L1_BUDGET - 2 * KERNEL_CONFIG_CUT;

/// Bytes of one bf16 activation tile and one fp32 partial tile.
const ACT_TILE: usize = 2048;
const PARTIAL_TILE: usize = 4096;

/// The units of one matmul, its K pieces and its CB pages, after [`fit_l1`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fitted {
    pub units: Vec<MatmulUnit>,
    /// K pieces the partials hold (the split's, times the blocks per column).
    pub pieces: usize,
    pub cbs: MatmulCbs,
}

/// Why no cut fits.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "a matmul over {mt} tile rows does not fit a core's L1 ({budget} B) even one K tile at a \
     time"
)]
pub(crate) struct NoFit {
    pub mt: usize,
    pub budget: usize,
}

/// What `units` (pieces `k_split`, CBs `cbs`) need over `mt` activation tile rows with
/// `w_tile`-byte weight tiles, within `budget` bytes of L1: as they are when the largest unit
/// fits, else cut into per-column K blocks as the module says.
pub(crate) fn fit_l1(
    units: Vec<MatmulUnit>,
    k_split: usize,
    cbs: MatmulCbs,
    mt: usize,
    w_tile: usize,
    budget: usize,
) -> Result<Fitted, NoFit> {
    let bytes = |act: usize, weights: usize, out: usize| {
        act * ACT_TILE + weights * w_tile + out * PARTIAL_TILE
    };
    if bytes(cbs.act, cbs.weights, cbs.out) <= budget {
        return Ok(Fitted {
            units,
            pieces: k_split,
            cbs,
        });
    }
    // One output column per unit: the partial CB holds `mt` tiles (2 at least, as the kernels
    // double-buffer); each K tile of a block costs its activation column and two weight tiles.
    let out = mt.max(2);
    let per_k = mt * ACT_TILE + 2 * w_tile;
    let kb = budget.saturating_sub(out * PARTIAL_TILE) / per_k;
    if kb == 0 {
        return Err(NoFit { mt, budget });
    }
    let k_max = units.iter().map(|u| u.k_count).max().unwrap_or(0);
    let blocks = k_max.div_ceil(kb).max(1);
    let mut cut = Vec::new();
    let mut k_block_max = 0;
    for u in &units {
        for j in 0..u.n_count {
            // The unit's tiles are stored column by column, K fastest.
            let column_first = u.first_tile + j * u.k_count;
            for b in 0..blocks {
                let (off, count) = balanced(u.k_count, blocks, b);
                if count == 0 {
                    continue;
                }
                k_block_max = k_block_max.max(count);
                cut.push(MatmulUnit {
                    first_tile: column_first + off,
                    n_start: u.n_start + j,
                    n_count: 1,
                    k_start: u.k_start + off,
                    k_count: count,
                    piece: u.piece * blocks + b,
                    ..u.clone()
                });
            }
        }
    }
    Ok(Fitted {
        units: cut,
        pieces: k_split * blocks,
        cbs: MatmulCbs {
            act: mt * k_block_max,
            weights: 2 * k_block_max,
            out,
        },
    })
}

/// Block `i` of `n` balanced blocks of `len`: its offset and length.
fn balanced(len: usize, n: usize, i: usize) -> (usize, usize) {
    let (base, extra) = (len / n, len % n);
    (i * base + i.min(extra), base + usize::from(i < extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(
        core: usize,
        first: usize,
        n: (usize, usize),
        k: (usize, usize),
        piece: usize,
    ) -> MatmulUnit {
        MatmulUnit {
            x: core,
            y: 0,
            first_tile: first,
            n_start: n.0,
            n_count: n.1,
            k_start: k.0,
            k_count: k.1,
            piece,
        }
    }

    /// Every (k, n) weight tile of `units` with its arena tile and piece, as a map from the
    /// tile to (arena tile, piece).
    fn tiles(units: &[MatmulUnit]) -> Vec<((usize, usize), usize)> {
        let mut v: Vec<_> = units
            .iter()
            .flat_map(|u| {
                (0..u.n_count).flat_map(move |j| {
                    (0..u.k_count).map(move |k| {
                        (
                            (u.k_start + k, u.n_start + j),
                            u.first_tile + j * u.k_count + k,
                        )
                    })
                })
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn units_that_fit_are_left_as_they_are() {
        let units = vec![
            unit(0, 0, (0, 2), (0, 36), 0),
            unit(1, 72, (2, 2), (0, 36), 0),
        ];
        let cbs = MatmulCbs {
            act: 11 * 36,
            weights: 72,
            out: 22,
        };
        let f = fit_l1(units.clone(), 1, cbs.clone(), 11, 2048, MATMUL_L1).unwrap();
        assert_eq!(
            f,
            Fitted {
                units,
                pieces: 1,
                cbs
            }
        );
    }

    #[test]
    fn a_unit_too_large_for_l1_is_cut_into_k_blocks_that_read_every_tile_once() {
        // SigLIP2's fc2 at 324 tokens: K = 135 tiles split in two pieces over 36 columns.
        let (mt, kt) = (11, 135);
        let mut units = Vec::new();
        for n in 0..36 {
            for s in 0..2 {
                let (k0, kc) = balanced(kt, 2, s);
                units.push(unit(2 * n + s, n * kt + k0, (n, 1), (k0, kc), s));
            }
        }
        let cbs = MatmulCbs {
            act: mt * 68,
            weights: 2 * 68,
            out: mt,
        };
        let f = fit_l1(units.clone(), 2, cbs, mt, 2048, MATMUL_L1).unwrap();
        assert_eq!(f.pieces, 4);
        // The same tiles from the same arena pages, each once.
        assert_eq!(tiles(&f.units), tiles(&units));
        // Each block on its unit's core, its piece within the column's four.
        for u in &f.units {
            assert!(u.piece < 4);
            let whole = units
                .iter()
                .find(|w| w.x == u.x && w.n_start == u.n_start)
                .unwrap();
            assert_eq!(u.piece / 2, whole.piece);
        }
        let used = f.cbs.act * 2048 + f.cbs.weights * 2048 + f.cbs.out * 4096;
        assert!(used <= MATMUL_L1, "{used}");
        assert_eq!(f.cbs.act, mt * 34);
    }

    #[test]
    fn a_wide_unit_is_cut_per_column_before_its_k_blocks() {
        let u = unit(5, 100, (3, 2), (0, 192), 0);
        let cbs = MatmulCbs {
            act: 7 * 192,
            weights: 2 * 192,
            out: 14,
        };
        let f = fit_l1(vec![u.clone()], 1, cbs, 7, 2048, MATMUL_L1).unwrap();
        assert!(f.units.iter().all(|c| c.n_count == 1 && c.x == 5));
        assert_eq!(tiles(&f.units), tiles(&[u]));
        assert_eq!(f.units.len(), 2 * f.pieces);
    }

    #[test]
    fn rows_too_many_for_one_k_tile_are_a_typed_error() {
        let u = unit(0, 0, (0, 1), (0, 4), 0);
        let cbs = MatmulCbs {
            act: 4000,
            weights: 8,
            out: 1000,
        };
        let err = fit_l1(vec![u], 1, cbs, 1000, 2048, MATMUL_L1).unwrap_err();
        assert_eq!(err.mt, 1000);
        assert!(err.to_string().contains("1000 tile rows"));
    }
}
