//! The device backend on the simulated p150a (`TT_METAL_SIMULATOR` set: `source
//! ~/.cache/blackhole-sim/env.sh`, the simulator's venv active or `GR00T_TTNN_PYTHON` set).
//!
//! The `sim_*` tests are `#[ignore]`d: a plain `cargo test` reports them as ignored, never as
//! passed, and `scripts/device-sim-tests.sh` (CI's third step) runs them with the simulator,
//! where a missing simulator is a failure. The worker's deadline and exit reports are tested
//! without the simulator, on stand-in programs that speak the worker's protocol.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::{
    SourceTensor, TensorData, arena_layout, build_arena_bytes, decode_weight,
};
use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::device::{DeviceKind, DitDevice, DitStepInputs};
use tt_blackhole::dims::{DitDims, WeightKind};
use tt_blackhole::plan::{build_plan, roofline};

use super::deadline::{DeadlineRule, ProgramDeadlines};
use super::{TtDevice, TtnnWorker, WorkerConfig, WorkerError};
use crate::golden_case::{case_dir, golden_inputs, pcc};
use gr00t_megakernel::emulator::split_matmul;
use gr00t_megakernel::{MegakernelPolicy, dit_dims};
use gr00t_runtime::model::{Gr00tModel, Taps};
use gr00t_runtime::policy::Policy;
use gr00t_runtime::weights::WeightStore;

/// The simulator must be there: these tests run only when asked for (`--ignored`).
pub(super) fn require_simulator(test: &str) {
    assert!(
        std::env::var_os("TT_METAL_SIMULATOR").is_some(),
        "{test}: TT_METAL_SIMULATOR is not set (source the simulator's env.sh, or run \
         scripts/device-sim-tests.sh)"
    );
}

/// `python3` on `PATH` (scripts/setup.sh installs it): the stand-in workers run on it.
pub(super) fn system_python() -> String {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
    });
    found
        .expect("python3 is not on PATH (scripts/setup.sh installs it)")
        .display()
        .to_string()
}

/// `err` is the watchdog's kill of `op` at `program`'s derived deadline, reported as derived.
pub(super) fn assert_timed_out_at(
    err: &WorkerError,
    op: &str,
    program: &super::deadline::Deadline,
) {
    match err {
        WorkerError::Timeout {
            op: timed_out,
            after,
            deadline,
            ..
        } => {
            assert_eq!(timed_out, op);
            assert_eq!(*after, program.limit);
            assert_eq!(*deadline, program.why);
        }
        other => panic!("not a timeout: {other}"),
    }
}

