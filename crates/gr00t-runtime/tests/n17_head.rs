//! N1.7 head against the golden case1 taps (see n17_golden), real-time chunking, and the N1.7
//! checkpoint configuration.

use crate::n17_golden::{self, Tensors, assert_all_close, case_dir};
use gr00t_runtime::json_file::JsonFileError;
use gr00t_runtime::model::Taps;
use gr00t_runtime::n17::config::{
    GrootVersion, N17Config, N17ConfigError, detect_version, detect_version_file,
};
use gr00t_runtime::n17::head::{HeadError, HeadInputs, N17ActionHead, Rtc, RtcError, head_config};
use gr00t_runtime::weights::{DType, RandomWeights, WeightStore};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

type Captured = HashMap<String, (Vec<usize>, Vec<f32>)>;

fn n16_config_path() -> PathBuf {
    n17_golden::golden_root().join("../gr00t-n16-tiny/case1/config.json")
}

fn case1_config() -> N17Config {
    N17Config::from_file(&case_dir().join("config.json")).expect("case1 config")
}

fn load_head() -> N17ActionHead {
    let ws = WeightStore::open_dir(&case_dir()).expect("case1 weights");
    N17ActionHead::load(&ws, &case1_config()).expect("load head")
}

/// The golden head inputs: backbone taps, the processed state and the injected noise.
struct GoldenInputs {
    features: Vec<f32>,
    image_mask: Vec<bool>,
    attention_mask: Vec<bool>,
    state: Vec<f32>,
    embodiment_id: usize,
    noise: Vec<f32>,
}

impl GoldenInputs {
    fn read(taps: &Tensors) -> Self {
        let f = |n: &str| taps.f32s[n].1.clone();
        let mask = |n: &str| taps.i64s[n].1.iter().map(|&v| v != 0).collect::<Vec<_>>();
        Self {
            features: f("backbone.features"),
            image_mask: mask("backbone.image_mask"),
            attention_mask: mask("backbone.attention_mask"),
            state: f("input.state"),
            embodiment_id: taps.i64s["input.embodiment_id"].1[0] as usize,
            noise: n17_golden::observation().f32s["noise"].1.clone(),
        }
    }
    fn inputs(&self) -> HeadInputs<'_> {
        HeadInputs {
            features: &self.features,
            image_mask: &self.image_mask,
            attention_mask: &self.attention_mask,
            state: &self.state,
            embodiment_id: self.embodiment_id,
            noise: &self.noise,
        }
    }
}

fn run(head: &N17ActionHead, inp: &HeadInputs<'_>, rtc: Option<&Rtc>) -> (Vec<f32>, Captured) {
    let mut got = Captured::new();
    let mut sink = |name: &str, shape: &[usize], data: &[f32]| {
        got.insert(name.to_owned(), (shape.to_vec(), data.to_vec()));
    };
    let out = head
        .forward(inp, rtc, &mut Taps::new(&mut sink))
        .expect("forward");
    (out, got)
}

#[test]
fn head_matches_every_golden_action_head_and_flow_tap() {
    let taps = n17_golden::taps();
    let head = load_head();
    let g = GoldenInputs::read(&taps);
    let (out, got) = run(&head, &g.inputs(), None);
    let mut names: Vec<&String> = taps
        .f32s
        .keys()
        .filter(|n| n.starts_with("action_head.") || n.starts_with("flow."))
        .collect();
    names.sort();
    // 6 action_head taps + 4 steps x 16 float taps (the timestep is i64, checked below) +
    // flow.action_pred.
    assert_eq!(names.len(), 6 + 4 * 16 + 1, "{names:?}");
    let mut pairs = Vec::new();
    for n in &names {
        let (want_shape, want) = &taps.f32s[n.as_str()];
        let (shape, data) = got
            .get(n.as_str())
            .unwrap_or_else(|| panic!("tap {n} not emitted"));
        assert_eq!(shape, want_shape, "{n}: shape");
        let worst = data
            .iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        println!("{n}: worst |diff| {worst:.3e}");
        pairs.push((n.as_str(), data.as_slice(), want.as_slice()));
    }
    assert_all_close(pairs);
    assert_all_close([(
        "return value",
        &out[..],
        &taps.f32s["flow.action_pred"].1[..],
    )]);
    for k in 0..4 {
        let want = taps.i64s[&format!("flow.step{k}.timestep")].1[0];
        assert_eq!(head.timestep(k), want, "flow.step{k}.timestep");
    }
}

