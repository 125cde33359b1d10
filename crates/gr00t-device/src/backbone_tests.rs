//! The whole model on the device (`GR00T_BACKBONE_BACKEND=device`) on the simulated p150a:
//! SigLIP2's tower and the projector per camera, the prompt's rows gathered from the
//! token-embedding table, Qwen3's kept layers, the final norm and vlln, then the whole action
//! head, vs the f32 CPU reference; with two cameras, so each camera's image tokens are placed
//! in their own rows on the device and gathered from there.

use std::time::Instant;

use super::head_graph_tests::replayed_head_bytes;
use super::tests::{require_simulator, sim_policy_with};
use gr00t_megakernel::vision_layout::VisionLayout;

/// The tiny forward with two cameras and the whole model on the device: the actions vs the f32
/// CPU reference of the same two-camera observation (the golden's camera and a second image,
/// its pixels mirrored, with a second block of image tokens in the prompt); the host ran none
/// of the model's stages; a second forward of the same observation sends the two images'
/// patches, the prompt's ids and the head's replayed inputs, and no image row (both cameras'
/// tokens are gathered where their vision graphs left them).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_tiny_forward_with_two_cameras_and_the_whole_model_on_the_device() {
    use crate::golden_case::{case_dir, golden_inputs, pcc};
    use gr00t_runtime::model::{Gr00tModel, Taps};
    use gr00t_runtime::policy::{HostStages, Policy};

    require_simulator("sim_tiny_forward_with_two_cameras_and_the_whole_model_on_the_device");
    let mut inputs = golden_inputs();
    let model = Gr00tModel::load(&case_dir()).unwrap();
    // The second camera: the first's pixels mirrored left to right, its tokens a block of
    // their own after the first camera's.
    let (h, w) = inputs.image_hw;
    let first = inputs.pixel_values[0].clone();
    let mirrored: Vec<f32> = (0..first.len())
        .map(|i| {
            let (row, col) = (i / w, i % w);
            first[row * w + (w - 1 - col)]
        })
        .collect();
    inputs.pixel_values.push(mirrored);
    let image_token = model.cfg.eagle.image_token_index;
    let last = inputs
        .input_ids
        .iter()
        .rposition(|&id| id == image_token)
        .expect("the golden prompt has image tokens");
    let block = model.tokens_per_image(h, w);
    let at = last + 1;
    inputs
        .input_ids
        .splice(at..at, std::iter::repeat_n(image_token, block));
    let reference = model.forward(&inputs, &mut Taps::none()).unwrap();

    let sim = sim_policy_with(&gr00t_megakernel::MegakernelConfig {
        device: "sim".into(),
        head_embodiment: Some(inputs.embodiment_id),
        backbone_on_device: true,
        ..gr00t_megakernel::MegakernelConfig::default()
    });
    let started = Instant::now();
    let (got, timing) = sim.predict(&inputs).unwrap();
    let wall = started.elapsed().as_secs_f64();
    let p = pcc(&got.data, &reference.data);
    let stats = crate::tests::tt(&sim).stats().expect("a finished forward");
    eprintln!(
        "tiny forward, two cameras, the whole model on the device: {wall:.1} s; PCC vs f32 \
         {p:.6}; host stages {:?}; {stats:?}",
        timing.host_stages.names()
    );
    assert!(p >= 0.999, "PCC vs f32 {p}");
    assert_eq!(
        timing.host_stages,
        HostStages::NONE,
        "{:?}",
        timing.host_stages.names()
    );
    // Each image goes in as its patches (bf16, 2 bytes each), in the tokens' device order.
    let v = &sim.model().cfg.eagle.vision_config;
    let layout = VisionLayout::new(h / v.patch_size, w / v.patch_size).unwrap();
    let patches = 32 * layout.row_tiles() * v.num_channels * v.patch_size * v.patch_size;
    // A second forward of the same observation: every graph replayed.
    let (again, _) = sim.predict(&inputs).unwrap();
    assert_eq!(again.data, got.data);
    let st2 = crate::tests::tt(&sim).stats().unwrap();
    eprintln!("second forward: {st2:?}");
    // The LLM's replayed inputs: the ids' row (4 bytes a token); no image row.
    let llm = 4 * inputs.input_ids.len();
    assert_eq!(
        st2.host_to_device_bytes_per_forward,
        replayed_head_bytes(sim.model(), &inputs, true) + 2 * 2 * patches as u64 + llm as u64,
        "{st2:?}"
    );
}
