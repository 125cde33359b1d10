//! The worker's chain planner (`ttnn_graph.py`: `_chains`, `_chain_plan`), without a device:
//! the worker's source runs under the system `python3` with stand-in `ttnn` and `numpy`
//! modules and a stand-in device that only has a grid, and prints what it decided. The
//! simulator tests run the chains; these pin the decisions on every CI run: which steps share a
//! program, which cores each phase gets, and where a chain must end.

use serde_json::{Value, json};

use super::worker::WORKER_SOURCE;

/// Stand-ins for what the worker's source touches at load time and in the planner.
const PRELUDE: &str = r#"
import sys, types, json
ttnn = types.ModuleType("ttnn")
for name in ("bfloat8_b", "bfloat4_b", "bfloat16", "float32"):
    setattr(ttnn, name, name)
sys.modules["ttnn"] = ttnn
sys.modules["numpy"] = types.ModuleType("numpy")
"#;

/// Runs `_chains` on `steps` for a `gx` × `gy` grid: per chain, its phases as
/// `[kind, [[x, y], ...]]` (the worker's `_chain_plan`), or the error the planner raised.
fn plan(gx: usize, gy: usize, steps: &Value) -> Value {
    let worker = WORKER_SOURCE
        .trim_end()
        .strip_suffix("main()")
        .expect("the worker's source ends by calling main()");
    let driver = format!(
        r#"
class _Grid:
    x, y = {gx}, {gy}
class _Dev:
    def compute_with_storage_grid_size(self):
        return _Grid()
w = Worker()
w.dev = _Dev()
try:
    out = []
    for st in w._chains(json.loads({steps:?})):
        if st["kind"] != "chain":
            out.append({{"kind": st["kind"]}})
            continue
        items = [(s["matmul"], s["finish"], s.get("before")) for s in st["steps"]]
        phases = []
        assert st["plan"] == w._chain_plan(items), "the plan _chains kept is not the chain's"
        for (mm, end, before), (bc, mc, ec) in zip(items, st["plan"]):
            if before is not None:
                phases.append([before["kind"], bc])
            phases += [["matmul", mc], ["end", ec]]
        out.append({{"kind": "chain", "steps": len(items), "phases": phases}})
    res = {{"chains": out}}
except RuntimeError as e:
    res = {{"error": str(e)}}
_proto_out.write(json.dumps(res).encode())
"#,
        steps = steps.to_string()
    );
    let source = format!("{PRELUDE}\n{worker}\n{driver}");
    let out = std::process::Command::new("python3")
        .args(["-c", &source])
        .output()
        .expect("python3 (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A matmul-and-end step as graph.rs sends it (only what the planner reads): `jobs` matmul jobs
/// with units on `cores`, ends of `[mt, nt]` tiles each, and the step before, if any.
fn step(cores: &[(usize, usize)], jobs: usize, mt: usize, nt: usize, before: Value) -> Value {
    let units: Vec<Value> = cores.iter().map(|(x, y)| json!({"x": x, "y": y})).collect();
    json!({
        "kind": "matmul_end", "label": "test",
        "matmul": {"jobs": vec![json!({"units": units}); jobs]},
        "finish": {"jobs": vec![json!({"mt": mt, "nt": nt}); jobs], "unit_tiles": 16, "cores": 16},
        "before": before,
    })
}

fn rows(row_tiles: usize) -> Value {
    json!({"kind": "rows", "cores": 8, "row_tiles": row_tiles})
}

fn attention(heads: usize, hd: usize) -> Value {
    json!({"kind": "attention", "cores": 8, "heads": heads, "hd": hd})
}

/// Every non-matmul phase of a chain has cores of its own: none shared with another phase or
/// with a matmul of the chain. Answers how many cores they took.
fn own_cores(chain: &Value) -> usize {
    let phases = chain["phases"].as_array().unwrap();
    let core = |c: &Value| (c[0].as_u64().unwrap(), c[1].as_u64().unwrap());
    let matmul: std::collections::HashSet<_> = phases
        .iter()
        .filter(|p| p[0] == "matmul")
        .flat_map(|p| p[1].as_array().unwrap().iter().map(core))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for p in phases.iter().filter(|p| p[0] != "matmul") {
        let cores = p[1].as_array().unwrap();
        assert!(!cores.is_empty(), "a phase without cores: {chain}");
        for c in cores.iter().map(core) {
            assert!(!matmul.contains(&c), "{c:?} is a matmul core: {chain}");
            assert!(seen.insert(c), "{c:?} has two phases: {chain}");
        }
    }
    seen.len()
}

/// The tiny config's step (8 blocks, D = 40: one tile row, ends of 1–2 tiles, matmuls on a few
/// cores): all 33 steps are one program on the simulator's 13 × 10 grid.
#[test]
fn a_tiny_step_is_one_chain() {
    let mm = [(0, 0), (1, 0), (2, 0), (3, 0)];
    let mut steps = vec![step(&mm, 8, 1, 4, Value::Null)];
    for _ in 0..8 {
        steps.push(step(&mm, 1, 1, 2, rows(1)));
        steps.push(step(&mm, 1, 1, 2, attention(4, 10)));
        steps.push(step(&mm, 1, 1, 4, rows(1)));
        steps.push(step(&mm, 1, 1, 2, Value::Null));
    }
    let got = plan(13, 10, &Value::Array(steps));
    let chains = got["chains"].as_array().expect("chains");
    assert_eq!(chains.len(), 1, "{got}");
    assert_eq!(chains[0]["steps"], 33);
    // The AdaLN's end 8 cores (a unit for each block's job), then 32 ends and 24 LayerNorms and
    // attentions of one core each.
    assert_eq!(own_cores(&chains[0]), 8 + 32 + 24);
}

/// A full-size block's steps (96 matmul cores, ends up to 192 tiles wide, 32 heads of 48): the
/// other 34 cores of 13 × 10 cannot hold every phase, so the chain ends where they run out, and
/// no chain gives a core two phases.
#[test]
fn a_full_size_block_is_cut_where_the_free_cores_run_out() {
    let mm: Vec<_> = (0..12).flat_map(|x| (0..8).map(move |y| (x, y))).collect();
    let steps = json!([
        step(&mm, 1, 1, 96, Value::Null),
        step(&mm, 1, 2, 48, rows(2)),
        step(&mm, 1, 2, 48, attention(32, 48)),
        step(&mm, 1, 2, 192, rows(2)),
        step(&mm, 1, 2, 48, Value::Null),
    ]);
    let got = plan(13, 10, &steps);
    let chains = got["chains"].as_array().expect("chains");
    let counts: Vec<_> = chains
        .iter()
        .map(|c| c["steps"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [3, 2], "{got}");
    for c in chains {
        assert!(own_cores(c) <= 130 - 96, "{c}");
    }
    // The first chain's phases: the AdaLN's end 6, LayerNorm 2, Q's end 6, attention 8 (runs of
    // heads starting on a tile boundary: every other head of 48), the output projection's end 6.
    let sizes: Vec<_> = chains[0]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p[0] != "matmul")
        .map(|p| p[1].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [6, 2, 6, 8, 6], "{got}");
}

/// A matmul core's runtime args bound a chain too: 4 words and 5 a job for its reader, past
/// 341 at 68 jobs, so 70 one-job steps on one core are two programs.
#[test]
fn a_chain_ends_before_a_matmul_core_runs_out_of_runtime_args() {
    let steps = Value::Array(
        (0..70)
            .map(|_| step(&[(0, 0)], 1, 1, 1, Value::Null))
            .collect(),
    );
    let got = plan(13, 10, &steps);
    let counts: Vec<_> = got["chains"]
        .as_array()
        .expect("chains")
        .iter()
        .map(|c| c["steps"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [67, 3], "{got}");
}

/// A step that does not fit a program even alone is an error that names it, not a hang or a
/// chain with a phase on no cores.
#[test]
fn a_step_that_fits_no_program_is_refused() {
    let all: Vec<_> = (0..2).flat_map(|x| (0..2).map(move |y| (x, y))).collect();
    let got = plan(2, 2, &json!([step(&all, 1, 1, 2, rows(1))]));
    let err = got["error"].as_str().expect("an error");
    assert!(err.contains("does not fit one program"), "{err}");
}
