//! One matmul's program: the plan's cut of a DiT weight ([`TtDevice::matmul_spec`]), or any
//! weight's cut given whole ([`TtDevice::spec_of`]: the action head's), with our kernels.

// The backend's own types and helpers (its imports too): this is a part of it.
use super::*;
use tt_blackhole::format::ArenaDtype;
use tt_blackhole::split::WorkUnit;

use super::super::sfpu::compose_compute;

use super::l1_fit::{MATMUL_L1, fit_l1};
use gr00t_megakernel::packed::PackedWeights;

/// What differs between two matmuls' programs ([`TtDevice::spec_of`]): the arena the weight
/// is in, its shape, the rows, its cut over the cores and their CBs.
pub(crate) struct MatmulCut {
    pub arena: &'static str,
    /// The arena's tile format (each arena has its own: the DiT's and the head's block-float,
    /// the backbone's bf16).
    pub dtype: ArenaDtype,
    /// `[K, N]` and in tiles.
    pub kn: [usize; 2],
    pub tiles: [usize; 2],
    /// The activation's real rows.
    pub m: usize,
    pub k_split: usize,
    pub units: Vec<MatmulUnit>,
    pub cbs: MatmulCbs,
}

/// One matmul's program as the plan cuts it ([`TtDevice::matmul_spec`]).
pub(crate) struct MatmulSpec {
    /// What every matmul of a program shares (the arena, dtypes, kernels).
    pub shared: MatmulShared,
    /// This matmul's shape, units and CBs.
    pub job: MatmulJob,
    /// The weight's K and N.
    pub k: usize,
    /// See `k`.
    pub n: usize,
    /// Output tile columns.
    pub nt: usize,
    /// K pieces of the split columns (the partials hold this many row blocks).
    pub k_split: usize,
}

/// A split's work unit as a matmul job's unit: its compute core's coordinates, its first weight
/// tile in the arena (the weight's own first tile `weight_first` plus the unit's offset), its
/// columns and K range, and which K piece's partials it writes (0 unless K is split).
pub(crate) fn matmul_unit(u: &WorkUnit, weight_first: usize, k_split: usize) -> MatmulUnit {
    let (x, y) = compute_coord(u.core);
    MatmulUnit {
        x,
        y,
        first_tile: weight_first + u.first_tile,
        n_start: u.n_start,
        n_count: u.n_count,
        k_start: u.k_start,
        k_count: u.k_count,
        piece: if k_split > 1 { u.core % k_split } else { 0 },
    }
}

/// What one matmul's device program needs, from the plan: work units → cores (runtime args),
/// CB sizes, the weight's place in the DiT arena (`index`), our kernels. `m` is the
/// activation's rows.
pub(crate) fn matmul_spec(
    index: &ArenaIndex,
    plan: &MegakernelPlan,
    block: usize,
    kind: WeightKind,
    m: usize,
) -> Result<MatmulSpec, DitRunError> {
    let e = index
        .entry(block, kind)
        .ok_or_else(|| DitRunError::Arena(format!("no block {block} {kind:?}")))?;
    let [k, n] = e.kn_shape;
    let [kt, nt] = e.tiles;
    let class = plan.class(block, kind);
    let split = &class.split;
    let mt = m.div_ceil(32);
    let block_first = e.first_tile as usize;
    let mut units = Vec::with_capacity(split.units.len());
    let (mut act_pages, mut w_pages, mut out_pages) = (0, 0, 0);
    for u in &split.units {
        let (cx, cy) = compute_coord(u.core);
        let core = plan
            .cores
            .iter()
            .find(|c| (c.x, c.y) == (cx, cy) && matches!(c.role, CoreRole::Compute { .. }))
            .ok_or_else(|| {
                DitRunError::Device(format!("plan has no compute core at ({cx},{cy})"))
            })?;
        let cb = |name: &str| {
            core.cbs
                .iter()
                .find(|c| c.name == name)
                .map_or(0, |c| c.pages)
        };
        // The plan sized these for its own M; a larger M here would overflow them.
        let (need_act, need_w) = (mt * u.k_count, u.k_count);
        if need_act > cb("act_in") || need_w > cb("weights") {
            return Err(DitRunError::Input(format!(
                "matmul {kind:?} M={m}: core ({cx},{cy}) needs {need_act} activation and \
                     {need_w} weight pages, the plan gives {} and {}",
                cb("act_in"),
                cb("weights")
            )));
        }
        act_pages = act_pages.max(cb("act_in"));
        w_pages = w_pages.max(cb("weights"));
        out_pages = out_pages.max(cb("partials_f32")).max(2);
        units.push(matmul_unit(u, block_first, split.k_split));
    }
    Ok(spec_of(MatmulCut {
        arena: ARENA,
        dtype: index.dtype,
        kn: [k, n],
        tiles: [kt, nt],
        m,
        k_split: split.k_split,
        units,
        cbs: MatmulCbs {
            act: act_pages,
            weights: w_pages,
            out: out_pages,
        },
    }))
}

