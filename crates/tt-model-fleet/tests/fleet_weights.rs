//! A fleet that fills its own weights (`WeightsFill`, `serve --print k8s --tools-image`): the
//! manifest's ConfigMap, the fleet's own ReadWriteMany claim (or the one named), the Job that
//! runs `tt-model weights` into it, and the pods' `tt-model weights --check` init container
//! ahead of the card's, rendered from a run spec the engine's `compose` builds, checked with
//! `kubernetes-validate --strict` at 1.34 and pinned as an insta snapshot.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tt_model_engine::run_spec::{Chips, HostFacts, ServeRequest, compose};
use tt_model_fleet::{
    DEFAULT_WEIGHTS_SIZE, Fleet, FleetError, FleetOptions, MANIFEST_PATH, WeightsFill, WeightsPin,
    render,
};
use tt_model_testkit::k8s::{validate, validator_or_skip};

const DIGEST: &str = "sha256:8f3c2a1e5b7d9c0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081";
const TOOLS: &str =
    "ghcr.io/acme/tt-model@sha256:2222222222222222222222222222222222222222222222222222222222222222";
const MANIFEST: &str = "{\n  \"name\": \"m\",\n  \"weights\": {\"repo_id\": \"acme/w\", \"revision\": \"d0814e7ecb19202e7c8468b46098b0b7ef3a6d61\"}\n}\n";

fn spec(weights_on_host: bool) -> tt_model_engine::run_spec::RunSpec {
    let req = ServeRequest {
        package: "m".into(),
        profile: "default".into(),
        image: "tt-model/m:1".into(),
        target: ".".into(),
        kind: "http-server".into(),
        port: 20000,
        expose: false,
        health_path: "/health".into(),
        chips: Chips::Ids(vec![0]),
        weights_on_host,
        env: BTreeMap::new(),
        labels: BTreeMap::new(),
        cmd: vec!["serve".into()],
        network: None,
    };
    let host = HostFacts {
        uid: 1000,
        gid: 1000,
        rootless: false,
        hub_cache: PathBuf::from("/hub"),
        state_dir: PathBuf::from("/state"),
        hf_token_set: false,
        hugepages_1g: true,
    };
    compose(&req, &host)
}

fn options(create_claim: bool) -> FleetOptions {
    let mut o = FleetOptions::new(format!("ghcr.io/acme/m@{DIGEST}"));
    o.chips = 1;
    o.boards = 1;
    o.board = Some("p150".into());
    o.weights = vec![WeightsPin {
        repo: "acme/w".into(),
        revision: "d0814e7ecb19202e7c8468b46098b0b7ef3a6d61".into(),
    }];
    o.weights_fill = Some(WeightsFill {
        tools_image: TOOLS.into(),
        manifest_json: MANIFEST.into(),
        create_claim: create_claim.then(|| DEFAULT_WEIGHTS_SIZE.into()),
        hf_endpoint: None,
    });
    o
}

fn checked(fleet: &Fleet) -> String {
    let yaml = fleet.to_yaml().expect("serializes");
    if let Some(v) = validator_or_skip()
        && let Err(report) = validate(&v, &yaml)
    {
        panic!("kubernetes-validate --strict refused the fleet:\n{report}\n{yaml}");
    }
    yaml
}

#[test]
fn a_fleet_that_fills_its_weights_has_a_job_and_its_pods_check_the_claim() {
    let fleet = render(&spec(true), &options(true)).expect("renders");
    let yaml = checked(&fleet);
    let manifest = fleet.manifest.as_ref().expect("a ConfigMap");
    assert_eq!(
        manifest.data.as_ref().unwrap()["tt_kernel_manifest.json"],
        MANIFEST
    );
    let claim = fleet.weights_claim.as_ref().expect("the fleet's own claim");
    let claim_name = claim.metadata.name.clone().unwrap();
    assert_eq!(claim_name, "tt-model-m-default-hf-hub");
    let job = fleet.weights_job.as_ref().expect("a Job");
    let job_pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(
        job_pod.containers[0].command.as_deref().unwrap(),
        ["tt-model", "weights", MANIFEST_PATH]
    );
    let pod = fleet
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let inits: Vec<&str> = pod
        .init_containers
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(inits, ["weights-check", "hugepages-cleanup"]);
    let hub = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find_map(|v| v.persistent_volume_claim.as_ref())
        .expect("the weights claim");
    assert_eq!(
        (hub.claim_name.as_str(), hub.read_only),
        (claim_name.as_str(), Some(true))
    );
    insta::assert_snapshot!("fleet_filling_its_weights", yaml);
}

#[test]
fn a_named_claim_is_used_and_not_created() {
    let mut o = options(false);
    o.weights_claim = "team-cache".into();
    let fleet = render(&spec(true), &o).expect("renders");
    checked(&fleet);
    assert!(fleet.weights_claim.is_none());
    let job_pod = fleet
        .weights_job
        .as_ref()
        .unwrap()
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .clone();
    let vols = job_pod.unwrap().volumes.unwrap();
    assert_eq!(
        vols[0].persistent_volume_claim.as_ref().unwrap().claim_name,
        "team-cache"
    );
}

#[test]
fn pods_that_download_their_own_weights_get_no_job_and_a_tag_is_refused() {
    // `--no-weights`: the pods fetch into an emptyDir; there is no claim to fill.
    let fleet = render(&spec(false), &options(true)).expect("renders");
    assert!(fleet.manifest.is_none() && fleet.weights_job.is_none());
    assert!(
        !fleet.to_yaml().unwrap().contains("weights-check"),
        "no check where nothing is filled"
    );
    let mut o = options(true);
    o.weights_fill.as_mut().unwrap().tools_image = "ghcr.io/acme/tt-model:1".into();
    assert!(matches!(
        render(&spec(true), &o),
        Err(FleetError::NotPinned { .. })
    ));
}
