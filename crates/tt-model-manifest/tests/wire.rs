//! The wire manifest (`tt_kernel_manifest.json`): construction, lossless round trip, reading
//! rules.

use crate::common;

use tt_model_manifest::wire::{ComponentBuild, GitPin, TtMetalBuild, WireBuild, WireError};
use tt_model_manifest::{Built, ImageRef, Producer, WireManifest};

fn build() -> WireBuild {
    WireBuild {
        image: ImageRef {
            registry: "hf".into(),
            repository: "m".into(),
            tag: Some("7c2773460298".into()),
            digest: Some("sha256:abc".into()),
        },
        runtime: None,
        built: Built {
            image: "tt-model/m:7c2773460298".into(),
            image_digest: Some("sha256:abc".into()),
            repo: Some("acme/m".into()),
            tt_model_version: "0.1.0".into(),
            created_at: "2026-11-30T00:00:00Z".into(),
            tt_metal: TtMetalBuild {
                sha: Some("668c2907575".into()),
                scm_version: Some("0.79.0".into()),
                mode: Some("local".into()),
                ..TtMetalBuild::default()
            },
            code_sha256: Some("00".into()),
            vllm: None,
            plugin: Some(ComponentBuild {
                path: Some("p".into()),
                sha: Some("1234".into()),
                dirty: Some(false),
                ..ComponentBuild::default()
            }),
            cargo: None,
            base_images: [("runtime".to_string(), "base@sha256:01".to_string())].into(),
            context_sha256: Some("02".into()),
            extra_code: vec![GitPin {
                repo: "https://example.com/x.git".into(),
                git_ref: "v1".into(),
                sha: "03".into(),
            }],
            extra: Default::default(),
        },
        producer: Producer {
            tt_kernel_version: "0.1.0".into(),
            created_at: "2026-11-30T00:00:00Z".into(),
            hostname: "host".into(),
        },
    }
}

fn manifest(src: &str) -> tt_model_manifest::Manifest {
    common::check(src).manifest.expect("valid")
}

#[test]
fn from_manifest_fills_the_container_block() {
    let wire = WireManifest::from_manifest(&manifest(common::BASE), build());
    assert_eq!(wire.schema_version, "5.1");
    assert_eq!(wire.tt_metal_version, "0.79.0");
    assert_eq!(wire.device_count, 1);
    assert_eq!(wire.weights.as_ref().unwrap().repo_id, "acme/w");
    assert_eq!(
        wire.container.serve_profiles.len(),
        1,
        "a default profile is synthesized"
    );
    assert_eq!(wire.container.default_profile, "default");
    assert_eq!(wire.container.code_dir, "code");
    let json: serde_json::Value = serde_json::from_str(&wire.to_json()).unwrap();
    assert_eq!(json["weights"]["repo_id"], "acme/w");
    assert!(
        json["weights"].get("repo").is_none(),
        "one spelling is written"
    );
    assert_eq!(json["container"]["runtime"]["vllm"]["version"], "0.10.1");
    assert_eq!(json["bundled"], serde_json::Value::Null);
    assert_eq!(json["env"], serde_json::json!({}));
    // tt-model's extensions of `built`, under the keys and in the order it has always written.
    let built = &json["container"]["built"];
    assert_eq!(built["base_images"]["runtime"], "base@sha256:01");
    assert_eq!(built["context_sha256"], "02");
    assert_eq!(built["extra_code"][0]["ref"], "v1");
    let keys: Vec<&str> = built
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys[keys.len() - 3..],
        ["base_images", "context_sha256", "extra_code"]
    );
}

#[test]
fn a_flat_manifest_and_one_explicit_default_profile_give_the_same_wire() {
    let flat = WireManifest::from_manifest(&manifest(common::BASE), build());
    let explicit = common::BASE.replace("serve: {", "serve_profiles: [{name: default}]\nserve: {");
    let explicit = WireManifest::from_manifest(&manifest(&explicit), build());
    assert_eq!(flat.to_json(), explicit.to_json());
}

#[test]
fn json_round_trip_is_lossless() {
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gr00t-n1.6-3b-p150/tt-model.yaml"
    ))
    .unwrap();
    let wire = WireManifest::from_manifest(&manifest(&src), build());
    let text = wire.to_json();
    let back = WireManifest::from_json(&text).expect("reads its own output");
    assert_eq!(back, wire);
    assert_eq!(back.to_json(), text);
}

#[test]
fn unknown_keys_survive_and_repo_is_accepted_on_read() {
    let mut json: serde_json::Value = serde_json::from_str(
        &WireManifest::from_manifest(&manifest(common::BASE), build()).to_json(),
    )
    .unwrap();
    json["weights"] = serde_json::json!({"repo": "acme/w", "revision": "r"});
    json["future_top"] = serde_json::json!({"x": 1});
    json["container"]["future_container"] = serde_json::json!([1, 2]);
    json["container"]["built"]["future_built"] = serde_json::json!("y");
    let wire = WireManifest::from_json(&json.to_string()).unwrap();
    let weights = wire.weights.as_ref().unwrap();
    assert_eq!(weights.repo_id, "acme/w");
    assert_eq!(weights.repo_type, "model");
    let out: serde_json::Value = serde_json::from_str(&wire.to_json()).unwrap();
    assert_eq!(out["future_top"], serde_json::json!({"x": 1}));
    assert_eq!(
        out["container"]["future_container"],
        serde_json::json!([1, 2])
    );
    assert_eq!(out["container"]["built"]["future_built"], "y");
    assert_eq!(out["weights"]["repo_id"], "acme/w");
}