/// The program of a matmul cut as `cut` says: our three kernels, the arena's dtype and
/// page, the roofline's fidelity.
pub(crate) fn spec_of(cut: MatmulCut) -> MatmulSpec {
    let ([k, n], [kt, nt]) = (cut.kn, cut.tiles);
    let shared = MatmulShared {
        arena: cut.arena.into(),
        weight_dtype: cut.dtype.to_string(),
        weight_page: cut.dtype.format().tile_bytes() as u64,
        // The roofline's compute bound assumes this same fidelity (one source of truth).
        math_fidelity: tt_blackhole::plan::roofline::KERNEL_FIDELITY.name().into(),
        kernels: KernelSet {
            reader: with_task_table(READER_KERNEL),
            compute: compose_compute(COMPUTE_KERNEL, &[]),
            writer: with_task_table(WRITER_KERNEL),
        },
    };
    let job = MatmulJob {
        m: cut.m,
        mt: cut.m.div_ceil(32),
        k,
        kt,
        nt,
        k_split: cut.k_split,
        units: cut.units,
        cbs: cut.cbs,
        act: None,
        out: None,
    };
    MatmulSpec {
        shared,
        job,
        k,
        n,
        nt,
        k_split: cut.k_split,
    }
}

/// The program of one matmul over a packed arena's weight `w` (the head's, the
/// backbone's), cut as the DiT's are (`split_matmul` over the compute cores, the same
/// units, the same kernels), its CBs sized for `m` activation rows, its units cut further
/// where they would not fit a core's L1 at those rows (`l1_fit`).
pub(crate) fn packed_matmul_spec<W: Copy + PartialEq + std::fmt::Debug>(
    arena: &'static str,
    weights: &PackedWeights<W>,
    w: W,
    m: usize,
) -> Result<MatmulSpec, DitRunError> {
    let e = weights
        .get(w)
        .ok_or_else(|| DitRunError::Arena(format!("{arena} has no {w:?}")))?;
    let split = weights.split(e);
    let mt = m.div_ceil(32);
    let (mut act_pages, mut w_pages, mut out_pages) = (0, 0, 2);
    let units = split
        .units
        .iter()
        .map(|u| {
            act_pages = act_pages.max(mt * u.k_count);
            w_pages = w_pages.max(2 * u.k_count);
            out_pages = out_pages.max(mt * u.n_count);
            matmul_unit(u, e.first_tile, split.k_split)
        })
        .collect();
    let cbs = MatmulCbs {
        act: act_pages,
        weights: w_pages,
        out: out_pages,
    };
    let w_tile = weights.dtype.format().tile_bytes();
    let fitted = fit_l1(units, split.k_split, cbs, mt, w_tile, MATMUL_L1)
        .map_err(|e| DitRunError::Input(format!("{arena} {w:?}: {e}")))?;
    Ok(spec_of(MatmulCut {
        arena,
        dtype: weights.dtype,
        kn: e.kn_shape,
        tiles: e.tiles,
        m,
        k_split: fitted.pieces,
        units: fitted.units,
        cbs: fitted.cbs,
    }))
}
