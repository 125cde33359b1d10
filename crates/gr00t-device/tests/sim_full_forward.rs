//! The FULL-SIZE N1.6-3B forward (DiT 1536×32, horizon 50, width 128; seeded random bf16
//! weights) with the whole action head on the simulated p150a, against the same forward on the
//! CPU emulator of the device: the time it took and the PCC, for docs/benchmarks.md. One
//! full-size block's step takes about 37 s on the simulator, so this is over an hour: it runs
//! only by hand (`scripts/sim-full-forward.sh`), never in CI (`.ci/run` skips it by name).

use std::time::{Duration, Instant};

use gr00t_megakernel::{MegakernelConfig, MegakernelPolicy};
use gr00t_runtime::config::ModelConfig;
use gr00t_runtime::model::Gr00tModel;
use gr00t_runtime::model::synthetic::full_size_inputs;
use gr00t_runtime::policy::Policy;
use gr00t_runtime::weights::{DType, RandomWeights};

fn pcc(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len() as f64;
    let ma = a.iter().map(|&v| v as f64).sum::<f64>() / n;
    let mb = b.iter().map(|&v| v as f64).sum::<f64>() / n;
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x as f64 - ma, y as f64 - mb);
        ab += dx * dy;
        aa += dx * dx;
        bb += dy * dy;
    }
    ab / (aa.sqrt() * bb.sqrt())
}

#[test]
#[ignore = "full size on the simulated p150a, over an hour: scripts/sim-full-forward.sh runs it"]
fn sim_full_size_forward_with_the_head_on_the_device() {
    assert!(
        std::env::var_os("TT_METAL_SIMULATOR").is_some(),
        "TT_METAL_SIMULATOR is not set: run scripts/sim-full-forward.sh"
    );
    let cfg = ModelConfig::full_size();
    let ws = RandomWeights {
        seed: 1601,
        dtype: DType::Bf16,
    };
    let inputs = full_size_inputs(&cfg);
    let policy = |device: &str, head: Option<usize>| {
        let model = Gr00tModel::from_source(cfg.clone(), &ws).expect("full-size model");
        let config = MegakernelConfig {
            device: device.into(),
            head_embodiment: head,
            // One program holds the whole forward: its deadline is derived per graph step from
            // this until it has been measured once.
            device_timeout: Duration::from_secs(600),
            ..MegakernelConfig::default()
        };
        MegakernelPolicy::with_config(
            model,
            &ws,
            "random-1601",
            &config,
            Some(&gr00t_device::TtnnOpener),
        )
        .unwrap_or_else(|e| panic!("{device}: {e}"))
    };
    // The reference first, then dropped (two full-size models do not fit beside each other).
    let t = Instant::now();
    let (want, _) = policy("emulator", None).predict(&inputs).unwrap();
    let emu_s = t.elapsed().as_secs_f64();
    let sim = policy("sim", Some(inputs.embodiment_id));
    let t = Instant::now();
    let (got, _) = sim.predict(&inputs).unwrap();
    let sim_s = t.elapsed().as_secs_f64();
    let p = pcc(&got.data, &want.data);
    let err = got
        .data
        .iter()
        .zip(&want.data)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let stats = sim.device().and_then(|d| d.stats());
    eprintln!(
        "full-size forward, head on the simulated p150a: {sim_s:.0} s (emulator {emu_s:.0} s); \
         PCC vs the emulator {p:.6}, max |err| {err:.3e}; {stats:?}"
    );
    assert!(got.data.iter().all(|v| v.is_finite()));
    assert!(p >= 0.999, "PCC vs the emulator {p}");
}