/// Where there is no ttnn, the device path refuses with the cause, not a hang or a panic.
#[test]
fn worker_without_ttnn_or_python_fails_clearly() {
    let err = TtnnWorker::spawn_with("/nonexistent/python3")
        .err()
        .unwrap();
    assert!(matches!(err, WorkerError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/python3"), "{err}");
    // A Python without ttnn (PATH's, outside the simulator's venv): the worker dies at import;
    // the first call reports the exit and the import error from its stderr.
    let no_ttnn = "import sys\nsys.path = []\nimport ttnn\n";
    let mut w = TtnnWorker::start_program(&WorkerConfig::new(system_python()), no_ttnn).unwrap();
    let err = w
        .call_value(&serde_json::json!({"op": "open", "device": "sim"}), &[])
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(matches!(err, WorkerError::Exited { .. }), "{text}");
    assert!(err.is_fatal());
    assert!(text.contains("ModuleNotFoundError"), "{text}");
    assert!(!w.liveness().is_alive());
}

/// The counters' program classification (`backend::runs_program`) agrees with the worker
/// itself: an op counts as a device program exactly when its body launches one
/// (`ttnn.generic_op`, directly or through a `_…_program` / `_…_on_device` builder; a `graph`
/// reports how many it launched), so a new worker op cannot go uncounted or be counted wrongly.
#[test]
fn every_worker_op_is_classified_as_the_worker_runs_it() {
    let src = super::worker::WORKER_SOURCE;
    let mut ops = Vec::new();
    for (i, chunk) in src.split("\n    def ").enumerate().skip(1) {
        let Some(name) = chunk.strip_prefix("op_").and_then(|c| c.split('(').next()) else {
            continue;
        };
        let body = chunk.split_once('\n').map_or("", |(_, b)| b);
        let launches = body.contains("generic_op(")
            || body.contains("_program(")
            || body.contains("_on_device(")
            || body.contains("self._run(")
            || body.contains("self._launch(");
        assert_eq!(
            super::backend::runs_program(name),
            launches,
            "worker op `{name}` (def #{i}) launches a program: {launches}"
        );
        ops.push(name.to_string());
    }
    for op in [
        "open", "upload", "readback", "put", "graph", "replay", "close",
    ] {
        assert!(ops.iter().any(|o| o == op), "no op_{op} in {ops:?}");
    }
}

/// The worker's program announcement as the watchdog reads it: steps and label (a chain's
/// label may itself say `steps`), the older line without a label, nothing else.
#[test]
fn program_start_lines_are_read() {
    use super::worker::program_start;
    assert_eq!(
        program_start(
            "gr00t-worker: program of 33 steps: 33 steps: rows + matmul Q … matmul FfDown"
        ),
        Some((33, "33 steps: rows + matmul Q … matmul FfDown"))
    );
    assert_eq!(
        program_start("gr00t-worker: program of 1 steps: attention"),
        Some((1, "attention"))
    );
    assert_eq!(
        program_start("gr00t-worker: program of 4 steps"),
        Some((4, ""))
    );
    assert_eq!(
        program_start("gr00t-worker: program of many steps: x"),
        None
    );
    assert_eq!(program_start("gr00t-worker: program done"), None);
}

/// A stand-in worker speaking the real framing: it answers every request with `{"ok": true}`
/// and its header echoed, except `hang`, which it never answers. A request with `programs`
/// ([label, seconds] each) announces and runs those as the worker does its programs, then,
/// with `hang_in` (a label), starts one more program and never ends it.
const ECHO_WORKER: &str = r#"
import json, struct, sys, time
inp, out = sys.stdin.buffer, sys.stdout.buffer
def exact(n):
    b = b""
    while len(b) < n:
        c = inp.read(n - len(b))
        if not c:
            sys.exit(0)
        b += c
    return b
while True:
    h = json.loads(exact(struct.unpack("<I", exact(4))[0]))
    exact(struct.unpack("<Q", exact(8))[0])
    print("request", h["op"], file=sys.stderr, flush=True)
    if h["op"] == "hang":
        time.sleep(3600)
    if h["op"] == "progress":
        for _ in range(6):
            time.sleep(0.25)
            print("gr00t-worker: program done", file=sys.stderr, flush=True)
    if h["op"] == "chain":
        print("gr00t-worker: program of 4 steps", file=sys.stderr, flush=True)
        time.sleep(1.2)
    for label, secs in h.get("programs", []):
        print(f"gr00t-worker: program of 1 steps: {label}", file=sys.stderr, flush=True)
        time.sleep(secs)
        print("gr00t-worker: program done", file=sys.stderr, flush=True)
    if h.get("hang_in"):
        print(f"gr00t-worker: program of 64 steps: {h['hang_in']}", file=sys.stderr, flush=True)
        time.sleep(3600)
    a = json.dumps({"ok": True, "echo": h}).encode()
    out.write(struct.pack("<I", len(a)) + a + struct.pack("<Q", 0))
    out.flush()
"#;

fn echo_worker(call_timeout: Duration) -> TtnnWorker {
    let config = WorkerConfig::new(system_python()).with_call_timeout(call_timeout);
    TtnnWorker::start_program(&config, ECHO_WORKER).expect("start the stand-in worker")
}

/// A worker that does not answer (a hung program) is killed at the deadline: the call fails
/// with the op, the deadline's setting and the worker's last lines, and the worker is gone.
#[test]
fn a_worker_that_never_answers_is_killed_at_the_deadline() {
    let mut w = echo_worker(Duration::from_millis(500));
    // `open` runs under the boot deadline: Python's start on a loaded machine is not the hang.
    let (ans, _) = w
        .call_value(&serde_json::json!({"op": "open"}), &[])
        .unwrap();
    assert_eq!(ans["echo"]["op"], "open");
    let pid = w.liveness().pid();
    let err = w
        .call_value(&serde_json::json!({"op": "hang"}), &[])
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, WorkerError::Timeout { .. }), "{text}");
    assert!(err.is_fatal());
    assert!(
        text.contains("`hang` within 0.5 s (GR00T_MK_DEVICE_TIMEOUT_S)"),
        "{text}"
    );
    assert!(text.contains("request hang"), "the worker's stderr: {text}");
    assert!(!w.liveness().is_alive(), "pid {pid} still counted alive");
    let loss = w.liveness().loss().expect("a loss");
    assert!(matches!(loss, WorkerError::Timeout { .. }), "{loss}");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} was not reaped"
    );
    // The next call fails at once: the pipe is closed.
    let err = w
        .call_value(&serde_json::json!({"op": "ping"}), &[])
        .unwrap_err();
    assert!(matches!(err, WorkerError::Exited { .. }), "{err}");
}

