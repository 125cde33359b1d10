//! The worker's replay refusal (`ttnn_graph.py`, `op_replay`), run without a device: the real
//! worker source over a stand-in ttnn (`stand_in_ttnn.py`) on the system Python, spoken to
//! through the real protocol. A kept graph replays while every tensor its launches use is
//! still allocated, and is refused (`replayed: false`, nothing run) once one of them has been
//! released. And the programs' deadlines: a worker stopped inside a replayed program is killed
//! at the deadline derived from what that program took before.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::deadline::{DeadlineRule, Expected, ProgramDeadlines, secs};
use super::worker::{TIMEOUT_VAR, WORKER_SOURCE};
use super::{TtnnWorker, WorkerConfig};

const STAND_IN_TTNN: &str = include_str!("stand_in_ttnn.py");

/// The worker with `ttnn` bound to the stand-in before the worker's own `import ttnn`.
fn stand_in_worker() -> TtnnWorker {
    stand_in_worker_with(&WorkerConfig::new(super::tests::system_python()), "[]")
}

/// [`stand_in_worker`] started as `config` says, its launches taking what `launches` (a Python
/// list: seconds, or `"stop"`) says, in order.
fn stand_in_worker_with(config: &WorkerConfig, launches: &str) -> TtnnWorker {
    let preamble = format!(
        "import sys, types\n_m = types.ModuleType('ttnn')\nexec({:?}, _m.__dict__)\nsys.modules['ttnn'] = _m\n\
         _m.launches.extend({launches})\n",
        STAND_IN_TTNN
    );
    TtnnWorker::start_program(config, &format!("{preamble}{WORKER_SOURCE}"))
        .expect("start the worker over the stand-in ttnn")
}

/// The device name the worker accepts here (it checks it against TT_METAL_SIMULATOR).
fn device() -> &'static str {
    if std::env::var_os("TT_METAL_SIMULATOR").is_some() {
        "sim"
    } else {
        "p150a"
    }
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The kept graph's input: one f32 tile `x`.
fn inputs() -> Value {
    json!([{"name": "x", "rows": 32, "cols": 32, "dtype": "f32"}])
}

/// A graph of one relayout program from `x` into `y`, kept as `step` and read back from `y`.
fn kept_graph() -> Value {
    json!({
        "op": "graph", "keep": "step", "inputs": inputs(),
        "steps": [{"kind": "relayout", "label": "copy", "src": "x", "dst": "y", "rows": 1,
                   "src_w": 1, "dst_w": 1, "dtype": "f32", "progs": [[0]], "cores": 1, "span": 1,
                   "kernel": "// stand-in"}],
        "outputs": [["y", 32, 32]],
    })
}

fn replay() -> Value {
    json!({"op": "replay", "name": "step", "inputs": inputs()})
}

#[test]
fn a_kept_graph_replays_until_one_of_its_tensors_is_released() {
    let mut w = stand_in_worker();
    w.call(&json!({"op": "open", "device": device()}), &[])
        .unwrap();

    let first: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let (ans, out) = w.call(&kept_graph(), &f32_bytes(&first)).unwrap();
    assert_eq!(ans["programs"], 1, "{ans}");
    assert_eq!(f32s(&out), first);

    // Every tensor still allocated: the recorded program runs again over the new input.
    let second: Vec<f32> = (0..1024).map(|i| -(i as f32)).collect();
    let (ans, out) = w.call(&replay(), &f32_bytes(&second)).unwrap();
    assert_eq!(ans["replayed"], true, "{ans}");
    assert_eq!(ans["programs"], 1, "{ans}");
    assert_eq!(f32s(&out), second);

    // `y`, which the kept launch writes, is put again with another shape: the worker releases
    // the tensor the launch recorded. The replay is refused and runs nothing.
    let (ans, _) = w
        .call(
            &json!({"op": "put", "tensors": [{"name": "y", "rows": 64, "cols": 32, "dtype": "f32"}]}),
            &f32_bytes(&[0.5; 64 * 32]),
        )
        .unwrap();
    assert!(ans["ms"].is_number(), "{ans}");
    let (ans, out) = w.call(&replay(), &f32_bytes(&second)).unwrap();
    assert_eq!(ans["replayed"], false, "{ans}");
    assert!(ans.get("programs").is_none(), "nothing ran: {ans}");
    assert!(out.is_empty());
    // The refused graph is forgotten: asking again is refused too, and a graph sent whole runs.
    let (ans, _) = w.call(&replay(), &f32_bytes(&second)).unwrap();
    assert_eq!(ans["replayed"], false, "{ans}");
    let (ans, out) = w.call(&kept_graph(), &f32_bytes(&first)).unwrap();
    assert_eq!(ans["programs"], 1, "{ans}");
    assert_eq!(f32s(&out), first);
    w.call(&json!({"op": "close"}), &[]).unwrap();
}

/// A worker stopped inside a replayed program (the real worker's program announcement, the
/// stand-in's launch stopping itself) is killed within that program's derived deadline: the
/// floor plus the factor times what the program took in the replay before (the worker's
/// `by_label`), however long the exchange deadline: here 0.3 s + 3 × about 0.2 s against 20 s.
/// The error names the deadline applied and how it was derived, not the exchange deadline.
#[test]
fn a_worker_stopped_inside_a_program_is_killed_at_its_derived_deadline() {
    let exchange = Duration::from_secs(20);
    let config = WorkerConfig::new(super::tests::system_python()).with_call_timeout(exchange);
    let mut w = stand_in_worker_with(&config, "[0.2, 0.2, 'stop']");
    w.call(&json!({"op": "open", "device": device()}), &[])
        .unwrap();
    let rule = DeadlineRule {
        floor: Duration::from_millis(300),
        factor: 3.0,
        exchange,
    };
    let mut deadlines = ProgramDeadlines::new(rule);
    let x = f32_bytes(&[1.0; 1024]);
    // The graph's program is not known yet: the exchange deadline (per step) covers it.
    assert_eq!(deadlines.expected("copy"), Expected::Unknown);
    let (ans, _) = w
        .call_programs(&kept_graph(), &x, Arc::new(deadlines.clone()))
        .unwrap();
    deadlines.learn(&ans);
    // A replay, under the deadline its graph's run gave it, teaches the replayed time.
    let (ans, _) = w
        .call_programs(&replay(), &x, Arc::new(deadlines.clone()))
        .unwrap();
    assert_eq!(ans["replayed"], true, "{ans}");
    deadlines.learn(&ans);
    let Expected::Measured(took) = deadlines.expected("copy") else {
        panic!("no measurement: {ans}");
    };
    assert!(took >= Duration::from_millis(200), "{took:?}");
    let program = deadlines.for_program("replay", "copy", 1);
    assert!(
        program.limit <= rule.floor + took.mul_f64(rule.factor),
        "{program:?}"
    );
    // The third launch stops the worker inside its program.
    let t = Instant::now();
    let err = w
        .call_programs(&replay(), &x, Arc::new(deadlines.clone()))
        .unwrap_err();
    let waited = t.elapsed();
    assert!(
        waited >= program.limit && waited < program.limit + Duration::from_secs(1),
        "killed after {waited:?}, its deadline {program:?}"
    );
    let text = err.to_string();
    super::tests::assert_timed_out_at(&err, "replay", &program);
    assert!(
        text.contains(&format!(
            "`replay` within {} s (program `copy`: 3 × {} s measured + 0.3 s floor)",
            secs(program.limit),
            secs(took)
        )),
        "{text}"
    );
    assert!(!text.contains(TIMEOUT_VAR), "{text}");
    assert!(!w.liveness().is_alive());
}