#[test]
fn rtc_with_nothing_overlapping_is_the_plain_forward() {
    let taps = n17_golden::taps();
    let head = load_head();
    let g = GoldenInputs::read(&taps);
    let rtc = Rtc {
        previous_chunk: vec![7.0; 40 * 132],
        action_horizon: 40,
        overlap_steps: 0,
        frozen_steps: 0,
        ramp_rate: 6.0,
    };
    let (plain, _) = run(&head, &g.inputs(), None);
    let (with_rtc, _) = run(&head, &g.inputs(), Some(&rtc));
    assert_eq!(plain, with_rtc);
}

#[test]
fn rtc_inpaints_freezes_and_ramps_the_overlap() {
    let taps = n17_golden::taps();
    let head = load_head();
    let g = GoldenInputs::read(&taps);
    let ad = 132;
    // A recognisable previous chunk; only its rows 30..35 (h = 35, overlap 5) are used.
    let previous: Vec<f32> = (0..40 * ad)
        .map(|i| ((i % 97) as f32) * 0.01 - 0.5)
        .collect();
    let rtc = Rtc {
        previous_chunk: previous.clone(),
        action_horizon: 35,
        overlap_steps: 5,
        frozen_steps: 2,
        ramp_rate: 6.0,
    };
    let (out, got) = run(&head, &g.inputs(), Some(&rtc));
    let x0 = &got["flow.step0.actions_in"].1;
    assert_eq!(
        &x0[..5 * ad],
        &previous[30 * ad..35 * ad],
        "in-painted rows"
    );
    assert_eq!(&x0[5 * ad..], &g.noise[5 * ad..], "noise after the overlap");
    // Frozen rows never move.
    assert_eq!(&out[..2 * ad], &previous[30 * ad..32 * ad]);
    // Every row followed x += 0.25·v·m with the hand-checked mask (see the mask test).
    let mask = rtc.velocity_mask(40);
    let mut x = x0.clone();
    for k in 0..4 {
        let v = &got[&format!("flow.step{k}.velocity")].1;
        for (i, (xv, vv)) in x.iter_mut().zip(v).enumerate() {
            *xv += 0.25 * vv * mask[i / ad];
        }
    }
    assert_eq!(out, x);
    // The ramp rows moved, by less than the free rows would have.
    assert!(out[2 * ad..5 * ad] != previous[32 * ad..35 * ad]);
}

#[test]
fn rtc_velocity_mask_matches_hand_computed_values() {
    let mask = |o, f, r: f32| {
        Rtc {
            previous_chunk: vec![0.0; 40 * 132],
            action_horizon: 40,
            overlap_steps: o,
            frozen_steps: f,
            ramp_rate: r,
        }
        .velocity_mask(40)
    };
    // Expected values by hand: t = linspace(0, 1, o - f + 2)[1..-1], ramp = (1 - e^(-r t)) /
    // (1 - e^(-r)); e.g. o 5, f 1, r 6: t = 0.2 → (1 - e^-1.2) / (1 - e^-6) = 0.698806 /
    // 0.997521 = 0.700542. Checked with numpy:
    // ((1-np.exp(-r*t))/(1-np.exp(-r)))[1:-1] for t = np.linspace(0, 1, o-f+2).
    let cases: [(usize, usize, f32, &[f64]); 3] = [
        (5, 1, 6.0, &[0.70054226, 0.91154153, 0.97509329, 0.99423471]),
        (3, 0, 2.0, &[0.45505423, 0.73105858, 0.89846368]),
        (
            10,
            4,
            6.0,
            &[
                0.57705754, 0.82194509, 0.92586871, 0.96997108, 0.98868692, 0.99662942,
            ],
        ),
    ];
    for (o, f, r, ramp) in cases {
        let m = mask(o, f, r);
        assert_eq!(m.len(), 40);
        assert!(m[..f].iter().all(|&v| v == 0.0), "frozen rows of {o}/{f}");
        for (j, &want) in ramp.iter().enumerate() {
            let got = m[f + j];
            assert!(
                (got as f64 - want).abs() < 1e-6,
                "{o}/{f}/{r} row {}: {got} vs {want}",
                f + j
            );
        }
        assert!(m[o..].iter().all(|&v| v == 1.0), "free rows of {o}/{f}");
    }
    // Frozen = overlap: no ramp rows, a hard step.
    let m = mask(4, 4, 6.0);
    assert_eq!(&m[..5], &[0.0, 0.0, 0.0, 0.0, 1.0]);
}

