//! Fleets rendered from run specs that the engine's own `compose` builds (as `serve` does),
//! pinned as insta snapshots and checked against Kubernetes 1.33's published schemas with
//! `kubernetes-validate --strict` (which must be installed under `CI`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tt_model_engine::run_spec::{Chips, HostFacts, RunSpec, ServeRequest, compose};
use tt_model_fleet::testing::{validate, validator_or_skip};
use tt_model_fleet::{Fleet, FleetError, FleetOptions, WeightsPin, render};

const DIGEST: &str = "sha256:8f3c2a1e5b7d9c0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081";
const REVISION: &str = "d0814e7ecb19202e7c8468b46098b0b7ef3a6d61";

/// A host as `serve --print` sees it; the fleet must not depend on any of it.
fn host(hugepages: bool, token: bool) -> HostFacts {
    HostFacts {
        uid: 4242,
        gid: 4242,
        rootless: false,
        hub_cache: PathBuf::from("/home/u/.cache/huggingface/hub"),
        state_dir: PathBuf::from("/home/u/.cache/tt-model/m"),
        hf_token_set: token,
        hugepages_1g: hugepages,
    }
}

fn request(kind: &str, chips: Chips, weights_on_host: bool, env: &[(&str, &str)]) -> ServeRequest {
    ServeRequest {
        package: "gr00t-n1.6-3b-p150-rs".into(),
        profile: "default".into(),
        image: "tt-model/gr00t-n1.6-3b-p150-rs:1".into(),
        target: ".".into(),
        kind: kind.into(),
        port: 20000,
        expose: false,
        health_path: "/health".into(),
        chips,
        weights_on_host,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        labels: BTreeMap::from([("tt.model.manifest_schema".into(), "5.1".into())]),
        cmd: vec![
            "gr00t-server".into(),
            "--host".into(),
            "0.0.0.0".into(),
            "--port".into(),
            "20000".into(),
        ],
        network: None,
    }
}

fn card_options(replicas: u32) -> FleetOptions {
    let mut o = FleetOptions::new(format!("ghcr.io/acme/gr00t-n1.6-3b-p150-rs@{DIGEST}"));
    o.replicas = replicas;
    o.namespace = Some("robots".into());
    o.chips = 1;
    o.board = Some("p150".into());
    o.weights = vec![WeightsPin {
        repo: "nvidia/GR00T-N1.6-3B".into(),
        revision: REVISION.into(),
    }];
    o.ready_line = Some("gr00t-server ready on".into());
    o
}

fn yaml_checked(spec: &RunSpec, opts: &FleetOptions) -> (Fleet, String) {
    let fleet = render(spec, opts).expect("renders");
    let yaml = fleet.to_yaml().expect("serializes");
    if let Some(v) = validator_or_skip()
        && let Err(report) = validate(&v, &yaml)
    {
        panic!("kubernetes-validate --strict refused the fleet:\n{report}\n{yaml}");
    }
    (fleet, yaml)
}

#[test]
fn card_fleet_of_four_replicas() {
    let spec = compose(
        &request(
            "http-server",
            Chips::Ids(vec![0]),
            true,
            &[("GR00T_MK_DEVICE", "p150a"), ("GR00T_NUM_CQS", "2")],
        ),
        &host(true, true),
    );
    let (fleet, yaml) = yaml_checked(&spec, &card_options(4));
    let dep = fleet.deployment.spec.as_ref().unwrap();
    assert_eq!(dep.replicas, Some(4));
    let pod = dep.template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    let res = c.resources.as_ref().unwrap();
    for m in [res.requests.as_ref().unwrap(), res.limits.as_ref().unwrap()] {
        assert_eq!(m["tenstorrent.com/p150"].0, "1");
        assert_eq!(m["hugepages-1Gi"].0, "1Gi");
    }
    let env: BTreeMap<_, _> = c
        .env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| (e.name.as_str(), e))
        .collect();
    assert_eq!(env["HF_HUB_OFFLINE"].value.as_deref(), Some("1"));
    assert!(
        !env.contains_key("HF_TOKEN"),
        "an offline server needs no token, even where the caller has one"
    );
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        sc.read_only_root_filesystem,
        Some(true),
        "http-server runs on a read-only root"
    );
    assert_eq!(
        pod.security_context.as_ref().unwrap().run_as_user,
        Some(1000)
    );
    assert!(
        !yaml.contains("4242") && !yaml.contains("/home/u"),
        "nothing of the printing host leaks in:\n{yaml}"
    );
    insta::assert_snapshot!("card_fleet_of_four_replicas", yaml);
}

