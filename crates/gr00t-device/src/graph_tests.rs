//! The on-device step graph (`super::graph`) on the simulated p150a against the emulator: full
//! size blocks (D = 1536, 32 heads of 48, FF 6144, 51 tokens, the GR1 prompt's 116 context
//! tokens), random weights, one denoising step's blocks with the activations kept on the device.
//! `#[ignore]`d like every `sim_*` test; `scripts/device-sim-tests.sh` runs it.

use std::time::Instant;

use tt_blackhole::ArenaDtype;
use tt_blackhole::arena::{arena_layout, build_arena_bytes};
use tt_blackhole::device::{DeviceKind, DitDevice, DitStepInputs};
use tt_blackhole::dims::DitDims;

use super::{DeviceSteps, TtDevice};
use crate::golden_case::pcc;
use gr00t_megakernel::emulator::ArenaBytes;
use gr00t_megakernel::{CheckpointTensors, Emulator, dit_dims};
use gr00t_runtime::config::Gr00tConfig;
use gr00t_runtime::model::dit::{BlockKind, DitWeights};
use gr00t_runtime::weights::{DType, RandomWeights};

use super::tests::rand;

/// Block 0 (cross-attention to the text keys) at full size, one step through the device graph
/// vs the emulator's `run_step`: PCC ≥ 0.9999 and the largest
/// absolute difference of the fp32 stream bounded (the stream is O(1); the emulator computes
/// LayerNorm and the softmax in full fp32, the device's FPU passes operands through 19 bits).
/// On the simulator's own 13 × 10 grid (a card's is 11 × 10: the next test, which CI runs),
/// by hand: `scripts/device-sim-tests.sh --long`.
#[test]
#[ignore = "the simulator's own grid, a minute: scripts/device-sim-tests.sh --long"]
fn sim_long_full_size_block_on_the_simulator_grid_matches_emulator() {
    // The step: ONE program for a cross block, down from 2 (when every phase had cores of its
    // own) and 5 before that (the AdaLN, then LayerNorm with Q, attention with the output
    // projection, LayerNorm with FF-up, FF-down, each matmul's end and the LayerNorm or attention
    // that makes its input in its program behind semaphores). The matmuls run on the plan's 96
    // cores; every other phase on the cores of its group (the AdaLN LayerNorm,
    // Q's end, the text attention, the residual ends, the plain LayerNorm, FF-up's GELU end),
    // each group's cores doing their share of each of its phases in turn (docs/blackhole.md §12).
    // Its K/V are the observation's, not the step's; the head split and merge and the AdaLN
    // split ride in the readers and writers, the residual adds in the matmul ends; the stream in
    // (the AdaLN rows are the timestep's, computed before), the stream out.
    assert_eq!(full_size_block(None), 1);
}

/// The same block packed for a p150a's 11 x 10 grid (the simulator's is 13 x 10): 14 cores beside
/// the 96 matmul cores, shared by the 7 groups (a core or two each, 3 for the attention): still
/// one program, with the same result.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_full_size_block_packed_for_a_p150a_grid() {
    assert_eq!(full_size_block(Some([11, 10])), 1);
}

