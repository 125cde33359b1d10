//! A step graph's matmul-and-end steps packed into the programs the worker runs: the plan's
//! packer ([`tt_blackhole::plan::program::pack_programs`]) decides which steps share a program
//! and gives every phase its cores; here its input is read off the steps the worker gets (so
//! what is packed is what runs) and its answer put back into them as `chain` steps.

use tt_blackhole::device::DitRunError;
use tt_blackhole::plan::program::{Before, StepNeed, pack_programs};

use super::graph_steps::{BeforeStep, ChainStep, GraphStep, MatmulEndStep};

/// A matmul-and-end step's cores as the packer sees them, from the step the worker gets.
pub(super) fn need_of(step: &MatmulEndStep) -> StepNeed {
    let before = step.before.as_ref().map(|b| {
        let need = match b {
            BeforeStep::Rows(r) => Before::Rows {
                row_tiles: r.row_tiles,
            },
            BeforeStep::Attention(a) => Before::Attention {
                heads: a.heads,
                head_dim: a.hd,
            },
        };
        (need, b.group().to_string())
    });
    StepNeed {
        before,
        matmul_jobs: step
            .matmul
            .jobs
            .iter()
            .map(|j| j.units.iter().map(|u| (u.x, u.y)).collect())
            .collect(),
        end_jobs: step.finish.jobs.iter().map(|j| (j.mt, j.nt)).collect(),
        end_kernels: step.finish.group.clone(),
    }
}

/// The graph's steps with every run of matmul-and-end steps packed into `chain` steps (one
/// program each, the cores of every phase given), and how many programs the worker launches.
pub(crate) fn pack(
    steps: Vec<GraphStep>,
    grid: [usize; 2],
    chain: bool,
) -> Result<(Vec<GraphStep>, usize), DitRunError> {
    let (mut out, mut programs, mut run) = (Vec::new(), 0, Vec::new());
    for st in steps {
        match st {
            GraphStep::MatmulEnd(s) => run.push(*s),
            other => {
                programs += pack_run(std::mem::take(&mut run), grid, chain, &mut out)?;
                out.push(other);
                programs += 1;
            }
        }
    }
    programs += pack_run(run, grid, chain, &mut out)?;
    Ok((out, programs))
}

/// One run of matmul-and-end steps as `chain` steps onto `out`; answers how many.
fn pack_run(
    run: Vec<MatmulEndStep>,
    grid: [usize; 2],
    chain: bool,
    out: &mut Vec<GraphStep>,
) -> Result<usize, DitRunError> {
    let needs: Vec<StepNeed> = run.iter().map(need_of).collect();
    let packed = pack_programs(grid, &needs, chain)
        .map_err(|e| DitRunError::Device(format!("graph: {e}")))?;
    let mut steps = run.into_iter();
    for p in &packed {
        let these: Vec<MatmulEndStep> = steps.by_ref().take(p.steps.len()).collect();
        let label = match these.as_slice() {
            [first, .., last] => format!("{} steps: {} … {}", these.len(), first.label, last.label),
            [one] => one.label.clone(),
            [] => String::new(),
        };
        out.push(GraphStep::Chain(ChainStep {
            steps: these,
            cores: p.steps.clone(),
            groups: p.groups.clone(),
            label,
        }));
    }
    Ok(packed.len())
}
