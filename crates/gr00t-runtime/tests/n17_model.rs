//! The whole N1.7 policy on case1 from the raw observation (the PNG frames as a client sends
//! them, the raw state, the instruction of observation.json, the injected noise) to the
//! decoded actions, against the golden `output.action.*` and `flow.action_pred`; plus the
//! version guard and RTC through the whole model.

use crate::n17_golden::{self, assert_all_close, case_dir, processor_dir};
use gr00t_runtime::model::Taps;
use gr00t_runtime::n17::config::GrootVersion;
use gr00t_runtime::n17::head::Rtc;
use gr00t_runtime::n17::model::{N17Model, N17ModelError, check_version};
use gr00t_runtime::n17::processing::Observation;
use gr00t_runtime::preprocess::decode_image;
use std::collections::BTreeMap;
use std::sync::OnceLock;

fn obs_json() -> serde_json::Value {
    let path = case_dir().join("observation.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// One load shared by the tests of this file (the backbone load is the slow part).
fn model() -> &'static N17Model {
    static M: OnceLock<N17Model> = OnceLock::new();
    M.get_or_init(|| {
        let tag = obs_json()["embodiment_tag"].as_str().unwrap().to_owned();
        N17Model::load(&case_dir(), &processor_dir(), &tag).expect("load case1")
    })
}

/// case1 as a client has it: the PNG files of `video_frames` (oldest first), the raw state
/// rows of `state_raw`, the raw instruction.
fn raw_observation() -> Observation {
    let j = obs_json();
    let mut video = BTreeMap::new();
    for (cam, frames) in j["video_frames"].as_object().unwrap() {
        let imgs = frames
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let path = case_dir().join(format!("observation.{}.png", f.as_str().unwrap()));
                decode_image(&std::fs::read(&path).unwrap()).unwrap()
            })
            .collect();
        video.insert(cam.clone(), imgs);
    }
    let mut state = BTreeMap::new();
    for (g, v) in j["state_raw"].as_object().unwrap() {
        // [1, T, D]: one batch element, T rows.
        let rows: Vec<Vec<f32>> = v[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap() as f32)
                    .collect()
            })
            .collect();
        state.insert(g.clone(), rows);
    }
    Observation {
        video,
        state,
        instruction: j["instruction_raw"].as_str().unwrap().to_owned(),
    }
}

fn noise() -> Vec<f32> {
    n17_golden::observation().f32s["noise"].1.clone()
}

#[test]
fn the_png_frames_are_the_safetensors_frames() {
    let obs = raw_observation();
    let t = n17_golden::observation();
    for (cam, frames) in &obs.video {
        let (shape, data) = &t.u8s[&format!("video.{cam}")];
        assert_eq!(shape[1], frames.len(), "{cam}");
        let got: Vec<u8> = frames.iter().flat_map(|f| f.data.clone()).collect();
        assert_eq!(&got, data, "video.{cam}");
    }
}

#[test]
fn case1_from_the_raw_observation_matches_the_golden_actions() {
    let m = model();
    let taps = n17_golden::taps();
    let out = m
        .predict(&raw_observation(), &noise(), None, &mut Taps::none())
        .expect("predict case1");
    assert_eq!((out.chunk_rows, out.chunk_cols), (40, 132));
    assert_eq!(out.seq_len, 279);
    let mut pairs: Vec<(String, Vec<f32>, Vec<f32>)> = vec![(
        "flow.action_pred".into(),
        out.chunk.clone(),
        taps.f32s["flow.action_pred"].1.clone(),
    )];
    let names: Vec<&str> = out.actions.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["eef_9d", "gripper_position", "joint_position"]);
    for g in &out.actions {
        let name = format!("output.action.{}", g.name);
        let (shape, want) = &taps.f32s[&name];
        assert_eq!(shape, &vec![1, g.horizon, g.dim], "{name}");
        pairs.push((name, g.values.clone(), want.clone()));
    }
    assert_all_close(pairs.iter().map(|(n, g, w)| (n.as_str(), &g[..], &w[..])));
}

#[test]
fn rtc_through_the_model_keeps_the_frozen_rows_of_the_previous_chunk() {
    let m = model();
    let obs = raw_observation();
    let plain = m
        .predict(&obs, &noise(), None, &mut Taps::none())
        .expect("plain");
    let h = m.decoded_horizon();
    let rtc = Rtc {
        previous_chunk: plain.chunk.clone(),
        action_horizon: h,
        overlap_steps: 8,
        frozen_steps: 3,
        ramp_rate: 6.0,
    };
    let out = m
        .predict(&obs, &noise(), Some(&rtc), &mut Taps::none())
        .expect("rtc");
    let d = 132;
    // The frozen rows are the previous chunk's rows h-8 .. h-5, untouched by the flow.
    assert_eq!(&out.chunk[..3 * d], &plain.chunk[(h - 8) * d..(h - 5) * d]);
    assert_ne!(out.chunk, plain.chunk);
    // A bad RTC option is refused with its field named.
    let bad = Rtc {
        frozen_steps: 9,
        ..rtc
    };
    let e = m
        .predict(&obs, &noise(), Some(&bad), &mut Taps::none())
        .unwrap_err();
    assert!(e.to_string().contains("frozen_steps"), "{e}");
}

#[test]
fn wrong_noise_and_bad_observations_are_typed_errors() {
    let m = model();
    let obs = raw_observation();
    let e = m
        .predict(&obs, &noise()[1..], None, &mut Taps::none())
        .unwrap_err();
    assert!(matches!(e, N17ModelError::Noise(_)), "{e}");
    let mut o = obs.clone();
    o.video.get_mut("wrist_image_left").unwrap().pop();
    let e = m
        .predict(&o, &noise(), None, &mut Taps::none())
        .unwrap_err();
    assert!(e.to_string().contains("video.wrist_image_left"), "{e}");
}

#[test]
fn the_version_guard_names_both_versions() {
    let n17 = case_dir().join("config.json");
    let n16 = n17_golden::golden_root().join("../gr00t-n16-tiny/case1/config.json");
    assert_eq!(check_version(None, &n17).unwrap(), GrootVersion::N17);
    assert_eq!(check_version(Some("n17"), &n17).unwrap(), GrootVersion::N17);
    assert_eq!(check_version(Some("n16"), &n16).unwrap(), GrootVersion::N16);
    let e = check_version(Some("n16"), &n17).unwrap_err().to_string();
    assert!(
        e.contains("GR00T_VERSION=n16") && e.contains("is n17"),
        "{e}"
    );
    let e = check_version(Some("n17"), &n16).unwrap_err().to_string();
    assert!(
        e.contains("GR00T_VERSION=n17") && e.contains("is n16"),
        "{e}"
    );
    assert!(matches!(
        check_version(Some("n15"), &n17),
        Err(N17ModelError::UnknownVersion(_))
    ));
}

/// case1's noise is `torch.randn` of a generator seeded 1703: the runtime's seeded noise (what
/// a server draws for a request without `noise`) is the same draw.
#[test]
fn the_seeded_noise_is_the_reference_draw() {
    let got = gr00t_runtime::randn::randn(1703, 40 * 132);
    assert_all_close([("noise", &got[..], &noise()[..])]);
}
