//! Fleets rendered from run specs that the engine's own `compose` builds (as `serve` does),
//! pinned as insta snapshots and checked against Kubernetes 1.34's published schemas with
//! `kubernetes-validate --strict` (which must be installed under `CI`), in both forms of the
//! card: a DRA claim (the default) and an extended resource.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tt_model_engine::run_spec::{Chips, HostFacts, RunSpec, ServeRequest, compose};
use tt_model_fleet::{
    DeviceMode, Fleet, FleetError, FleetOptions, HAS_TT_LABEL, NFD_PCI_LABEL, WeightsPin,
    board_selector, render,
};
use tt_model_testkit::k8s::{validate, validator_or_skip};

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
    o.boards = 1;
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

/// The Deployment's pod template.
fn pod_spec(fleet: &Fleet) -> k8s_openapi::api::core::v1::PodSpec {
    let dep = fleet.deployment.spec.as_ref().expect("a deployment spec");
    dep.template.spec.clone().expect("a pod spec")
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
        assert_eq!(m["hugepages-1Gi"].0, "1Gi");
        assert!(
            !m.keys().any(|k| k.starts_with("tenstorrent.com/")),
            "DRA: the board comes from the claim, not an extended resource"
        );
    }
    // The container and the pod name the claim; the claim template selects one p150 by name.
    let claim = &res.claims.as_ref().unwrap()[0].name;
    let pod_claim = &pod.resource_claims.as_ref().unwrap()[0];
    assert_eq!(&pod_claim.name, claim);
    let template = fleet.claim_template.as_ref().expect("a claim template");
    assert_eq!(
        pod_claim.resource_claim_template_name.as_deref(),
        template.metadata.name.as_deref()
    );
    let request = &template
        .spec
        .spec
        .devices
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()[0];
    let exactly = request.exactly.as_ref().unwrap();
    assert_eq!(exactly.device_class_name, "tenstorrent.com");
    assert_eq!(
        (exactly.allocation_mode.as_deref(), exactly.count),
        (Some("ExactCount"), Some(1))
    );
    assert_eq!(
        exactly.selectors.as_ref().unwrap()[0]
            .cel
            .as_ref()
            .unwrap()
            .expression,
        board_selector("p150")
    );
    assert_on_card_as_the_vendor_runs_it(&fleet, claim);
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
    let pod = pod_spec(&fleet);
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
    assert!(
        pod.affinity.is_none() && pod.host_ipc.is_none() && pod.init_containers.is_none(),
        "no card: no card host, no host IPC, no hugepage cleanup"
    );
    assert!(fleet.claim_template.is_none() && pod.resource_claims.is_none());
    assert!(!yaml.contains("ResourceClaimTemplate"));
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
fn extended_four_chip_profile_asks_the_plugin_for_four_chips_under_another_resource_name() {
    let spec = compose(
        &request("vllm-plugin", Chips::All, true, &[]),
        &host(false, false),
    );
    let mut opts = card_options(1);
    opts.chips = 4;
    opts.boards = 4;
    opts.devices = DeviceMode::Extended;
    opts.board_resource = Some("squat.ai/tenstorrent".into());
    let (fleet, _) = yaml_checked(&spec, &opts);
    assert!(fleet.claim_template.is_none(), "extended: no DRA claim");
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
        matches!(err, FleetError::NoBoard { .. }) && err.to_string().contains("--devices extended"),
        "{err}"
    );
    // Without DRA no board is selected, so none is needed.
    boardless.devices = DeviceMode::Extended;
    assert!(render(&spec, &boardless).is_ok());
    let mut named = card_options(1);
    named.board_resource = Some("squat.ai/tenstorrent".into());
    assert!(matches!(
        render(&spec, &named),
        Err(FleetError::ResourceWithoutExtended { .. })
    ));
    let mut bad = card_options(1);
    bad.devices = DeviceMode::Extended;
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

/// What a pod on a card gets in both forms, as Tenstorrent's chart runs a server: host IPC, the
/// host's hugepages with a cleanup that holds the same card (`card` names it in the init
/// container's resources), and placement on the nodes tt-operator places its driver on.
fn assert_on_card_as_the_vendor_runs_it(fleet: &Fleet, card: &str) {
    let pod = fleet
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    assert_eq!(pod.host_ipc, Some(true));
    let hugepages = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find_map(|v| {
            v.host_path
                .as_ref()
                .filter(|h| h.path == "/dev/hugepages-1G")
        })
        .expect("the host's hugepages");
    assert_eq!(hugepages.type_.as_deref(), Some("Directory"));
    let init = &pod.init_containers.as_ref().expect("the cleanup")[0];
    assert_eq!(
        init.image, pod.containers[0].image,
        "the server's pinned image"
    );
    let ir = init.resources.as_ref().unwrap();
    let holds = ir.claims.iter().flatten().any(|c| c.name == card)
        || ir.requests.iter().flatten().any(|(k, _)| k == card);
    assert!(holds, "the cleanup holds the pod's card {card}: {ir:?}");
    let sc = init.security_context.as_ref().unwrap();
    assert_eq!(
        (sc.allow_privilege_escalation, sc.read_only_root_filesystem),
        (Some(false), Some(true))
    );
    let terms = &pod
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    let keys: Vec<&str> = terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(keys, [HAS_TT_LABEL, NFD_PCI_LABEL], "either label, ORed");
    assert!(pod.node_selector.is_none(), "no hand-made board label");
}