#[test]
fn cpu_fleet_downloading_its_weights_takes_the_token_from_a_secret() {
    let spec = compose(
        &request(
            "tt-dit-server",
            Chips::None,
            false,
            &[("TT_MODEL_NO_DEVICE_CHECK", "1")],
        ),
        &host(false, true),
    );
    let mut opts = card_options(2);
    opts.chips = 0;
    opts.board = None;
    opts.namespace = None;
    opts.startup_timeout = Duration::from_secs(90);
    let (fleet, yaml) = yaml_checked(&spec, &opts);
    let pod = fleet
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .clone()
        .unwrap();
    let c = &pod.containers[0];
    let token = c
        .env
        .as_ref()
        .unwrap()
        .iter()
        .find(|e| e.name == "HF_TOKEN")
        .expect("HF_TOKEN");
    assert!(token.value.is_none(), "never inline");
    let secret = token
        .value_from
        .as_ref()
        .unwrap()
        .secret_key_ref
        .as_ref()
        .unwrap();
    assert_eq!(
        (secret.name.as_str(), secret.key.as_str()),
        ("hf-token", "token")
    );
    assert!(pod.node_selector.is_none(), "no card, no card host");
    assert!(
        !c.resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()
            .contains_key("hugepages-1Gi")
    );
    assert_eq!(
        c.security_context
            .as_ref()
            .unwrap()
            .read_only_root_filesystem,
        Some(false)
    );
    assert_eq!(
        c.startup_probe.as_ref().unwrap().failure_threshold,
        Some(9),
        "90 s in 10 s periods"
    );
    insta::assert_snapshot!("cpu_fleet_downloading_weights", yaml);
}

#[test]
fn four_chip_profile_asks_the_plugin_for_four_chips_under_another_resource_name() {
    let spec = compose(
        &request("vllm-plugin", Chips::All, true, &[]),
        &host(false, false),
    );
    let mut opts = card_options(1);
    opts.chips = 4;
    opts.board_resource = Some("squat.ai/tenstorrent".into());
    let (fleet, _) = yaml_checked(&spec, &opts);
    let c = &fleet
        .deployment
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers[0];
    let req = c.resources.as_ref().unwrap().requests.clone().unwrap();
    assert_eq!(req["squat.ai/tenstorrent"].0, "4");
    assert_eq!(req["hugepages-1Gi"].0, "4Gi");
    assert!(!req.contains_key("tenstorrent.com/p150"));
}

#[test]
fn refusals_name_what_to_fix() {
    let spec = compose(
        &request("http-server", Chips::Ids(vec![0]), true, &[]),
        &host(true, false),
    );
    let mut zero = card_options(0);
    assert!(matches!(
        render(&spec, &zero),
        Err(FleetError::ZeroReplicas)
    ));
    zero.replicas = 1;
    zero.image = "ghcr.io/acme/m:latest".into();
    assert!(matches!(
        render(&spec, &zero),
        Err(FleetError::NotPinned { .. })
    ));
    let mut boardless = card_options(1);
    boardless.board = None;
    let err = render(&spec, &boardless).unwrap_err();
    assert!(
        matches!(err, FleetError::NoBoard { .. }) && err.to_string().contains("--board-resource"),
        "{err}"
    );
    let mut bad = card_options(1);
    bad.board_resource = Some("p150".into());
    assert!(matches!(
        render(&spec, &bad),
        Err(FleetError::BadResourceName { .. })
    ));
}

/// kubectl reads YAML 1.1 (as does the validator's PyYAML): `on`, `no`, `12:30` or `0x1F` left
/// bare would arrive as booleans and numbers where the API wants strings.
#[test]
fn values_that_yaml_1_1_reads_as_booleans_or_numbers_stay_strings() {
    let tricky = [
        ("A_ON", "on"),
        ("B_NO", "no"),
        ("C_TIME", "12:30"),
        ("D_HEX", "0x1F"),
        ("E_NULL", "~"),
        ("F_EMPTY", ""),
    ];
    let spec = compose(
        &request("http-server", Chips::Ids(vec![0]), true, &tricky),
        &host(true, false),
    );
    let (_, yaml) = yaml_checked(&spec, &card_options(1));
    for (_, v) in tricky {
        assert!(
            yaml.contains(&format!("value: \"{v}\"")),
            "{v} is not quoted:\n{yaml}"
        );
    }
}
