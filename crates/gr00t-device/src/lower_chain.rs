//! A chain's program: matmul-and-end steps as ONE program on the plan's cores, and the
//! semaphore line between its phases. Each core of a phase, once its writes are acknowledged,
//! increments semaphore 0 of every core of the next, whose reader waits until it holds the
//! increments of every phase before one of its own so far: a phase starts only when every
//! earlier one has ended, so a tensor a later phase rewrites (`t/h`, `t/q`, ...) has been read.

use std::collections::BTreeMap;

use tt_blackhole::plan::program::Core;

use super::graph_steps::{AttentionStep, BeforeStep, ChainStep, FinishStep, MatmulGroup, RowsStep};
use super::lower::{Draft, LowerError, attn_task, finish_task, rows_task};
use super::lower_parts::{AttnTask, FinishTask, MmJob, RowsTask, Sync};
use super::program::Program;
use super::protocol::ActDtype;

/// A phase of a chain's line: its kind, step, cores and the cores its units are cut for.
enum Phase<'a> {
    Before(&'a BeforeStep),
    Matmul(&'a MatmulGroup),
    End(&'a FinishStep, usize),
}

/// A chain's program (the module's line of phases), every group's cores checked against the
/// plan's.
pub(super) fn chain(mut d: Draft, c: &ChainStep) -> Result<Program, LowerError> {
    if c.steps.len() != c.cores.len() {
        return Err(LowerError::Steps(format!(
            "a chain of {} steps with cores for {}",
            c.steps.len(),
            c.cores.len()
        )));
    }
    let mut line: Vec<(Phase<'_>, &[Core])> = Vec::new();
    for (s, cores) in c.steps.iter().zip(&c.cores) {
        if let Some(b) = &s.before {
            line.push((Phase::Before(b), &cores.before));
        }
        line.push((Phase::Matmul(&s.matmul), &cores.matmul));
        line.push((Phase::End(&s.finish, cores.end_cut), &cores.end));
    }
    // Per group (in order of first appearance): its first step, its tasks, the cores planned.
    let mut groups: Vec<(String, GroupTasks<'_>, Vec<Vec<Core>>)> = Vec::new();
    let (mut counts, mut mm_jobs, mut mm_phases) =
        (BTreeMap::<Core, usize>::new(), Vec::new(), Vec::new());
    let mut mm_shared = None;
    for (i, (phase, cores)) in line.iter().enumerate() {
        let producers = if i > 0 { line[i - 1].1.len() } else { 0 };
        let signal = line.get(i + 1).map(|(_, c)| c.to_vec()).unwrap_or_default();
        if let Phase::Matmul(mm) = phase {
            mm_shared.get_or_insert(&mm.shared);
            mm_phases.push((producers, signal));
            for j in &mm.jobs {
                let (Some(act), Some(out)) = (&j.act, &j.out) else {
                    return Err(LowerError::Steps(
                        "a graph's matmul names its activation and partials".into(),
                    ));
                };
                let act = d.tensor(act);
                let out = d.alloc(out, j.k_split * j.mt * 32, j.nt * 32, ActDtype::F32);
                mm_jobs.push(MmJob {
                    job: j,
                    arena: d.tensor(&mm.shared.arena),
                    act,
                    out,
                    phase: mm_phases.len() - 1,
                });
            }
            continue;
        }
        let mut waits = BTreeMap::new();
        if producers > 0 {
            for &xy in cores.iter() {
                let n = counts.entry(xy).or_insert(0);
                *n += producers;
                waits.insert(xy, *n);
            }
        }
        let sync = |cut| Sync {
            cores: Some(cores.to_vec()),
            waits: waits.clone(),
            signal: signal.clone(),
            cut,
        };
        let (name, task) = match phase {
            Phase::Before(BeforeStep::Rows(r)) => (
                &r.group,
                GroupTasks::Rows(r, vec![rows_task(&mut d, r, sync(None))]),
            ),
            Phase::Before(BeforeStep::Attention(a)) => (
                &a.group,
                GroupTasks::Attention(a, vec![attn_task(&mut d, a, sync(None))]),
            ),
            Phase::End(f, cut) => (
                &f.group,
                GroupTasks::Finish(f, vec![finish_task(&mut d, f, sync(Some(*cut)))]),
            ),
            Phase::Matmul(_) => unreachable!("handled above"),
        };
        match groups.iter_mut().find(|(n, ..)| n == name) {
            Some((_, tasks, planned)) => {
                tasks.add(task)?;
                planned.push(cores.to_vec());
            }
            None => groups.push((name.clone(), task, vec![cores.to_vec()])),
        }
    }
    let mut owner = BTreeMap::<Core, &str>::new();
    for (name, _, planned) in &groups {
        for &xy in planned.iter().flatten() {
            let o = owner.entry(xy).or_insert(name);
            if o != name {
                return Err(LowerError::Steps(format!(
                    "core {xy:?} is planned for groups {o} and {name}"
                )));
            }
        }
    }
    let Some(shared) = mm_shared else {
        return Err(LowerError::Steps("a chain without a matmul".into()));
    };
    // The matmul kernels first, as the worker always launched them.
    d.matmul_parts(shared, &mm_jobs, &mm_phases)?;
    for (name, tasks, planned) in groups {
        let used = match tasks {
            GroupTasks::Rows(r, t) => d.rows_parts(r, t)?,
            GroupTasks::Attention(a, t) => d.attention_parts(a, t)?,
            GroupTasks::Finish(f, t) => d.finish_parts(f, t)?,
        };
        if used != planned {
            return Err(LowerError::Steps(format!(
                "group {name} took cores {used:?}, the plan gave {planned:?}"
            )));
        }
    }
    let mut waiting: Vec<Core> = line[1..]
        .iter()
        .flat_map(|(_, c)| c.iter().copied())
        .collect();
    waiting.sort_unstable();
    waiting.dedup();
    let phases = line
        .iter()
        .map(|(p, cores)| {
            let kind = match p {
                Phase::Before(BeforeStep::Rows(_)) => "rows",
                Phase::Before(BeforeStep::Attention(_)) => "attention",
                Phase::Matmul(_) => "matmul",
                Phase::End(..) => "end",
            };
            (kind.to_string(), cores.len() as u64)
        })
        .collect();
    Ok(d.finish(&c.label, c.steps.len(), phases, vec![waiting]))
}

/// A group's tasks, all of one kind (the kind its first step gives).
enum GroupTasks<'a> {
    Rows(&'a RowsStep, Vec<RowsTask>),
    Attention(&'a AttentionStep, Vec<AttnTask>),
    Finish(&'a FinishStep, Vec<FinishTask>),
}

impl GroupTasks<'_> {
    fn add(&mut self, more: GroupTasks<'_>) -> Result<(), LowerError> {
        match (self, more) {
            (GroupTasks::Rows(_, t), GroupTasks::Rows(_, m)) => t.extend(m),
            (GroupTasks::Attention(_, t), GroupTasks::Attention(_, m)) => t.extend(m),
            (GroupTasks::Finish(_, t), GroupTasks::Finish(_, m)) => t.extend(m),
            _ => {
                return Err(LowerError::Steps(
                    "a group's phases are of one kind (its kernels')".into(),
                ));
            }
        }
        Ok(())
    }
}