#[test]
fn rtc_validation_names_the_field() {
    let ok = Rtc {
        previous_chunk: vec![0.0; 40 * 132],
        action_horizon: 40,
        overlap_steps: 8,
        frozen_steps: 3,
        ramp_rate: 6.0,
    };
    assert_eq!(ok.validate(40, 132), Ok(()));
    let cases: Vec<(Rtc, &str)> = vec![
        (
            Rtc {
                previous_chunk: vec![0.0; 39 * 132],
                ..ok.clone()
            },
            "previous_chunk",
        ),
        (
            Rtc {
                previous_chunk: {
                    let mut v = vec![0.0; 40 * 132];
                    v[17] = f32::NAN;
                    v
                },
                ..ok.clone()
            },
            "previous_chunk",
        ),
        (
            Rtc {
                action_horizon: 41,
                ..ok.clone()
            },
            "action_horizon",
        ),
        (
            Rtc {
                action_horizon: 0,
                overlap_steps: 0,
                frozen_steps: 0,
                ..ok.clone()
            },
            "action_horizon",
        ),
        (
            Rtc {
                action_horizon: 6,
                ..ok.clone()
            },
            "overlap_steps",
        ),
        (
            Rtc {
                frozen_steps: 9,
                ..ok.clone()
            },
            "frozen_steps",
        ),
        (
            Rtc {
                ramp_rate: 0.0,
                ..ok.clone()
            },
            "ramp_rate",
        ),
        (
            Rtc {
                ramp_rate: f32::INFINITY,
                ..ok.clone()
            },
            "ramp_rate",
        ),
    ];
    for (rtc, field) in cases {
        let e = rtc.validate(40, 132).unwrap_err();
        assert_eq!(e.field(), field, "{e}");
        assert!(e.to_string().starts_with(field), "{e}");
    }
    assert!(matches!(
        ok.validate(40, 100),
        Err(RtcError::PreviousChunkShape {
            got: 5280,
            rows: 40,
            cols: 100
        })
    ));
}

