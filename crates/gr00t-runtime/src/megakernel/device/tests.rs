//! The device backend on the simulated p150a (`TT_METAL_SIMULATOR` set: `source
//! ~/.cache/blackhole-sim/env.sh`, the simulator's venv active or `GR00T_TTNN_PYTHON` set).
//! Without the simulator each test says it is skipped and passes, unless `GR00T_REQUIRE_SIM=1`
//! (what CI sets), which turns the skip into a failure.

use std::borrow::Cow;
use std::time::Instant;

use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::{
    SourceTensor, TensorData, arena_layout, build_arena_bytes, decode_weight,
};
use tt_blackhole::bf16::round_to_bf16;
use tt_blackhole::device::DeviceKind;
use tt_blackhole::dims::{DitDims, WeightKind};
use tt_blackhole::plan::{build_plan, roofline};

use super::{TtDevice, TtnnWorker, WorkerError};
use crate::megakernel::MegakernelPolicy;
use crate::megakernel::emulator::split_matmul;
use crate::megakernel::tests::{case_dir, golden_inputs, pcc};
use crate::model::{Gr00tModel, Taps};
use crate::policy::Policy;
use crate::weights::WeightStore;

/// Whether the simulator is there; a skip is announced (and is a failure under
/// `GR00T_REQUIRE_SIM=1`).
fn simulator(test: &str) -> bool {
    if std::env::var_os("TT_METAL_SIMULATOR").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("GR00T_REQUIRE_SIM").is_none(),
        "{test}: GR00T_REQUIRE_SIM is set but TT_METAL_SIMULATOR is not (source the simulator's env.sh)"
    );
    eprintln!("{test}: skipped: TT_METAL_SIMULATOR is not set (no simulated p150a here)");
    false
}

/// Where there is no ttnn, the device path refuses with the cause, not a hang or a panic.
#[test]
fn worker_without_ttnn_or_python_fails_clearly() {
    let err = TtnnWorker::spawn_with("/nonexistent/python3")
        .err()
        .unwrap();
    assert!(matches!(err, WorkerError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/python3"), "{err}");
    // The system Python has numpy or not, but no ttnn: the worker dies at import; the first
    // call reports the exit and the import error from its stderr.
    let python = "/usr/bin/python3";
    if !std::path::Path::new(python).exists() {
        eprintln!("skipped the no-ttnn half: no {python}");
        return;
    }
    let mut w = TtnnWorker::spawn_with(python).unwrap();
    let err = w
        .call(&serde_json::json!({"op": "open", "device": "sim"}), &[])
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(matches!(err, WorkerError::Exited { .. }), "{text}");
    assert!(text.contains("ModuleNotFoundError"), "{text}");
}

fn sim_policy(dtype: ArenaDtype) -> MegakernelPolicy {
    let model = Gr00tModel::load(&case_dir()).expect("tiny checkpoint");
    let ws = WeightStore::open_dir(&case_dir()).expect("tiny weights");
    MegakernelPolicy::new(model, &ws, dtype, None, "golden-tiny-case1", "sim")
        .unwrap_or_else(|e| panic!("open the simulated device: {e}"))
}

#[test]
fn sim_arena_upload_reads_back_identical() {
    if !simulator("sim_arena_upload_reads_back_identical") {
        return;
    }
    let p = sim_policy(ArenaDtype::Bfp8B);
    let dev = p.device().expect("a device policy");
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

/// A deterministic uniform value in [-1, 1).
fn rand(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

#[test]
fn sim_full_size_block_matmuls_match_emulator() {
    if !simulator("sim_full_size_block_matmuls_match_emulator") {
        return;
    }
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

#[test]
fn sim_tiny_forward_matches_emulator_and_f32() {
    if !simulator("sim_tiny_forward_matches_emulator_and_f32") {
        return;
    }
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
        sim.device().unwrap().times()
    );
    assert!(p_emu >= 0.9999, "PCC vs emulator {p_emu}");
    assert!(p_f32 >= 0.999, "PCC vs f32 {p_f32}");
}