#[test]
fn other_schemas_and_bad_json_are_refused() {
    let err = WireManifest::from_json(r#"{"schema_version": "7", "container": {}}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unsupported bundle schema_version '7'; this tt-model reads schema(s) 5.1. Re-publish the bundle with a current tt-model."
    );
    assert!(matches!(
        WireManifest::from_json(r#"{"schema_version": "5.1", "bundled": {}}"#),
        Err(WireError::NotAContainer)
    ));
    let err = WireManifest::from_json("{\n  \"schema_version\": \"5.1\",\n  oops\n}").unwrap_err();
    assert!(matches!(err, WireError::Json { line: 3, .. }), "{err}");
}

/// A document as the Python original may write it: `null` for unset lists, maps, settings and
/// the registry, and none of the informational fields a hand-written package leaves out.
#[test]
fn python_nulls_and_missing_informational_fields_are_read_as_unset() {
    let json = serde_json::json!({
        "schema_version": "5.1",
        "name": "qwen",
        "weights": {"repo_id": "Qwen/Qwen3-8B", "revision": "abc", "allow_patterns": ["*.json"], "ignore_patterns": null},
        "auxiliary_weights": null,
        "container": {
            "image": {"registry": null, "repository": "tt-model/qwen", "tag": "7c27", "digest": null},
            "kind": "vllm-plugin",
            "runtime": null,
            "serve": {"hardware": "p150", "mesh_device": "P150", "max_num_seqs": 32, "args": null, "env": null,
                      "capabilities": {"tool_parser": "hermes", "reasoning_parser": "qwen3"}},
            "serve_profiles": [
                {"name": "p150", "description": null, "args": null},
                {"name": "p150x4", "hardware": "p150x4", "mesh_device": "P150x4", "env": {"B": "2"}, "capabilities": {"tool_parser": "x"}}
            ],
            "default_profile": null,
            "verify": null
        }
    });
    let wire = WireManifest::from_json(&json.to_string()).expect("tolerant read");
    assert_eq!(wire.arch, None);
    assert_eq!(wire.device_count, 1);
    assert_eq!(wire.tt_metal_version, "unknown");
    assert!(wire.weights.as_ref().unwrap().ignore_patterns.is_empty());
    assert_eq!(wire.container.image.registry, "hf");
    assert!(wire.container.serve.args.is_empty());
    let (profile, settings) = wire.resolve_profile(None).unwrap();
    assert_eq!(profile.name, "p150", "no default_profile: the first");
    assert_eq!(settings.max_num_seqs, Some(32));
    let (_, big) = wire.resolve_profile(Some("p150x4")).unwrap();
    let caps = big.capabilities.unwrap();
    assert_eq!(
        (
            caps.tool_parser.as_deref(),
            caps.reasoning_parser.as_deref()
        ),
        (Some("x"), Some("qwen3")),
        "dicts recurse"
    );
    assert_eq!(big.env.get("B").map(String::as_str), Some("2"));
}

#[test]
fn unsafe_names_and_bad_settings_are_refused() {
    let doc = |name: &str, serve: serde_json::Value| {
        serde_json::json!({"schema_version": "5.1", "name": name, "container": {"image": {}, "serve": serve}})
            .to_string()
    };
    for bad in ["../x", ".hidden", "a b", ""] {
        assert!(
            matches!(WireManifest::from_json(&doc(bad, serde_json::json!({}))), Err(WireError::UnsafeName(n)) if n == bad),
            "{bad:?}"
        );
    }
    let err = WireManifest::from_json(&doc("x", serde_json::json!({"max_num_seqs": "many"})))
        .unwrap_err();
    assert!(matches!(err, WireError::Json { .. }), "{err}");
}

#[test]
fn read_names_the_file() {
    let dir = std::env::temp_dir().join(format!("tt-model-wire-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tt_kernel_manifest.json");
    std::fs::write(&path, r#"{"schema_version": "5", "container": {}}"#).unwrap();
    let err = WireManifest::read(&path).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}: Unsupported bundle schema_version '5'",
            path.display()
        )),
        "{err}"
    );
    let missing = WireManifest::read(&dir.join("nope.json")).unwrap_err();
    assert!(matches!(
        missing,
        tt_model_manifest::wire::WireReadError::Io { .. }
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resolve_profile_merges_and_names_the_available_ones() {
    let src = format!(
        "{}serve_profiles:\n  - {{name: a}}\n  - {{name: b, max_num_seqs: 4}}\ndefault_profile: b\n",
        common::BASE
    );
    let wire = WireManifest::from_manifest(&manifest(&src), build());
    let (profile, settings) = wire.resolve_profile(None).unwrap();
    assert_eq!(profile.name, "b");
    assert_eq!(settings.max_num_seqs, Some(4));
    assert_eq!(settings.hardware.as_deref(), Some("p150"));
    let err = wire.resolve_profile(Some("c")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no serve profile named 'c'; available: a, b"
    );
}

#[test]
fn pull_refs() {
    let mut image = build().image;
    assert_eq!(image.pull_ref(), None);
    image.registry = "ghcr.io/acme".into();
    assert_eq!(
        image.pull_ref().as_deref(),
        Some("ghcr.io/acme/m@sha256:abc")
    );
    image.digest = None;
    assert_eq!(
        image.pull_ref().as_deref(),
        Some("ghcr.io/acme/m:7c2773460298")
    );
}
