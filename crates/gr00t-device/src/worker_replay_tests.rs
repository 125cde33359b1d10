//! The worker's replay refusal (`ttnn_graph.py`, `op_replay`), run without a device: the real
//! worker source over a stand-in ttnn (`stand_in_ttnn.py`) on the system Python, spoken to
//! through the real protocol. A kept graph replays while every tensor its launches use is
//! still allocated, and is refused (`replayed: false`, nothing run) once one of them has been
//! released. And the programs' deadlines: a worker stopped inside a replayed program is killed
//! at the deadline derived from what that program took before.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tt_blackhole::device::FaultKind;

use super::deadline::{DeadlineRule, Expected, ProgramDeadlines, secs};
use super::graph_steps::{GraphStep, RelayoutStep};
use super::protocol::{ActDtype, Close, Graph, Open, Put, Replay, TensorSpec};
use super::worker::WorkerError;
use super::worker::{TIMEOUT_VAR, worker_source};
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
    TtnnWorker::start_program(config, &format!("{preamble}{}", worker_source()))
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
fn inputs() -> Vec<TensorSpec> {
    vec![tensor("x", 32)]
}

fn tensor(name: &str, rows: usize) -> TensorSpec {
    TensorSpec {
        name: name.into(),
        rows,
        cols: 32,
        dtype: ActDtype::F32,
        real: None,
        at: None,
    }
}

fn open() -> Open {
    Open {
        device: device().into(),
    }
}

/// A graph of one relayout program from `x` into `y`, kept as `step` and read back from `y`.
fn kept_graph() -> Graph {
    let step = copy(vec![vec![0]]);
    Graph {
        inputs: inputs(),
        programs: vec![super::lower::lower_step(&step, [13, 10]).expect("a relayout lowers")],
        outputs: vec![("y".into(), 32, 32)],
        free: Vec::new(),
        sources: [("copy".to_string(), "// stand-in".to_string())].into(),
        keep: Some("step".into()),
    }
}

/// A relayout of one f32 tile from `x` into `y` (`progs`: its segment progressions), its kernel
/// named `copy`.
pub(super) fn copy(progs: Vec<Vec<usize>>) -> GraphStep {
    GraphStep::Relayout(RelayoutStep {
        src: "x".into(),
        dst: "y".into(),
        rows: 1,
        src_w: 1,
        dst_w: 1,
        dtype: ActDtype::F32,
        progs,
        span: 1,
        cores: 1,
        kernel: "copy".into(),
        label: Some("copy".into()),
    })
}

fn replay() -> Replay {
    Replay {
        name: "step".into(),
        inputs: inputs(),
    }
}

#[test]
fn a_kept_graph_replays_until_one_of_its_tensors_is_released() {
    let mut w = stand_in_worker();
    w.call(&open(), &[]).unwrap();

    let first: Vec<f32> = (0..1024).map(|i| i as f32).collect();
    let (ans, out) = w.call(&kept_graph(), &f32_bytes(&first)).unwrap();
    assert_eq!(ans.answer.programs, 1, "{ans:?}");
    assert_eq!(f32s(&out), first);

    // Every tensor still allocated: the recorded program runs again over the new input.
    let second: Vec<f32> = (0..1024).map(|i| -(i as f32)).collect();
    let (ans, out) = w.call(&replay(), &f32_bytes(&second)).unwrap();
    assert!(ans.answer.replayed, "{ans:?}");
    assert_eq!(
        ans.answer.run.as_ref().map(|r| r.programs),
        Some(1),
        "{ans:?}"
    );
    assert_eq!(f32s(&out), second);

    // `y`, which the kept launch writes, is put again with another shape: the worker releases
    // the tensor the launch recorded. The replay is refused and runs nothing.
    let put = Put {
        tensors: vec![tensor("y", 64)],
    };
    let (ans, _) = w.call(&put, &f32_bytes(&[0.5; 64 * 32])).unwrap();
    assert!(ans.answer.ms >= 0.0, "{ans:?}");
    let (ans, out) = w.call(&replay(), &f32_bytes(&second)).unwrap();
    assert!(!ans.answer.replayed, "{ans:?}");
    assert!(ans.answer.run.is_none(), "nothing ran: {ans:?}");
    assert!(out.is_empty());
    // The refused graph is forgotten: asking again is refused too, and a graph sent whole runs.
    let (ans, _) = w.call(&replay(), &f32_bytes(&second)).unwrap();
    assert!(!ans.answer.replayed, "{ans:?}");
    let (ans, out) = w.call(&kept_graph(), &f32_bytes(&first)).unwrap();
    assert_eq!(ans.answer.programs, 1, "{ans:?}");
    assert_eq!(f32s(&out), first);
    w.call(&Close {}, &[]).unwrap();
}

/// The worker checks every request against the protocol's schema before it runs anything: a
/// key the schema lacks, a key missing, a value of another type and an unknown op are refused
/// (a `schema` failure naming the key, typed as [`FaultKind::Schema`]), and the worker goes on
/// serving.
#[test]
fn the_worker_refuses_a_request_the_schema_lacks() {
    let mut w = stand_in_worker();
    w.call(&open(), &[]).unwrap();
    let x = f32_bytes(&[1.0; 1024]);
    for (request, needle) in [
        (
            json!({"op": "put", "tensors": [{"name": "x", "rows": 32, "cols": 32, "dtype": "f32",
                                            "colour": "red"}]}),
            "unknown key 'colour'",
        ),
        (json!({"op": "replay", "name": "step"}), "no key 'inputs'"),
        (
            json!({"op": "put", "tensors": [{"name": "x", "rows": "32", "cols": 32, "dtype": "f32"}]}),
            "request `put`.tensors[0].rows: str '32', the schema wants int",
        ),
        (
            json!({"op": "put", "tensors": [{"name": "x", "rows": 32, "cols": 32, "dtype": "f16"}]}),
            "the schema wants one of ['f32', 'bf16']",
        ),
        (json!({"op": "launch"}), "op 'launch'"),
    ] {
        let err = w.call_value(&request, &x).unwrap_err();
        let text = err.to_string();
        assert_eq!(err.kind(), FaultKind::Schema, "{text}");
        assert!(text.contains(needle), "{request}: {text}");
        assert!(!err.is_fatal(), "{text}");
        let WorkerError::Op { request: sent, .. } = &err else {
            panic!("{text}");
        };
        assert!(
            sent.contains("\"op\""),
            "the failed request is kept: {sent}"
        );
    }
    // The refusals ran nothing: the worker still serves.
    let (ans, out) = w.call(&kept_graph(), &x).unwrap();
    assert_eq!(ans.answer.programs, 1, "{ans:?}");
    assert_eq!(f32s(&out), vec![1.0; 1024]);
    w.call(&Close {}, &[]).unwrap();
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
    w.call(&open(), &[]).unwrap();
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
    deadlines.learn(&ans.answer.by_label);
    // A replay, under the deadline its graph's run gave it, teaches the replayed time.
    let (ans, _) = w
        .call_programs(&replay(), &x, Arc::new(deadlines.clone()))
        .unwrap();
    let run = ans.answer.run.expect("the replay ran");
    deadlines.learn(&run.by_label);
    let Expected::Measured(took) = deadlines.expected("copy") else {
        panic!("no measurement: {run:?}");
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
