//! The worker's replay refusal (`ttnn_graph.py`, `op_replay`), run without a device: the real
//! worker source over a stand-in ttnn (`stand_in_ttnn.py`) on the system Python, spoken to
//! through the real protocol. A kept graph replays while every tensor its launches use is
//! still allocated, and is refused (`replayed: false`, nothing run) once one of them has been
//! released.

use serde_json::{Value, json};

use super::worker::WORKER_SOURCE;
use super::{TtnnWorker, WorkerConfig};

const STAND_IN_TTNN: &str = include_str!("stand_in_ttnn.py");

/// The worker with `ttnn` bound to the stand-in before the worker's own `import ttnn`.
fn stand_in_worker() -> TtnnWorker {
    let preamble = format!(
        "import sys, types\n_m = types.ModuleType('ttnn')\nexec({:?}, _m.__dict__)\nsys.modules['ttnn'] = _m\n",
        STAND_IN_TTNN
    );
    let python = super::tests::system_python();
    TtnnWorker::start_program(
        &WorkerConfig::new(python),
        &format!("{preamble}{WORKER_SOURCE}"),
    )
    .expect("start the worker over the stand-in ttnn")
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
    // The worker checks the name against TT_METAL_SIMULATOR, which the simulator's run sets.
    let device = if std::env::var_os("TT_METAL_SIMULATOR").is_some() {
        "sim"
    } else {
        "p150a"
    };
    w.call(&json!({"op": "open", "device": device}), &[])
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