#[test]
fn p150x4_profile_claims_four_p150_boards_and_four_hugepages() {
    let spec = compose(
        &request("vllm-plugin", Chips::Ids(vec![0, 1, 2, 3]), true, &[]),
        &host(true, false),
    );
    let mut opts = card_options(2);
    opts.chips = 4;
    opts.boards = 4;
    let (fleet, yaml) = yaml_checked(&spec, &opts);
    let template = fleet.claim_template.as_ref().unwrap();
    let exactly = template
        .spec
        .spec
        .devices
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()[0]
        .exactly
        .clone()
        .unwrap();
    assert_eq!(exactly.count, Some(4), "one device per board, four boards");
    let cel = &exactly.selectors.unwrap()[0]
        .cel
        .clone()
        .unwrap()
        .expression;
    assert!(
        cel.contains(r#"device.attributes["tenstorrent.com"].boardName"#)
            && cel.ends_with(r#"== "p150""#),
        "{cel}"
    );
    let c = &fleet
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    let res = c.resources.as_ref().unwrap();
    assert_eq!(res.requests.as_ref().unwrap()["hugepages-1Gi"].0, "4Gi");
    assert_eq!(res.limits.as_ref().unwrap()["hugepages-1Gi"].0, "4Gi");
    assert!(
        yaml.starts_with("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"),
        "the template comes first, before the pods that claim from it:\n{yaml}"
    );
}

#[test]
fn extended_form_defaults_to_tenstorrent_chips() {
    let spec = compose(
        &request("http-server", Chips::Ids(vec![0, 1]), true, &[]),
        &host(true, false),
    );
    let mut opts = card_options(1);
    opts.chips = 2;
    opts.boards = 1;
    opts.board = Some("p300".into());
    opts.devices = DeviceMode::Extended;
    let (fleet, yaml) = yaml_checked(&spec, &opts);
    let pod = pod_spec(&fleet);
    let res = pod.containers[0].resources.clone().unwrap();
    for m in [res.requests.unwrap(), res.limits.unwrap()] {
        assert_eq!(m["tenstorrent.com/chip"].0, "2", "one unit per chip");
        assert_eq!(m["hugepages-1Gi"].0, "2Gi");
    }
    assert!(res.claims.is_none() && pod.resource_claims.is_none());
    assert!(!yaml.contains("ResourceClaimTemplate"));
    assert_on_card_as_the_vendor_runs_it(&fleet, "tenstorrent.com/chip");
    insta::assert_snapshot!("extended_fleet_of_one_p300", yaml);
}

/// `--kernel-cache-claim`: `/cache` (tt-metal's compiled kernels) comes from the claim, in a
/// directory of the image's own, so every replica and later pod of the image boots warm and a
/// new build never reads an old build's kernels; without it each pod compiles its own.
#[test]
fn a_kernel_cache_claim_keeps_one_images_kernels_for_every_pod() {
    let spec = compose(
        &request("http-server", Chips::Ids(vec![0]), true, &[]),
        &host(true, true),
    );
    let cache_volume = |opts: &FleetOptions| {
        let (fleet, _) = yaml_checked(&spec, opts);
        let pod = pod_spec(&fleet);
        let m = pod.containers[0]
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| m.mount_path == "/cache")
            .expect("/cache is mounted")
            .clone();
        let v = pod
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == m.name)
            .unwrap();
        (m, v)
    };
    let (m, v) = cache_volume(&card_options(4));
    assert!(v.empty_dir.is_some() && m.sub_path.is_none(), "{v:?}");

    let mut opts = card_options(4);
    opts.kernel_cache_claim = Some("tt-kernels".into());
    let (m, v) = cache_volume(&opts);
    let claim = v.persistent_volume_claim.expect("the claim");
    assert_eq!(claim.claim_name, "tt-kernels");
    assert_ne!(
        claim.read_only,
        Some(true),
        "pods write the kernels they compile"
    );
    assert_ne!(m.read_only, Some(true));
    let hex = DIGEST.trim_start_matches("sha256:");
    assert_eq!(
        m.sub_path.as_deref(),
        Some(format!("kernels/{}", &hex[..16]).as_str())
    );

    // Another build of the package: another directory.
    opts.image = format!(
        "ghcr.io/acme/gr00t-n1.6-3b-p150-rs@sha256:{}",
        "e".repeat(64)
    );
    let (m, _) = cache_volume(&opts);
    assert_eq!(m.sub_path.as_deref(), Some("kernels/eeeeeeeeeeeeeeee"));
}