#[test]
fn forward_refuses_bad_rtc_and_bad_inputs_by_name() {
    let taps = n17_golden::taps();
    let head = load_head();
    let g = GoldenInputs::read(&taps);
    let rtc = Rtc {
        previous_chunk: vec![0.0; 40 * 132],
        action_horizon: 40,
        overlap_steps: 4,
        frozen_steps: 5,
        ramp_rate: 6.0,
    };
    let e = head
        .forward(&g.inputs(), Some(&rtc), &mut Taps::none())
        .unwrap_err();
    assert!(matches!(e, HeadError::Rtc(RtcError::Frozen { .. })), "{e}");
    assert!(e.to_string().starts_with("rtc.frozen_steps"), "{e}");
    let short_state = &g.state[..131];
    let inp = HeadInputs {
        state: short_state,
        ..g.inputs()
    };
    let e = head.forward(&inp, None, &mut Taps::none()).unwrap_err();
    assert!(matches!(e, HeadError::Input { field: "state", .. }), "{e}");
    let inp = HeadInputs {
        embodiment_id: 32,
        ..g.inputs()
    };
    let e = head.forward(&inp, None, &mut Taps::none()).unwrap_err();
    assert!(
        matches!(
            e,
            HeadError::Input {
                field: "embodiment_id",
                ..
            }
        ),
        "{e}"
    );
    let no_text = vec![false; g.attention_mask.len()];
    let inp = HeadInputs {
        attention_mask: &no_text,
        ..g.inputs()
    };
    let e = head.forward(&inp, None, &mut Taps::none()).unwrap_err();
    assert!(
        matches!(
            e,
            HeadError::Input {
                field: "attention_mask",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn attention_mask_drops_tokens_from_the_dit_context_only() {
    // Masking out one text token must change the chunk (the DiT's text blocks no longer see
    // it) but not the VL embeddings (the VL self-attention is unmasked in the reference).
    let taps = n17_golden::taps();
    let head = load_head();
    let g = GoldenInputs::read(&taps);
    let mut mask = g.attention_mask.clone();
    let first_text = g.image_mask.iter().position(|&im| !im).unwrap();
    mask[first_text] = false;
    let inp = HeadInputs {
        attention_mask: &mask,
        ..g.inputs()
    };
    let (out, got) = run(&head, &inp, None);
    assert_all_close([(
        "action_head.vl_embeds",
        &got["action_head.vl_embeds"].1[..],
        &taps.f32s["action_head.vl_embeds"].1[..],
    )]);
    assert!(n17_golden::mismatch("chunk", &out, &taps.f32s["flow.action_pred"].1).is_some());
}

#[test]
fn config_reads_case1_from_the_file() {
    let c = case1_config();
    assert_eq!(c.model_type, "Gr00tN1d7");
    assert_eq!(c.model_name, "nvidia/Cosmos-Reason2-2B");
    assert_eq!(c.select_layer, 4);
    assert_eq!(
        (
            c.backbone_embedding_dim,
            c.hidden_size,
            c.input_embedding_dim
        ),
        (32, 24, 40)
    );
    assert_eq!((c.max_state_dim, c.max_action_dim), (132, 132));
    assert_eq!((c.action_horizon, c.state_history_length), (40, 1));
    assert_eq!(
        (c.num_inference_timesteps, c.num_timestep_buckets),
        (4, 1000)
    );
    assert!(c.use_vlln && c.use_alternate_vl_dit && c.add_pos_embed);
    assert_eq!(c.attend_text_every_n_blocks, 2);
    let d = &c.diffusion_model_cfg;
    assert_eq!(
        (
            d.num_layers,
            d.num_attention_heads,
            d.attention_head_dim,
            d.output_dim
        ),
        (8, 4, 10, 24)
    );
    assert_eq!(d.positional_embeddings, None);
    let s = c
        .vl_self_attention_cfg
        .as_ref()
        .expect("vl_self_attention_cfg");
    assert_eq!(
        (s.num_layers, s.num_attention_heads, s.attention_head_dim),
        (2, 2, 16)
    );
    assert_eq!((c.max_num_embodiments, c.max_seq_len), (32, 1024));
    assert!(!c.apply_sincos_state_encoding && c.use_percentiles && c.use_relative_action);
    assert_eq!(c.image_crop_size, Some([230, 230]));
    assert_eq!(c.image_target_size, Some([256, 256]));
    assert_eq!(c.shortest_image_edge, None);
}

fn case1_json() -> serde_json::Value {
    let text = std::fs::read_to_string(case_dir().join("config.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn parse(v: &serde_json::Value) -> Result<N17Config, N17ConfigError> {
    N17Config::from_json_str(&v.to_string(), Path::new("edited/config.json"))
}

#[test]
fn config_errors_name_the_file_and_field() {
    let mut v = case1_json();
    v.as_object_mut().unwrap().remove("select_layer");
    let e = parse(&v).unwrap_err();
    assert!(
        matches!(&e, N17ConfigError::Missing { field, .. } if field == "select_layer"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "edited/config.json: missing field `select_layer`"
    );

    let mut v = case1_json();
    v["diffusion_model_cfg"]["num_layers"] = serde_json::json!("8");
    let e = parse(&v).unwrap_err();
    assert!(
        matches!(&e, N17ConfigError::Type { field, .. } if field == "diffusion_model_cfg.num_layers"),
        "{e}"
    );
    assert!(e.to_string().contains("edited/config.json"), "{e}");
    assert!(
        e.to_string().contains("`diffusion_model_cfg.num_layers`"),
        "{e}"
    );

    let mut v = case1_json();
    v["use_vlln"] = serde_json::json!(1);
    let e = parse(&v).unwrap_err();
    assert!(
        matches!(&e, N17ConfigError::Type { field, .. } if field == "use_vlln"),
        "{e}"
    );

    // A constraint between fields is charged to one of them.
    let mut v = case1_json();
    v["diffusion_model_cfg"]["output_dim"] = serde_json::json!(25);
    let e = parse(&v).unwrap_err();
    match &e {
        N17ConfigError::Invalid { problems, .. } => {
            assert_eq!(problems.0[0].field, "diffusion_model_cfg.output_dim", "{e}")
        }
        other => panic!("{other}"),
    }

    // Absent positional_embeddings means diffusers' "sinusoidal", which the head refuses.
    let mut v = case1_json();
    v["vl_self_attention_cfg"]
        .as_object_mut()
        .unwrap()
        .remove("positional_embeddings");
    let e = parse(&v).unwrap_err();
    assert!(
        e.to_string()
            .contains("vl_self_attention_cfg.positional_embeddings"),
        "{e}"
    );

    let e = N17Config::from_file(Path::new("/nonexistent/config.json")).unwrap_err();
    assert!(
        matches!(e, N17ConfigError::File(JsonFileError::Io { .. })),
        "{e}"
    );
}

#[test]
fn config_without_vl_self_attention_has_no_stack() {
    let mut v = case1_json();
    v.as_object_mut().unwrap().remove("vl_self_attention_cfg");
    assert_eq!(parse(&v).unwrap().vl_self_attention_cfg, None);
    let mut v = case1_json();
    v["vl_self_attention_cfg"]["num_layers"] = serde_json::json!(0);
    assert_eq!(parse(&v).unwrap().vl_self_attention_cfg, None);
}

#[test]
fn version_detection_tells_n16_from_n17() {
    assert_eq!(
        detect_version_file(&case_dir().join("config.json")).unwrap(),
        GrootVersion::N17
    );
    assert_eq!(
        detect_version_file(&n16_config_path()).unwrap(),
        GrootVersion::N16
    );
    // By architectures when model_type is absent.
    let v = serde_json::json!({"architectures": ["Gr00tN1d7"]});
    assert_eq!(detect_version(&v), Some(GrootVersion::N17));
    let v = serde_json::json!({"model_type": "llama"});
    assert_eq!(detect_version(&v), None);
    // An N1.6 file is not an N1.7 configuration.
    let e = N17Config::from_file(&n16_config_path()).unwrap_err();
    assert!(
        matches!(&e, N17ConfigError::UnknownModel { found: Some(t), .. } if t == "Gr00tN1d6"),
        "{e}"
    );
}

#[test]
fn released_config_has_the_published_shapes() {
    let c = N17Config::released_3b();
    c.validate().expect("released config validates");
    assert_eq!(c.select_layer, 16);
    assert_eq!(c.diffusion_model_cfg.num_layers, 32);
    assert_eq!(c.vl_self_attention_cfg.as_ref().unwrap().num_layers, 4);
    let g = head_config(&c);
    assert_eq!(
        (g.max_state_dim, g.max_action_dim, g.action_horizon),
        (132, 132, 40)
    );
    assert_eq!((g.input_embedding_dim, g.hidden_size), (1536, 1024));
}

#[test]
#[ignore = "full-size: ~1.6 G bf16 parameters generated in memory (~3 GB); ~45 s on the shared 2-core box, run with --ignored"]
fn full_size_random_weights_give_finite_chunk() {
    let cfg = N17Config::released_3b();
    let ws = RandomWeights {
        seed: 1701,
        dtype: DType::Bf16,
    };
    let head = N17ActionHead::load(&ws, &cfg).expect("build full-size head");
    // 279 tokens like case1: 256 image tokens between 12 + 11 text tokens.
    let seq = 279;
    let image_mask: Vec<bool> = (0..seq).map(|t| (12..268).contains(&t)).collect();
    let attention_mask = vec![true; seq];
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let features: Vec<f32> = (0..seq * 2048).map(|_| rnd() * 3.0).collect();
    let state: Vec<f32> = (0..132).map(|i| if i < 17 { rnd() } else { 0.0 }).collect();
    let noise: Vec<f32> = (0..40 * 132).map(|_| rnd() * 1.7).collect();
    let inp = HeadInputs {
        features: &features,
        image_mask: &image_mask,
        attention_mask: &attention_mask,
        state: &state,
        embodiment_id: 24,
        noise: &noise,
    };
    let (out, got) = run(&head, &inp, None);
    for (name, (_, data)) in &got {
        assert!(data.iter().all(|v| v.is_finite()), "{name} not finite");
    }
    assert_eq!(out.len(), 40 * 132);
    assert_eq!(got["action_head.vl_self_attn.block3"].0, vec![1, seq, 2048]);
    assert_eq!(got["action_head.state_features"].0, vec![1, 1, 1536]);
    assert_eq!(got["flow.step3.dit_block31"].0, vec![1, 41, 1536]);
    assert_eq!(got["flow.step3.dit_output"].0, vec![1, 41, 1024]);
    assert_eq!(got["flow.step3.decoder_output"].0, vec![1, 41, 132]);
    assert!(out.iter().zip(&noise).any(|(a, b)| (a - b).abs() > 1e-3));
}
