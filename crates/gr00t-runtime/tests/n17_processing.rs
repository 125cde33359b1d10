//! N1.7 processing against the golden case1 taps (see n17_golden): every image stage and
//! `pixel_values` bit-exact, the prompt ids and grid exact, the state and the decoded
//! actions within the README tolerance; plus the formaliser and the field-named errors.

use crate::n17_golden::{self, Tensors, assert_all_close, case_dir, processor_dir};
use gr00t_runtime::n17::processing::config::{ActionFormat, ActionKind};
use gr00t_runtime::n17::processing::{
    ConfigError, DecodeError, EmbodimentConfig, Observation, PrepareError, Processing,
    decode::{decode_actions, split_normalized},
    image::{frames_in_transform_order, prompt_images, transform_stages},
    state::encode_state,
};
use gr00t_runtime::preprocess::RgbImage;
use gr00t_runtime::tokenizer::formalize_instruction;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn obs_json() -> serde_json::Value {
    let path = case_dir().join("observation.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn tag() -> String {
    obs_json()["embodiment_tag"].as_str().unwrap().to_owned()
}

fn processing() -> Processing {
    Processing::load(&case_dir(), &tag(), &processor_dir()).expect("case1 processing")
}

/// The golden observation as the request type: frames of `video.*` [1, T, H, W, 3] and rows
/// of `state.*` [1, T, D], the raw instruction.
fn observation(cfg: &EmbodimentConfig) -> Observation {
    let t = n17_golden::observation();
    let mut obs = Observation {
        instruction: obs_json()["instruction_raw"].as_str().unwrap().to_owned(),
        ..Default::default()
    };
    for cam in &cfg.cameras {
        let (shape, data) = &t.u8s[&format!("video.{cam}")];
        let [1, frames, h, w, 3] = shape[..] else {
            panic!("video.{cam}: shape {shape:?}");
        };
        let frame = h * w * 3;
        let imgs = (0..frames)
            .map(|f| RgbImage::new(w, h, data[f * frame..(f + 1) * frame].to_vec()))
            .collect();
        obs.video.insert(cam.clone(), imgs);
    }
    for g in &cfg.state_groups {
        let (shape, data) = &t.f32s[&format!("state.{}", g.name)];
        let [1, rows, d] = shape[..] else {
            panic!("state.{}: shape {shape:?}", g.name);
        };
        let rows = (0..rows)
            .map(|r| data[r * d..(r + 1) * d].to_vec())
            .collect();
        obs.state.insert(g.name.clone(), rows);
    }
    obs
}

fn u8_tap<'a>(taps: &'a Tensors, name: &str) -> &'a (Vec<usize>, Vec<u8>) {
    taps.u8s
        .get(name)
        .unwrap_or_else(|| panic!("no u8 tap {name}"))
}

fn assert_image(taps: &Tensors, name: &str, got: &RgbImage) {
    let (shape, want) = u8_tap(taps, name);
    assert_eq!(shape, &vec![got.height, got.width, 3], "{name}: shape");
    let diff = got.data.iter().zip(want).filter(|(a, b)| a != b).count();
    assert_eq!(diff, 0, "{name}: {diff} bytes differ");
}

#[test]
fn the_config_resolves_case1() {
    let cfg = processing().config;
    assert_eq!(cfg.embodiment_id, 24);
    assert_eq!(cfg.cameras, ["exterior_image_1_left", "wrist_image_left"]);
    assert_eq!((cfg.frames_per_camera, cfg.state_history), (2, 1));
    assert_eq!(
        (cfg.image.max_size, cfg.image.crop_fraction),
        (256, 230.0 / 256.0)
    );
    assert_eq!(cfg.encoded_state_dim(), 17);
    assert_eq!((cfg.action_width(), cfg.action_horizon), (17, 40));
    assert_eq!(
        (
            cfg.max_state_dim,
            cfg.max_action_dim,
            cfg.max_action_horizon
        ),
        (132, 132, 40)
    );
    let rel: Vec<_> = cfg
        .action_groups
        .iter()
        .map(|g| g.relative.as_ref().map(|r| (r.kind, r.format)))
        .collect();
    assert_eq!(
        rel,
        [
            Some((ActionKind::Eef, ActionFormat::XyzRot6d)),
            None,
            Some((ActionKind::NonEef, ActionFormat::Default))
        ]
    );
    let taps = n17_golden::taps();
    assert_eq!(
        taps.i64s["input.embodiment_id"].1,
        [cfg.embodiment_id as i64]
    );
}

