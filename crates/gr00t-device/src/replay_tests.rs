//! The step graphs kept by the worker and replayed (`op_replay`), on the simulated p150a: a
//! timestep's step, once built, sends only its tokens, across forwards and observations of one
//! context length; an observation of another length re-allocates the cross K/V, so its step is
//! built and kept again. Every step gives the emulator's result.

use tt_blackhole::ArenaDtype;
use tt_blackhole::device::{DitDevice, DitStepInputs};

use crate::golden_case::{case_dir, pcc};
use gr00t_megakernel::{MegakernelPolicy, dit_dims};
use gr00t_runtime::model::Gr00tModel;
use gr00t_runtime::weights::WeightStore;

use super::tests::rand;

#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_steps_replay_the_kept_graph() {
    super::tests::require_simulator("sim_steps_replay_the_kept_graph");
    let sim = super::tests::sim_policy(ArenaDtype::Bfp8B);
    let ws = WeightStore::open_dir(&case_dir()).unwrap();
    let model = Gr00tModel::load(&case_dir()).unwrap();
    let emu = MegakernelPolicy::new(model, &ws, ArenaDtype::Bfp8B, None, "x", "emulator").unwrap();
    let dims = dit_dims(&sim.model().cfg.gr00t, 20);
    let (d, cross) = (dims.width(), dims.cross_dim);
    let mut seed = 23u64;
    let mut draw = |n: usize| (0..n).map(|_| rand(&mut seed)).collect::<Vec<f32>>();
    let (ctx_a, ctx_b, ctx_c) = (draw(20 * cross), draw(20 * cross), draw(28 * cross));
    // A forward's timesteps are the same every forward: two of them here.
    let tembs = [draw(d), draw(d)];
    // (what, context, text rows, timestep, then the steps built and replayed so far)
    type Case<'a> = (&'a str, &'a [f32], usize, usize, u64, u64);
    let cases: [Case<'_>; 7] = [
        ("the first step", &ctx_a, 8, 0, 1, 0),
        ("the next step, another timestep", &ctx_a, 8, 1, 2, 0),
        ("a later forward, same observation", &ctx_a, 8, 0, 2, 1),
        ("its next step", &ctx_a, 8, 1, 2, 2),
        ("another observation of the same length", &ctx_b, 8, 0, 2, 3),
        // The worker refuses the replay (a tensor its programs name is gone) and the step's
        // graph goes whole again.
        ("a tensor of the kept graph released", &ctx_b, 8, 1, 3, 3),
        ("an observation of another length", &ctx_c, 12, 0, 4, 3),
    ];
    let mut sim_dev = sim.executor().unwrap().device;
    let mut emu_dev = emu.executor().unwrap().device;
    for (i, (case, context, text, ts, built, replayed)) in cases.into_iter().enumerate() {
        if i == 2 {
            // A new forward: the kept graphs and the timesteps are the device's, not the forward's.
            sim_dev = sim.executor().unwrap().device;
        }
        if i == 5 {
            let dev = crate::tests::tt(&sim);
            let name = super::protocol::Named { name: "t/h".into() };
            dev.raw_call(&super::protocol::Free(name), &[]).unwrap();
        }
        let ctx = context.len() / cross;
        let image_mask: Vec<bool> = (0..ctx).map(|r| r >= text).collect();
        let text_mask: Vec<bool> = image_mask.iter().map(|m| !m).collect();
        let (tokens, temb) = (draw(dims.sa_tokens * d), &tembs[ts]);
        let inputs = DitStepInputs {
            tokens: &tokens,
            temb,
            context,
            text_mask: &text_mask,
            image_mask: &image_mask,
        };
        sim_dev.prepare(ctx).unwrap();
        emu_dev.prepare(ctx).unwrap();
        let before = crate::tests::tt(&sim).traffic();
        let got = sim_dev.run_blocks(&inputs).unwrap();
        let moved = before.until(crate::tests::tt(&sim).traffic());
        let want = emu_dev.run_blocks(&inputs).unwrap();
        let p = pcc(&got, &want);
        let t = crate::tests::tt(&sim).times();
        eprintln!(
            "{case}: PCC {p:.8} vs the emulator; built {} (host {:?} + worker {:?}, {} B of requests), replayed {} (host {:?} + worker {:?}, {} B); {moved:?}",
            t.built.steps,
            t.built.build,
            t.built.worker,
            t.built.request_bytes,
            t.replayed.steps,
            t.replayed.build,
            t.replayed.worker,
            t.replayed.request_bytes,
        );
        assert!(p >= 0.9999, "{case}: PCC {p} vs the emulator");
        assert_eq!(
            (t.built.steps, t.replayed.steps),
            (built, replayed),
            "{case}: steps (built, replayed)"
        );
        if i == 3 {
            // A replay writes the step's tokens and nothing else: no task table, no graph, no
            // timestep (its AdaLN rows are on the device).
            let inputs = tokens.len() * 4;
            assert_eq!(
                moved.host_to_device_bytes, inputs as u64,
                "{case}: {moved:?}"
            );
            assert_eq!(moved.programs, 1, "{case}: {moved:?}");
        }
    }
    // A replay's request is the inputs' specs: a few hundred bytes, not the graph.
    let t = crate::tests::tt(&sim).times();
    assert!(
        t.replayed.request_bytes / t.replayed.steps < 1024,
        "{:?}",
        t.replayed
    );
    assert!(
        t.built.request_bytes / t.built.steps > 10 * 1024,
        "{:?}",
        t.built
    );
}
