//! The settings read from the environment: defaults, refusals, what each backend gets.

use super::*;

fn vars(kv: &[(&str, &str)]) -> HashMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn seed_manifest_env_is_accepted() {
    let s = Settings::from_vars(&vars(&[
        (
            "TT_WEIGHTS_REVISION",
            "d0814e7ecb19202e7c8468b46098b0b7ef3a6d61",
        ),
        ("GR00T_VERSION", "n16"),
        ("GR00T_EMBODIMENT", "gr1"),
        ("GR00T_LAYOUT", "gr1"),
        ("GR00T_POLICY", "mixed_dit"),
        ("GR00T_DIT_BACKEND", "megakernel"),
        ("GR00T_MK_ARENA_DTYPE", "auto"),
        ("GR00T_NUM_CQS", "2"),
        ("GR00T_TOKENIZER_DIR", "/opt/tok"),
        ("GR00T_TT_CACHE", "/weight-cache/gr00t-tt"),
        ("GR00T_WARMUP_RUNS", "3"),
        ("GR00T_WARMUP_PCC_MIN", "0.999"),
        ("TT_MESH_SHAPE", "1x1"),
        ("HF_HOME", "/hf"),
    ]))
    .unwrap();
    assert_eq!(s.warmup_runs, 3);
    assert_eq!(s.mk_device, "emulator");
    assert_eq!(s.mk_device_timeout, Duration::from_secs(30));
    assert_eq!(
        (s.mk_chain, s.mk_replay),
        (true, true),
        "chained and replayed by default"
    );
    let mk = s.megakernel().unwrap();
    assert_eq!(
        mk.dtype,
        tt_blackhole::format::ArenaDtype::Bfp8B,
        "auto is bfp8_b"
    );
    assert_eq!(mk.cache_dir, Some(PathBuf::from("/weight-cache/gr00t-tt")));
    let card = Settings::from_vars(&vars(&[
        ("GR00T_MK_DEVICE", "p150a"),
        ("GR00T_MK_DEVICE_TIMEOUT_S", "2.5"),
    ]))
    .unwrap()
    .megakernel()
    .unwrap();
    assert_eq!(
        (card.device.as_str(), card.device_timeout),
        ("p150a", Duration::from_millis(2500))
    );
    let apart = Settings::from_vars(&vars(&[("GR00T_MK_CHAIN", "0"), ("GR00T_MK_REPLAY", "0")]))
        .unwrap()
        .megakernel()
        .unwrap();
    assert_eq!((apart.chain, apart.replay), (false, false));
    assert!(
        s.mk_head_on_device,
        "the head goes on the device by default"
    );
    let host_led = Settings::from_vars(&vars(&[("GR00T_MK_HEAD", "host")])).unwrap();
    assert!(!host_led.mk_head_on_device);
    let e = Settings::from_vars(&vars(&[("GR00T_MK_HEAD", "gpu")])).unwrap_err();
    assert!(e.to_string().contains("GR00T_MK_HEAD"), "{e}");
    assert_eq!(s.warmup_pcc_min, Some(0.999));
    assert_eq!(s.max_instruction_tokens(), Some(24));
    assert_eq!(s.hf_home, PathBuf::from("/hf"));
    assert_eq!(s.hf_hub_cache, PathBuf::from("/hf/hub"));
    let mut v = vars(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/hf-hub")]);
    assert_eq!(
        Settings::from_vars(&v).unwrap().hf_hub_cache,
        PathBuf::from("/hf-hub"),
        "HF_HUB_CACHE wins, as in huggingface_hub"
    );
    v.remove("HF_HUB_CACHE");
    assert_eq!(
        Settings::from_vars(&v).unwrap().hf_hub_cache,
        PathBuf::from("/hf/hub")
    );
}

#[test]
fn bad_values_give_one_line_reasons() {
    for (kv, needle) in [
        (
            vec![("GR00T_VERSION", "n15")],
            "GR00T_VERSION=\"n15\" is not one of n16",
        ),
        (
            vec![
                ("GR00T_LAYOUT", "gr1"),
                ("GR00T_EMBODIMENT", "libero_panda"),
            ],
            "GR00T_LAYOUT=gr1",
        ),
        (vec![("GR00T_DIT_BACKEND", "cuda")], "GR00T_DIT_BACKEND"),
        (
            vec![
                ("GR00T_MK_ARENA_DTYPE", "bfp8_b"),
                ("GR00T_DIT_BACKEND", "ttnn"),
            ],
            "only applies",
        ),
        (vec![("GR00T_NUM_CQS", "3")], "GR00T_NUM_CQS"),
        (vec![("GR00T_WARMUP_RUNS", "-1")], "GR00T_WARMUP_RUNS"),
        (
            vec![("GR00T_WARMUP_PCC_MIN", "high")],
            "GR00T_WARMUP_PCC_MIN",
        ),
        (
            vec![("GR00T_WARMUP_PCC_MIN", "0.9"), ("GR00T_WARMUP_RUNS", "0")],
            "needs a warm-up run",
        ),
        (vec![("TT_MESH_SHAPE", "2x4")], "one device"),
        (vec![("TT_MESH_SHAPE", "banana")], "TT_MESH_SHAPE"),
        (vec![("TT_WEIGHTS_REVISION", "../x")], "TT_WEIGHTS_REVISION"),
        (vec![("GR00T_EMBODIMENT", "gr1/../x")], "GR00T_EMBODIMENT"),
        (vec![("GR00T_POLICY", "int4")], "GR00T_POLICY"),
        (vec![("GR00T_MK_DEVICE", "gpu")], "GR00T_MK_DEVICE"),
        (
            vec![("GR00T_MK_DEVICE_TIMEOUT_S", "0")],
            "GR00T_MK_DEVICE_TIMEOUT_S",
        ),
        (
            vec![("GR00T_MK_DEVICE_TIMEOUT_S", "soon")],
            "GR00T_MK_DEVICE_TIMEOUT_S",
        ),
        (vec![("GR00T_MK_CHAIN", "no")], "GR00T_MK_CHAIN"),
        (vec![("GR00T_MK_REPLAY", "2")], "GR00T_MK_REPLAY"),
        (
            vec![("GR00T_TOKENIZER_REPO", "acme/proc")],
            "must be pinned",
        ),
        (vec![("GR00T_TOKENIZER_REVISION", "abc")], "go together"),
        (
            vec![
                ("GR00T_TOKENIZER_REPO", "noslash"),
                ("GR00T_TOKENIZER_REVISION", "abc"),
            ],
            "GR00T_TOKENIZER_REPO=\"noslash\"",
        ),
        (
            vec![
                ("GR00T_TOKENIZER_REPO", "acme/proc"),
                ("GR00T_TOKENIZER_REVISION", "../x"),
            ],
            "GR00T_TOKENIZER_REVISION=",
        ),
        (
            vec![
                ("GR00T_TOKENIZER_REPO", "acme/proc"),
                ("GR00T_TOKENIZER_REVISION", "abc"),
                ("GR00T_TOKENIZER_DIR", "/opt/tok"),
            ],
            "set one",
        ),
    ] {
        let msg = Settings::from_vars(&vars(&kv)).unwrap_err().to_string();
        assert!(msg.contains(needle), "{kv:?}: {msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
}

#[test]
fn the_tokenizer_snapshot_and_what_was_asked_are_kept() {
    let s = Settings::from_vars(&vars(&[
        (
            "GR00T_TOKENIZER_REPO",
            "tt-model-fixtures/cosmos-reason2-tiny",
        ),
        ("GR00T_TOKENIZER_REVISION", "0123abc"),
    ]))
    .unwrap();
    assert_eq!(
        s.tokenizer_snapshot,
        Some((
            "tt-model-fixtures/cosmos-reason2-tiny".to_owned(),
            "0123abc".to_owned()
        ))
    );
    // Unset: N1.6's defaults, and nothing recorded as asked for.
    assert_eq!((s.embodiment.as_str(), s.layout.as_str()), ("gr1", "gr1"));
    assert_eq!((s.embodiment_requested, s.layout_requested), (None, None));
    let s = Settings::from_vars(&vars(&[("GR00T_EMBODIMENT", "libero_sim")])).unwrap();
    assert_eq!(s.embodiment_requested.as_deref(), Some("libero_sim"));
    assert_eq!(s.layout, "dynamic");
}

#[test]
fn mesh_shapes_parse() {
    assert_eq!(parse_mesh_shape("1x1"), Some((1, 1)));
    assert_eq!(parse_mesh_shape("(1, 1)"), Some((1, 1)));
    assert_eq!(parse_mesh_shape("1,1"), Some((1, 1)));
    assert_eq!(parse_mesh_shape("0x1"), None);
}

#[test]
fn the_backbone_runs_on_the_host_unless_a_device_is_named_for_it() {
    let s = Settings::from_vars(&vars(&[])).unwrap();
    assert!(!s.backbone_on_device);
    assert!(!s.megakernel().unwrap().backbone_on_device);
    let on = Settings::from_vars(&vars(&[
        ("GR00T_BACKBONE_BACKEND", "device"),
        ("GR00T_DIT_BACKEND", "megakernel"),
        ("GR00T_MK_DEVICE", "sim"),
    ]))
    .unwrap();
    assert!(on.backbone_on_device && on.megakernel().unwrap().backbone_on_device);
    for (backend, device) in [("cpu", "emulator"), ("megakernel", "emulator")] {
        let e = Settings::from_vars(&vars(&[
            ("GR00T_BACKBONE_BACKEND", "device"),
            ("GR00T_DIT_BACKEND", backend),
            ("GR00T_MK_DEVICE", device),
        ]))
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("GR00T_BACKBONE_BACKEND=device") && msg.contains(device),
            "{msg}"
        );
    }
    let e = Settings::from_vars(&vars(&[("GR00T_BACKBONE_BACKEND", "gpu")])).unwrap_err();
    assert!(e.to_string().contains("GR00T_BACKBONE_BACKEND"), "{e}");
}