#[test]
fn every_image_stage_is_bit_exact() {
    let p = processing();
    let obs = observation(&p.config);
    let taps = n17_golden::taps();
    let raw = frames_in_transform_order(&p.config, &obs);
    assert_eq!(raw.len(), 4);
    for (i, frame) in raw.iter().enumerate() {
        assert_image(&taps, &format!("input.image_raw.{i}"), frame);
        let s = transform_stages(frame, &p.config.image);
        assert_image(
            &taps,
            &format!("input.image_letterboxed.{i}"),
            &s.letterboxed,
        );
        assert_image(&taps, &format!("input.image_resized1.{i}"), &s.resized1);
        assert_image(&taps, &format!("input.image_cropped.{i}"), &s.cropped);
        assert_image(&taps, &format!("input.image_augmented.{i}"), &s.augmented);
    }
    for (k, img) in prompt_images(&p.config, &obs).iter().enumerate() {
        assert_image(&taps, &format!("input.image_to_qwen_processor.{k}"), img);
    }
}

#[test]
fn pixel_values_ids_and_grid_match_the_golden() {
    let p = processing();
    let obs = observation(&p.config);
    let taps = n17_golden::taps();
    let prepared = p.prepare(&obs).expect("prepare case1");

    let (shape, want) = &taps.f32s["input.pixel_values"];
    let pv = &prepared.pixel_values;
    assert_eq!(shape, &vec![pv.rows, pv.cols]);
    let diff = pv
        .values
        .iter()
        .zip(want)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    assert_eq!(diff, 0, "pixel_values: {diff} values differ bitwise");

    let (shape, grid) = &taps.i64s["input.image_grid_thw"];
    assert_eq!(shape, &vec![4, 3]);
    let got: Vec<i64> = pv.grid_thw.iter().flatten().map(|&v| v as i64).collect();
    assert_eq!(&got, grid);

    let j = obs_json();
    assert_eq!(
        prepared.instruction,
        j["instruction_formalized"].as_str().unwrap()
    );
    let text = p.prompter.chat_text(4, &prepared.instruction).unwrap();
    assert_eq!(text, j["prompt_text"].as_str().unwrap());
    let (shape, ids) = &taps.i64s["input.input_ids"];
    assert_eq!(shape, &vec![1, 279]);
    let got: Vec<i64> = prepared.input_ids.iter().map(|&v| v as i64).collect();
    assert_eq!(&got, ids);
    let image_tokens = got
        .iter()
        .filter(|&&v| v == p.prompter.image_pad_id() as i64)
        .count();
    assert_eq!(image_tokens, 256);
    assert!(taps.i64s["input.attention_mask"].1.iter().all(|&m| m == 1));
}

#[test]
fn the_state_matches_the_golden() {
    let p = processing();
    let obs = observation(&p.config);
    let taps = n17_golden::taps();
    let state = encode_state(&p.config, &obs.state).unwrap();
    let (shape, want) = &taps.f32s["input.state"];
    assert_eq!(
        shape,
        &vec![1, p.config.state_history, p.config.max_state_dim]
    );
    assert_all_close([("input.state", &state[..], &want[..])]);
    // joint_position[5] = 3.5 is above its q99: clipped to exactly +1 (9 eef + 1 gripper + 5).
    assert_eq!(state[15], 1.0);
    assert!(state[17..].iter().all(|&v| v == 0.0));
    // Same through `prepare`.
    assert_eq!(p.prepare(&obs).unwrap().state, state);
}

#[test]
fn the_decoded_actions_match_the_golden() {
    let p = processing();
    let obs = observation(&p.config);
    let taps = n17_golden::taps();
    let (shape, chunk) = &taps.f32s["flow.action_pred"];
    assert_eq!(shape, &vec![1, 40, 132]);

    let normalized = split_normalized(&p.config, chunk).unwrap();
    let decoded = p.decode(chunk, &obs.state).unwrap();
    assert_eq!(
        decoded,
        decode_actions(&p.config, chunk, &obs.state).unwrap()
    );
    let mut pairs: Vec<(String, Vec<f32>, Vec<f32>)> = Vec::new();
    for (n, d) in normalized.iter().zip(&decoded) {
        for (prefix, g) in [("decode.normalized", n), ("output.action", d)] {
            let name = format!("{prefix}.{}", g.name);
            let (shape, want) = &taps.f32s[&name];
            assert_eq!(shape, &vec![1, g.horizon, g.dim], "{name}");
            pairs.push((name, g.values.clone(), want.clone()));
        }
    }
    assert_eq!(pairs.len(), 6);
    assert_all_close(pairs.iter().map(|(n, g, w)| (n.as_str(), &g[..], &w[..])));
}

#[test]
fn the_formaliser_lowercases_and_strips_punctuation() {
    let j = obs_json();
    assert_eq!(
        formalize_instruction(j["instruction_raw"].as_str().unwrap()),
        j["instruction_formalized"].as_str().unwrap()
    );
    // Python `re.sub(r"[^\w\s]", "", s.lower())`: `\w` keeps letters, digits and `_`
    // (Unicode), `\s` keeps whitespace as is.
    assert_eq!(
        formalize_instruction("Pick_up the 2 CUPS, now!\t"),
        "pick_up the 2 cups now\t"
    );
    assert_eq!(
        formalize_instruction("Café-au-lait: Ünïcode…"),
        "caféaulait ünïcode"
    );
    assert_eq!(formalize_instruction("it's (very) \"hot\""), "its very hot");
    // Through the processing, as the config asks.
    assert_eq!(processing().instruction("Open It."), "open it");
}