/// A long exchange that reports progress (a graph, after each of its programs) lives past the
/// deadline as long as each stretch without progress is shorter than it; the progress lines are
/// not kept as the worker's output.
#[test]
fn progress_restarts_the_deadline() {
    let mut w = echo_worker(Duration::from_millis(600));
    w.call_value(&serde_json::json!({"op": "open"}), &[])
        .unwrap();
    let t = Instant::now();
    let (ans, _) = w
        .call_value(&serde_json::json!({"op": "progress"}), &[])
        .unwrap();
    assert_eq!(ans["echo"]["op"], "progress");
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    assert!(w.liveness().is_alive());
    assert!(!w.stderr_tail().contains(super::worker::PROGRESS_LINE));
}

/// A program that chains several steps of a graph is announced with how many: while its time
/// is not known (nothing measured, no roofline) its deadline is the exchange deadline that many
/// times (each step was a program with the deadline), so a chain that takes longer than one
/// deadline but less than its share is not killed.
#[test]
fn a_chain_gets_a_deadline_per_step() {
    let mut w = echo_worker(Duration::from_millis(500));
    w.call_value(&serde_json::json!({"op": "open"}), &[])
        .unwrap();
    let t = Instant::now();
    let (ans, _) = w
        .call_value(&serde_json::json!({"op": "chain"}), &[])
        .unwrap();
    assert_eq!(ans["echo"]["op"], "chain");
    assert!(
        t.elapsed() >= Duration::from_millis(1200),
        "{:?}",
        t.elapsed()
    );
    assert!(w.liveness().is_alive());
    assert!(!w.stderr_tail().contains(super::worker::CHAIN_LINE));
}

/// A worker that reports progress and then hangs inside a program is killed one deadline after
/// its LAST progress line: each line sets the deadline from the moment it is read (a started
/// program its own, a finished one the exchange's), never from the deadline before it. Five
/// programs of 0.25 s (each within its 0.6 s, the whole past the 1.5 s exchange deadline), then
/// a sixth that never ends: killed 0.6 s after it started, at about 1.85 s, and the error names
/// that program's deadline. (A deadline pushed further out with each line, or one that only
/// grows, ends past 2.75 s.)
#[test]
fn a_hang_after_progress_is_killed_one_deadline_after_the_last_line() {
    let exchange = Duration::from_millis(1500);
    let mut w = echo_worker(exchange);
    w.call_value(&serde_json::json!({"op": "open"}), &[])
        .unwrap();
    let mut deadlines = ProgramDeadlines::new(DeadlineRule {
        floor: Duration::from_millis(300),
        factor: 3.0,
        exchange,
    });
    deadlines.learn(&[("p".to_string(), (1, 100.0, 100.0))].into());
    let program = deadlines.for_program("replay", "p", 64);
    assert_eq!(program.limit, Duration::from_millis(600));
    let request = serde_json::json!({
        "op": "replay", "programs": vec![("p", 0.25); 5], "hang_in": "p",
    });
    let t = Instant::now();
    let err = w
        .call_value_programs(&request, &[], Arc::new(deadlines))
        .unwrap_err();
    let waited = t.elapsed();
    let last_line = Duration::from_millis(5 * 250);
    assert!(
        waited >= last_line + program.limit,
        "killed after {waited:?}, before its last line and a deadline"
    );
    assert!(
        waited < last_line + program.limit + Duration::from_millis(600),
        "killed after {waited:?}: more than one deadline after the last line"
    );
    let text = err.to_string();
    assert_timed_out_at(&err, "replay", &program);
    assert!(
        text.contains("`replay` within 0.6 s (program `p`: 3 × 0.1 s measured + 0.3 s floor)"),
        "{text}"
    );
    assert!(!w.liveness().is_alive());
}

