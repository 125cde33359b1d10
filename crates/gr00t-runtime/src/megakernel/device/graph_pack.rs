//! A step graph's matmul-and-end steps packed into the programs the worker runs: the plan's
//! packer ([`tt_blackhole::plan::program::pack_programs`]) decides which steps share a program
//! and gives every phase its cores; here its input is read off the steps the worker gets (so
//! what is packed is what runs) and its answer put back into them as `chain` steps.

use serde_json::{Value, json};
use tt_blackhole::device::DitRunError;
use tt_blackhole::plan::program::{Before, StepNeed, pack_programs};

/// A matmul-and-end step's cores as the packer sees them, from the step the worker gets;
/// `None` for a step that is a program of its own (a relayout, or a LayerNorm or attention no
/// matmul follows).
fn need_of(step: &Value) -> Option<StepNeed> {
    if step["kind"] != "matmul_end" {
        return None;
    }
    let n = |v: &Value| v.as_u64().unwrap_or(0) as usize;
    let list = |v: &Value| v.as_array().map_or(&[][..], Vec::as_slice).to_vec();
    let b = &step["before"];
    let group = |s: &Value| s["group"].as_str().unwrap_or_default().to_string();
    let before = match b["kind"].as_str() {
        Some("rows") => Some(Before::Rows {
            row_tiles: n(&b["row_tiles"]),
        }),
        Some("attention") => Some(Before::Attention {
            heads: n(&b["heads"]),
            head_dim: n(&b["hd"]),
        }),
        _ => None,
    }
    .map(|x| (x, group(b)));
    Some(StepNeed {
        before,
        matmul_jobs: list(&step["matmul"]["jobs"])
            .iter()
            .map(|j| {
                list(&j["units"])
                    .iter()
                    .map(|u| (n(&u["x"]), n(&u["y"])))
                    .collect()
            })
            .collect(),
        end_jobs: list(&step["finish"]["jobs"])
            .iter()
            .map(|j| (n(&j["mt"]), n(&j["nt"])))
            .collect(),
        end_kernels: group(&step["finish"]),
    })
}

/// The graph's steps with every run of matmul-and-end steps packed into `chain` steps (one
/// program each, the cores of every phase given), and how many programs the worker launches.
pub(crate) fn pack(
    steps: Vec<Value>,
    grid: [usize; 2],
    chain: bool,
) -> Result<(Vec<Value>, usize), DitRunError> {
    let (mut out, mut programs, mut run) = (Vec::new(), 0, Vec::new());
    for st in steps {
        match need_of(&st) {
            Some(need) => run.push((st, need)),
            None => {
                programs += pack_run(std::mem::take(&mut run), grid, chain, &mut out)?;
                out.push(st);
                programs += 1;
            }
        }
    }
    programs += pack_run(run, grid, chain, &mut out)?;
    Ok((out, programs))
}

/// One run of matmul-and-end steps as `chain` steps onto `out`; answers how many.
fn pack_run(
    run: Vec<(Value, StepNeed)>,
    grid: [usize; 2],
    chain: bool,
    out: &mut Vec<Value>,
) -> Result<usize, DitRunError> {
    let needs: Vec<StepNeed> = run.iter().map(|(_, n)| n.clone()).collect();
    let packed = pack_programs(grid, &needs, chain)
        .map_err(|e| DitRunError::Device(format!("graph: {e}")))?;
    let mut steps = run.into_iter().map(|(s, _)| s);
    let label = |s: &Value| s["label"].as_str().unwrap_or("matmul_end").to_string();
    for p in &packed {
        let these: Vec<Value> = steps.by_ref().take(p.steps.len()).collect();
        let label = match these.as_slice() {
            [first, _, ..] => format!(
                "{} steps: {} … {}",
                these.len(),
                label(first),
                these.last().map(label).unwrap_or_default()
            ),
            [one] => label(one),
            [] => String::new(),
        };
        out.push(json!({
            "kind": "chain", "steps": these, "cores": p.steps, "groups": p.groups, "label": label,
        }));
    }
    Ok(packed.len())
}