/// Runs the block, packed for `grid` (default: the device's), and checks it against the
/// emulator and the plan; answers the step's programs.
fn full_size_block(grid: Option<[usize; 2]>) -> u64 {
    assert!(
        std::env::var_os("TT_METAL_SIMULATOR").is_some(),
        "TT_METAL_SIMULATOR is not set (source the simulator's env.sh, or run \
         scripts/device-sim-tests.sh)"
    );
    let mut cfg = Gr00tConfig::default();
    cfg.diffusion_model_cfg.num_layers = 1;
    cfg.action_horizon = DitDims::FULL.sa_tokens - 1;
    let ctx = DitDims::FULL.ctx_tokens;
    let dims = dit_dims(&cfg, ctx);
    assert_eq!(
        (dims.width(), dims.head_dim, dims.ff_inner),
        (1536, 48, 6144)
    );
    let random = RandomWeights {
        seed: 24,
        dtype: DType::F32,
    };
    let weights = DitWeights::load(&random, &cfg).unwrap();
    assert_eq!(weights.blocks[0].kind, BlockKind::CrossText);
    let dtype = ArenaDtype::Bfp8B;
    let layout = arena_layout(&dims, dtype);
    let source = CheckpointTensors {
        weights: &random,
        layout: &layout,
    };
    let (index, arena) = build_arena_bytes(&layout, &source).unwrap();
    let mut seed = 5u64;
    let mut draw = |n: usize| (0..n).map(|_| rand(&mut seed)).collect::<Vec<f32>>();
    let d = dims.width();
    let (tokens, temb, context) = (
        draw(dims.sa_tokens * d),
        draw(d),
        draw(ctx * dims.cross_dim),
    );
    // The prompt's text keys first, its image keys after (what the Eagle backbone emits).
    let text_mask: Vec<bool> = (0..ctx).map(|j| j < 40).collect();
    let image_mask: Vec<bool> = text_mask.iter().map(|t| !t).collect();
    let inputs = DitStepInputs {
        tokens: &tokens,
        temb: &temb,
        context: &context,
        text_mask: &text_mask,
        image_mask: &image_mask,
    };
    let owned = ArenaBytes::Owned(arena.clone());
    let emu = Emulator::new(&weights, &index, &owned, &dims).unwrap();
    let want = emu.run_step(&inputs).unwrap();

    let t = Instant::now();
    let mut dev = TtDevice::open(DeviceKind::Simulator, &index, &arena).unwrap();
    if let Some(g) = grid {
        // The packer takes the grid from here; the cores it gives are all on the larger one.
        assert!(dev.info.grid[0] >= g[0] && dev.info.grid[1] >= g[1]);
        dev.info.grid = g;
    }
    let open_s = t.elapsed().as_secs_f64();
    let steps = DeviceSteps::new(&dev, &weights, &dims).unwrap();
    let t = Instant::now();
    let got = steps.run_blocks(&inputs).unwrap();
    let wall_s = t.elapsed().as_secs_f64();
    // The next step replays the graph the worker kept: the same inputs give the same bits.
    let t = Instant::now();
    let again = steps.run_blocks(&inputs).unwrap();
    let replay_s = t.elapsed().as_secs_f64();
    // What the plan packs for this grid, from the dimensions alone.
    let planned = steps.plan.step_programs(dev.info.grid).unwrap();
    drop(steps);
    let stats = dev.stats().expect("a finished forward");
    let (step, replayed) = (stats.per_step[0], stats.per_step[1]);
    let before_step = stats.cumulative.traffic;

    assert_eq!(got.len(), want.len());
    assert!(got.iter().all(|v| v.is_finite()));
    let p = pcc(&got, &want);
    let max_err = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    eprintln!(
        "full-size block 0 on the device: PCC {p:.8} vs the emulator, max |err| {max_err:.4e} \
         (stream max |x| {scale:.3}); open + upload {open_s:.1} s, the constants, the cross K/V \
         and the step {wall_s:.1} s; the step: {} programs, {} B in, {} B out; since open: {:?}",
        step.programs, step.host_to_device_bytes, step.device_to_host_bytes, before_step
    );
    let times = dev.times();
    let (bt, rt) = (&times.built, &times.replayed);
    eprintln!(
        "  the step built: runtime {:.2} ms, worker's host share {:.2} ms, request {} B; \
         replayed: runtime {:.3} ms, worker's host share {:.2} ms, request {} B, {replay_s:.1} s",
        bt.build.as_secs_f64() * 1e3,
        bt.worker.as_secs_f64() * 1e3,
        bt.request_bytes,
        rt.build.as_secs_f64() * 1e3,
        rt.worker.as_secs_f64() * 1e3,
        rt.request_bytes
    );
    assert_eq!((bt.steps, rt.steps), (1, 1));
    assert!(
        again == got,
        "the replayed step differs from the step it replays"
    );
    for (label, n, t) in &times.graph {
        eprintln!("  {label}: {n} programs, {:.2} s", t.as_secs_f64());
    }
    for (i, phases) in times.chains.iter().enumerate() {
        eprintln!("  the step's program {i}: phases (kind, cores) {phases:?}");
    }
    assert!(p >= 0.9999, "PCC {p} vs the emulator");
    assert!(max_err <= 0.05, "max |err| {max_err} vs the emulator");
    // The worker ran the plan's programs, each phase on as many cores as the plan gave it.
    assert_eq!(step.programs, planned.len() as u64, "{planned:?}");
    let sizes = |p: &tt_blackhole::plan::program::ProgramCores| -> Vec<u64> {
        p.steps
            .iter()
            .flat_map(|s| [s.before.len(), s.matmul.len(), s.end.len()])
            .filter(|n| *n > 0)
            .map(|n| n as u64)
            .collect()
    };
    let ran: Vec<Vec<u64>> = times
        .chains
        .iter()
        .map(|c| c.iter().map(|(_, n)| *n).collect())
        .collect();
    assert_eq!(ran, planned.iter().map(sizes).collect::<Vec<_>>());
    // The observation's K and V: one program for both and their ends (the attention reader
    // splits the heads).
    // Before the steps: the observation's K/V and the timestep's AdaLN rows, a program each.
    assert_eq!(before_step.programs, 2 * step.programs + 2);
    assert_eq!(replayed.programs, step.programs);
    let m = dims.sa_tokens;
    assert_eq!(step.device_to_host_bytes, (m * d * 4) as u64);
    // In: the stream (SiLU(temb) went in with the timestep), and the task tables the worker wrote for the
    // step's program (this first step's; a step whose tables are already there sends none).
    let inputs = (m * d * 4) as u64;
    let tables = step.host_to_device_bytes - inputs.min(step.host_to_device_bytes);
    eprintln!("  the step's task tables: {tables} B");
    assert!(
        step.host_to_device_bytes >= inputs && tables <= 64 * 1024,
        "{} B in, {inputs} B of inputs",
        step.host_to_device_bytes
    );
    // The replay writes the inputs alone.
    assert_eq!(replayed.host_to_device_bytes, inputs);
    assert_eq!(replayed.device_to_host_bytes, (m * d * 4) as u64);
    step.programs
}