/// A stopped worker (SIGSTOP) is a hang too: killed at the deadline, even mid-upload of a
/// payload larger than the pipe's buffer.
#[test]
fn a_stopped_worker_is_killed_at_the_deadline() {
    let mut w = echo_worker(Duration::from_millis(500));
    // Under the boot deadline (see above): the worker is up before it is stopped.
    w.call_value(&serde_json::json!({"op": "open"}), &[])
        .unwrap();
    let pid = w.liveness().pid();
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let big = vec![7u8; 4 << 20];
    let err = w
        .call_value(&serde_json::json!({"op": "readback"}), &big)
        .unwrap_err();
    assert!(matches!(err, WorkerError::Timeout { .. }), "{err}");
    assert!(!w.liveness().is_alive());
}

/// A worker that dies between requests is seen dead at once (what `/health` reads), without
/// a call.
#[test]
fn a_worker_killed_while_idle_is_seen_dead() {
    let w = echo_worker(Duration::from_secs(30));
    let live = w.liveness();
    assert!(live.is_alive());
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &live.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The watchdog polls every 100 ms; this waits for its next look, bounded.
    let deadline = Instant::now() + Duration::from_secs(10);
    while live.is_alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!live.is_alive(), "a SIGKILLed worker still counted alive");
    assert!(
        live.exit_status().unwrap().contains("9"),
        "{:?}",
        live.exit_status()
    );
    let loss = live.loss().expect("a loss").to_string();
    assert!(
        loss.contains("exited (between requests; signal: 9"),
        "{loss}"
    );
}

/// The policy's open device as this crate's own type.
pub(super) fn tt(policy: &MegakernelPolicy) -> &TtDevice {
    policy
        .device()
        .expect("a device policy")
        .as_any()
        .downcast_ref()
        .expect("the device is gr00t-device's")
}

pub(super) fn sim_policy(dtype: ArenaDtype) -> MegakernelPolicy {
    sim_policy_with(&gr00t_megakernel::MegakernelConfig {
        dtype,
        device: "sim".into(),
        ..gr00t_megakernel::MegakernelConfig::default()
    })
}