fn field_of(e: PrepareError) -> String {
    match e {
        PrepareError::Input(e) => e.field,
        other => panic!("expected an input error, got {other}"),
    }
}

#[test]
fn malformed_requests_name_the_field() {
    let p = processing();
    let good = observation(&p.config);

    let mut o = good.clone();
    o.video.get_mut("wrist_image_left").unwrap().pop();
    assert_eq!(
        field_of(p.prepare(&o).unwrap_err()),
        "video.wrist_image_left"
    );

    let mut o = good.clone();
    o.video.remove("exterior_image_1_left");
    let e = p.prepare(&o).unwrap_err();
    assert!(e.to_string().contains("video.exterior_image_1_left"), "{e}");

    let mut o = good.clone();
    o.video.get_mut("wrist_image_left").unwrap()[1] = RgbImage::new(0, 0, vec![]);
    assert_eq!(
        field_of(p.prepare(&o).unwrap_err()),
        "video.wrist_image_left"
    );

    let mut o = good.clone();
    o.state.get_mut("joint_position").unwrap()[0].push(0.0);
    assert_eq!(field_of(p.prepare(&o).unwrap_err()), "state.joint_position");

    let mut o = good.clone();
    let rows = o.state.get_mut("eef_9d").unwrap();
    rows.push(rows[0].clone());
    assert_eq!(field_of(p.prepare(&o).unwrap_err()), "state.eef_9d");

    let mut o = good.clone();
    o.state.remove("gripper_position");
    assert_eq!(
        field_of(p.prepare(&o).unwrap_err()),
        "state.gripper_position"
    );

    let mut o = good.clone();
    o.state.get_mut("gripper_position").unwrap()[0][0] = f32::NAN;
    assert_eq!(
        field_of(p.prepare(&o).unwrap_err()),
        "state.gripper_position"
    );

    // Decoding needs the state of the relative groups.
    let chunk = vec![0f32; 40 * 132];
    let mut state: BTreeMap<String, Vec<Vec<f32>>> = good.state.clone();
    state.remove("eef_9d");
    match p.decode(&chunk, &state).unwrap_err() {
        DecodeError::State(e) => assert_eq!(e.field, "state.eef_9d"),
        other => panic!("{other}"),
    }
    assert!(matches!(
        p.decode(&chunk[1..], &good.state),
        Err(DecodeError::Chunk(_))
    ));
}

/// A copy of case1's three processor files with `edit` applied to `file`'s JSON.
fn edited_case(name: &str, file: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("n17-processing-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in [
        "processor_config.json",
        "statistics.json",
        "embodiment_id.json",
    ] {
        std::fs::copy(case_dir().join(f), dir.join(f)).unwrap();
    }
    let path = dir.join(file);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    dir
}

fn config_field_error(dir: &Path) -> (String, String) {
    let e = EmbodimentConfig::load(dir, &tag()).unwrap_err();
    let _ = std::fs::remove_dir_all(dir);
    match e {
        ConfigError::Field { path, field, .. } => (
            path.file_name().unwrap().to_string_lossy().into_owned(),
            field,
        ),
        other => panic!("expected a field error, got {other}"),
    }
}

#[test]
fn bad_processor_files_name_the_file_and_field() {
    let t = tag();
    let dir = edited_case("format", "processor_config.json", |v| {
        v["processor_kwargs"]["modality_configs"][&t]["action"]["action_configs"][0]["format"] =
            "XYZ_QUAT".into();
    });
    assert_eq!(
        config_field_error(&dir),
        (
            "processor_config.json".into(),
            format!("processor_kwargs.modality_configs.{t}.action.action_configs[0].format")
        )
    );

    let dir = edited_case("q99", "statistics.json", |v| {
        v[&t]["state"]["joint_position"]["q99"] = serde_json::json!([1.0, 2.0]);
    });
    assert_eq!(
        config_field_error(&dir),
        (
            "statistics.json".into(),
            format!("{t}.state.joint_position.q99")
        )
    );

    let dir = edited_case("relstats", "statistics.json", |v| {
        v[&t]["relative_action"]
            .as_object_mut()
            .unwrap()
            .remove("joint_position");
    });
    assert_eq!(
        config_field_error(&dir),
        (
            "statistics.json".into(),
            format!("{t}.relative_action.joint_position")
        )
    );

    let dir = edited_case("id", "embodiment_id.json", |v| {
        v.as_object_mut().unwrap().remove(&t);
    });
    assert_eq!(
        config_field_error(&dir),
        ("embodiment_id.json".into(), t.clone())
    );

    let e = EmbodimentConfig::load(&case_dir(), "no_such_robot").unwrap_err();
    assert!(e.to_string().contains("no_such_robot"), "{e}");
}