/// [`sim_policy`] as `config` says (its device the simulator): a full-width test's longer
/// deadline, the backbone on the device.
pub(super) fn sim_policy_with(config: &gr00t_megakernel::MegakernelConfig) -> MegakernelPolicy {
    let model = Gr00tModel::load(&case_dir()).expect("tiny checkpoint");
    let ws = WeightStore::open_dir(&case_dir()).expect("tiny weights");
    MegakernelPolicy::with_config(
        model,
        &ws,
        "golden-tiny-case1",
        config,
        Some(&crate::TtnnOpener),
    )
    .unwrap_or_else(|e| panic!("open the simulated device: {e}"))
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_arena_upload_reads_back_identical() {
    require_simulator("sim_arena_upload_reads_back_identical");
    let p = sim_policy(ArenaDtype::Bfp8B);
    let dev = tt(&p);
    assert_eq!(dev.info.dram_banks, 8, "{:?}", dev.info);
    let t = Instant::now();
    let back = dev.read_back_arena().unwrap();
    eprintln!(
        "arena: {} B uploaded as {} pages of {} B, read back in {:.2} s",
        p.arena_bytes().len(),
        p.arena_index().total_tiles,
        p.arena_index().tile_bytes,
        t.elapsed().as_secs_f64()
    );
    assert_eq!(back.len(), p.arena_bytes().len());
    assert!(
        back == p.arena_bytes(),
        "device DRAM differs from the arena"
    );
}

/// A deterministic uniform value in [-1, 1) (every device test's inputs).
pub(super) fn rand(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_full_size_block_matmuls_match_emulator() {
    require_simulator("sim_full_size_block_matmuls_match_emulator");
    // One full-size block (block 0: a cross block, K/V over the 116-token GR1 context).
    let dims = DitDims {
        num_layers: 1,
        ..DitDims::FULL
    };
    let dtype = ArenaDtype::Bfp8B;
    let layout = arena_layout(&dims, dtype);
    let source = |name: &str| -> Result<SourceTensor<'static>, tt_blackhole::arena::SourceError> {
        let e = layout.by_name(name).ok_or("no such weight")?;
        let [out, inp] = e.torch_shape;
        let mut seed = e.first_tile + 1;
        let scale = (inp as f32).powf(-0.5);
        let bytes = (0..out * inp)
            .flat_map(|_| (rand(&mut seed) * scale).to_le_bytes())
            .collect();
        Ok(SourceTensor {
            shape: vec![out, inp],
            data: TensorData::F32Le(Cow::Owned(bytes)),
        })
    };
    let (index, arena) = build_arena_bytes(&layout, &source).unwrap();
    let t = Instant::now();
    let dev = TtDevice::open(DeviceKind::Simulator, &index, &arena).unwrap();
    eprintln!(
        "open + upload of {} B: {:.1} s",
        arena.len(),
        t.elapsed().as_secs_f64()
    );
    let plan = build_plan(&dims, dtype).unwrap();
    let mut seed = 7u64;
    let mut report = Vec::new();
    for kind in WeightKind::STREAM_ORDER {
        let e = index.entry(0, kind).unwrap();
        let [k, n] = e.kn_shape;
        let class = plan.class(0, kind);
        let m = class.m_tokens;
        let x: Vec<f32> = (0..m * k).map(|_| round_to_bf16(rand(&mut seed))).collect();
        let bytes = &arena[e.offset as usize..(e.offset + e.bytes) as usize];
        let w = decode_weight(e, index.compute_cores, bytes).unwrap();
        let want = split_matmul(&x, m, &w, k, n, &class.split);
        let t = Instant::now();
        let got = dev.matmul_raw(&plan, 0, kind, &x, m).unwrap();
        let wall = t.elapsed().as_secs_f64();
        let p = pcc(&got, &want);
        let max_err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        report.push((kind, m, k, n, class.split.units.len(), p, max_err, wall));
        assert!(p >= 0.9999, "{kind:?}: PCC {p} vs the emulator");
    }
    let times = dev.times();
    eprintln!(
        "full-size block 0 on the simulator (M x K x N, cores, PCC vs emulator, max |err|, wall s, program s):"
    );
    for (kind, m, k, n, cores, p, e, wall) in &report {
        let prog = times
            .by_kind
            .iter()
            .find(|(kk, _, _)| kk == kind)
            .map_or(0.0, |t| t.2.as_secs_f64());
        eprintln!(
            "  {kind:?}: {m}x{k}x{n} on {cores} cores, PCC {p:.8}, max err {e:.2e}, {wall:.2} s, program {prog:.2} s"
        );
    }
    // The roofline's prediction for the same bytes on silicon (DRAM-bound at 512 GB/s).
    let r = roofline::roofline(&plan);
    eprintln!("roofline for this block (bfp8_b): {r:?}");
}

/// The tiny forward with the host conducting the flow, a device program per step, vs the
/// emulator and the f32 model. By hand (`scripts/device-sim-tests.sh --long`): CI runs this path
/// inside `head_graph_tests::sim_tiny_forward_with_the_head_on_the_device` (its reference) and
/// counts its programs through `gr00t-server predict` (`device_sim::…_counts_the_step_graph`).
#[test]
#[ignore = "covered in CI by two other tests, 90 s: scripts/device-sim-tests.sh --long"]
fn sim_long_tiny_forward_step_by_step_matches_emulator_and_f32() {
    require_simulator("sim_long_tiny_forward_step_by_step_matches_emulator_and_f32");
    let inputs = golden_inputs();
    let model = Gr00tModel::load(&case_dir()).unwrap();
    let reference = model.forward(&inputs, &mut Taps::none()).unwrap();
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    let emu = MegakernelPolicy::new(
        model,
        &ws,
        ArenaDtype::Bfp8B,
        None,
        "golden-tiny-case1",
        "emulator",
    )
    .unwrap();
    let (want, _) = emu.predict(&inputs).unwrap();
    let sim = sim_policy(ArenaDtype::Bfp8B);
    assert_eq!(sim.backend_name(), "megakernel-sim");
    let t = Instant::now();
    let (got, _) = sim.predict(&inputs).unwrap();
    let wall = t.elapsed().as_secs_f64();
    let (p_emu, p_f32) = (pcc(&got.data, &want.data), pcc(&got.data, &reference.data));
    eprintln!(
        "tiny forward on the simulator: {wall:.1} s; PCC vs emulator {p_emu:.6}, vs f32 {p_f32:.6}; program time by kind: {:?}",
        tt(&sim).times()
    );
    assert!(p_emu >= 0.9999, "PCC vs emulator {p_emu}");
    assert!(p_f32 >= 0.999, "PCC vs f32 {p_f32}");
    // Every step is one program: the chain of its 33 matmul-and-end steps fits the grid and
    // the matmul cores' runtime args (docs/blackhole.md §12).
    let stats = tt(&sim).stats().expect("a finished forward");
    assert!(stats.steps > 0);
    assert_eq!(stats.programs_per_step, 1, "{stats:?}");
    assert!(stats.per_step.iter().all(|t| t.programs == 1), "{stats:?}");
    // The plan, from the dimensions alone, packs the same one program.
    let dims = gr00t_megakernel::dit_dims(&sim.model().cfg.gr00t, 1);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    let grid = tt(&sim).info.grid;
    assert_eq!(plan.step_programs(grid).unwrap().len(), 1);
}

/// A step whose text or image mask is empty (no rows for a cross block's K and V): the device
/// path gives the emulator's result (the empty product, attention over no keys), no error.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_empty_masks_match_emulator() {
    require_simulator("sim_empty_masks_match_emulator");
    let sim = sim_policy(ArenaDtype::Bfp8B);
    let model = Gr00tModel::load(&case_dir()).unwrap();
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    let emu = MegakernelPolicy::new(model, &ws, ArenaDtype::Bfp8B, None, "x", "emulator").unwrap();
    let ctx = 20;
    let dims = dit_dims(&sim.model().cfg.gr00t, ctx);
    let d = dims.width();
    let mut seed = 11u64;
    let mut draw = |n: usize| (0..n).map(|_| rand(&mut seed)).collect::<Vec<f32>>();
    let (tokens, temb, context) = (
        draw(dims.sa_tokens * d),
        draw(d),
        draw(ctx * dims.cross_dim),
    );
    let (all, none) = (vec![true; ctx], vec![false; ctx]);
    for (case, text_mask, image_mask) in [("no text", &none, &all), ("no image", &all, &none)] {
        let inputs = DitStepInputs {
            tokens: &tokens,
            temb: &temb,
            context: &context,
            text_mask,
            image_mask,
        };
        let run = |p: &MegakernelPolicy| {
            let mut dev = p.executor().unwrap().device;
            dev.prepare(ctx).unwrap();
            dev.run_blocks(&inputs)
                .unwrap_or_else(|e| panic!("{case} on {}: {e}", p.backend_name()))
        };
        let (want, got) = (run(&emu), run(&sim));
        assert_eq!(got.len(), want.len(), "{case}");
        assert!(got.iter().all(|v| v.is_finite()), "{case}");
        let p = pcc(&got, &want);
        eprintln!("{case}: one step's blocks on the simulator vs the emulator: PCC {p:.8}");
        assert!(p >= 0.9999, "{case}: PCC {p} vs the emulator");
    }
}

/// With this crate's opener, a card is refused on a machine without one, for one of the
/// reasons such a machine has: no ttnn in the worker's Python, the simulator's variable set, or
/// no device found (without an opener, gr00t-megakernel refuses it as not built in).
#[test]
fn a_card_is_refused_where_there_is_none() {
    let model = Gr00tModel::load(&case_dir()).unwrap();
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    let config = gr00t_megakernel::MegakernelConfig {
        device: "p150a".into(),
        ..gr00t_megakernel::MegakernelConfig::default()
    };
    let err = MegakernelPolicy::with_config(model, &ws, "x", &config, Some(&crate::TtnnOpener))
        .err()
        .expect("p150a must fail");
    let gr00t_runtime::model::ModelError::DeviceOpen { device, cause } = &err else {
        panic!("not a device-open error: {err}")
    };
    assert_eq!(device, "p150a");
    let why = cause.to_string();
    assert!(
        [
            "ModuleNotFoundError",
            "TT_METAL_SIMULATOR is set",
            "no Tenstorrent device found"
        ]
        .iter()
        .any(|r| why.contains(r)),
        "{why}"
    );
}
