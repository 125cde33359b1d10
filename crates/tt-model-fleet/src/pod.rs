//! The pod template: serve's container (image, command, environment, port, hardening) with the
//! host's bind mounts turned into pod volumes and the card into a claim (see `card.rs`).
//!
//! What changes on the way from `docker run` to a pod, and why:
//! - `/dev/tenstorrent/N` comes from the DRA driver (or a device plugin), not a device mapping;
//!   `--ipc host` stays (`hostIPC`), and hugepages are the host's, as Tenstorrent's chart runs
//!   its servers (`card.rs` says why).
//! - The state directories (`/cache`, `/weight-cache`, `/tensor-cache`) are per-pod emptyDirs:
//!   a pod's first boot compiles its kernels (the startup probe allows for it), unless a
//!   kernel cache claim is given: then `/cache` is that claim's directory for this image, which
//!   every replica and every later pod of the image reuses (docs/serving.md: 58 s cold, 14 s
//!   warm on a p150a).
//! - The hub cache is a read-only claim holding the pinned weights, and the server runs with
//!   `HF_HUB_OFFLINE=1`, when serve fetched the weights on the host; else a writable emptyDir
//!   with `HF_TOKEN` from a Secret (never inline). Where the fleet fills the claim itself, an
//!   init container checks it first (`weights_job.rs`).
//! - The user is 1000:1000 (the uid packages are verified as), not the caller's uid.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec, Probe,
    ResourceRequirements, SeccompProfile, SecretKeySelector, SecurityContext,
    TopologySpreadConstraint, Volume, VolumeMount,
};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tt_model_engine::run_spec::{HUB_CACHE_IN_CONTAINER, HUGEPAGES_1G, RunSpec};

use crate::card::{
    Card, add_card, card_node_affinity, cleanup_container, hugepages_volume, pod_claims,
};
use crate::options::{FleetOptions, HF_TOKEN_SECRET_KEY};

/// The uid and gid packages are verified as, and the fleet runs as.
pub(crate) const RUN_AS: i64 = 1000;
/// The container's port name, which probes and the Service refer to.
pub(crate) const PORT_NAME: &str = "http";
/// Kinds whose server writes only to its mounted directories and `/tmp`, so the root
/// filesystem is read-only; the Python kinds write caches (pip, triton, torch) under `$HOME`.
const READ_ONLY_ROOT_KINDS: &[&str] = &["http-server"];
/// The interval of the startup probe: its failure threshold spreads the startup deadline.
const STARTUP_PERIOD_S: i32 = 10;

/// What the pod template is built from, resolved once by the renderer.
pub(crate) struct PodInputs<'a> {
    pub spec: &'a RunSpec,
    pub opts: &'a FleetOptions,
    pub kind: &'a str,
    pub port: u16,
    pub health_path: &'a str,
    /// How the pod gets its card; `None` without one.
    pub card: Option<Card>,
    /// The name of the fleet's claim template (a DRA card's).
    pub claim_template: &'a str,
    pub selector: &'a BTreeMap<String, String>,
    /// The claim holding the weights (`--weights-claim`, or the one the fleet creates).
    pub weights_claim: &'a str,
    /// Where the fleet fills its own weights: the init container that checks the claim
    /// before the server starts, and the volumes it needs besides the claim.
    pub weights_check: Option<(Container, Vec<Volume>)>,
}

/// `docker run`'s bind destination as a volume name (`/hf-hub` → `hf-hub`).
fn volume_name(dst: &str) -> String {
    crate::names::dns_label(dst)
}

fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn http_probe(path: &str, period: i32, timeout: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String(PORT_NAME.into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(timeout),
        failure_threshold: Some(failures),
        ..Default::default()
    }
}

/// The weights are read from a read-only cache (serve fetched them on the host).
pub(crate) fn reads_offline(spec: &RunSpec) -> bool {
    spec.env
        .iter()
        .any(|e| e.key == "HF_HUB_OFFLINE" && e.value.as_deref() == Some("1"))
}

/// Where serve binds tt-metal's kernel cache (`TT_METAL_CACHE`) in the container.
const KERNEL_CACHE_IN_CONTAINER: &str = "/cache";

/// The kernel cache claim's directory for `image` (`repo@sha256:<hex>`): `kernels/` and the
/// digest's first 16 hex digits, so a new build never loads an old build's kernels and pods of
/// one image share theirs.
pub(crate) fn kernel_cache_dir(image: &str) -> String {
    let hex = image.rsplit_once("@sha256:").map_or(image, |(_, hex)| hex);
    let key: String = hex
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(16)
        .collect();
    format!("kernels/{key}")
}

/// Volumes and their mounts, in the order serve binds them.
fn volumes(p: &PodInputs<'_>, read_only_root: bool) -> (Vec<Volume>, Vec<VolumeMount>) {
    let (mut vols, mut mounts) = (Vec::new(), Vec::new());
    if p.card.is_some() {
        let (vol, m) = hugepages_volume();
        vols.push(vol);
        mounts.push(m);
    }
    for b in &p.spec.binds {
        if b.dst == HUGEPAGES_1G {
            continue; // from the card, above, whatever the printing host has
        }
        let name = volume_name(&b.dst);
        if b.dst == HUB_CACHE_IN_CONTAINER && reads_offline(p.spec) && !p.opts.weights.is_empty() {
            vols.push(Volume {
                name: name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: p.weights_claim.to_string(),
                    read_only: Some(true),
                }),
                ..Default::default()
            });
            mounts.push(mount(&name, &b.dst, true));
        } else if b.dst == KERNEL_CACHE_IN_CONTAINER
            && let Some(claim) = &p.opts.kernel_cache_claim
        {
            vols.push(Volume {
                name: name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.clone(),
                    read_only: None,
                }),
                ..Default::default()
            });
            mounts.push(VolumeMount {
                sub_path: Some(kernel_cache_dir(&p.opts.image)),
                ..mount(&name, &b.dst, false)
            });
        } else {
            vols.push(empty_dir(&name));
            mounts.push(mount(&name, &b.dst, false));
        }
    }
    if read_only_root {
        vols.push(empty_dir("tmp"));
        mounts.push(mount("tmp", "/tmp", false));
    }
    (vols, mounts)
}

/// Serve's environment; `HF_TOKEN` from the Secret where the pod downloads weights.
fn env(p: &PodInputs<'_>) -> Vec<EnvVar> {
    let mut out: Vec<EnvVar> = p
        .spec
        .env
        .iter()
        // Passed by name from the caller's shell by serve; in a cluster it is the Secret's.
        .filter(|e| e.key != "HF_TOKEN")
        .filter_map(|e| {
            e.value.as_ref().map(|v| EnvVar {
                name: e.key.clone(),
                value: Some(v.clone()),
                ..Default::default()
            })
        })
        .collect();
    if !reads_offline(p.spec) && !p.opts.weights.is_empty() {
        out.push(EnvVar {
            name: "HF_TOKEN".into(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: p.opts.hf_token_secret.clone(),
                    key: HF_TOKEN_SECRET_KEY.into(),
                    // Public weights need no token: the pod starts without the Secret.
                    optional: Some(true),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        out.sort_by(|a, b| a.name.cmp(&b.name));
    }
    out
}

fn resources(p: &PodInputs<'_>) -> ResourceRequirements {
    let q = |s: &str| Quantity(s.to_string());
    let mut requests = BTreeMap::from([
        ("cpu".to_string(), q(&p.opts.cpu)),
        ("memory".to_string(), q(&p.opts.memory)),
    ]);
    let mut limits = BTreeMap::from([("memory".to_string(), q(&p.opts.memory))]);
    if p.card.is_some() {
        // Hugepages: requests must equal limits.
        let hugepages = format!("{}Gi", p.opts.chips * p.opts.hugepages_gib_per_chip);
        for m in [&mut requests, &mut limits] {
            m.insert("hugepages-1Gi".into(), q(&hugepages));
        }
    }
    let mut res = ResourceRequirements {
        requests: Some(requests),
        limits: Some(limits),
        ..Default::default()
    };
    if let Some(card) = &p.card {
        add_card(&mut res, card, p.opts.chips);
    }
    res
}

/// The pod spec of every replica.
pub(crate) fn pod_spec(p: &PodInputs<'_>) -> PodSpec {
    let read_only_root = READ_ONLY_ROOT_KINDS.contains(&p.kind);
    let (mut volumes, volume_mounts) = volumes(p, read_only_root);
    let startup_failures = (p
        .opts
        .startup_timeout
        .as_secs()
        .div_ceil(STARTUP_PERIOD_S as u64))
    .max(1);
    let container = Container {
        name: "server".into(),
        image: Some(p.opts.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: p.spec.entrypoint.clone(),
        args: (!p.spec.cmd.is_empty()).then(|| p.spec.cmd.clone()),
        env: Some(env(p)),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: i32::from(p.port),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        resources: Some(resources(p)),
        volume_mounts: Some(volume_mounts),
        startup_probe: Some(http_probe(
            p.health_path,
            STARTUP_PERIOD_S,
            5,
            i32::try_from(startup_failures).unwrap_or(i32::MAX),
        )),
        readiness_probe: Some(http_probe(p.health_path, 10, 5, 3)),
        liveness_probe: Some(http_probe(p.health_path, 30, 10, 3)),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(!p.spec.no_new_privileges),
            capabilities: Some(Capabilities {
                add: (!p.spec.cap_add.is_empty()).then(|| p.spec.cap_add.clone()),
                drop: Some(p.spec.cap_drop.clone()),
            }),
            read_only_root_filesystem: Some(read_only_root),
            ..Default::default()
        }),
        ..Default::default()
    };
    let card = p.card.as_ref();
    // The weights check first: a pod whose weights are not there yet touches no board.
    let mut init_containers = Vec::new();
    if let Some((check, check_volumes)) = &p.weights_check {
        init_containers.push(check.clone());
        volumes.extend(check_volumes.iter().cloned());
    }
    if let Some(c) = card {
        init_containers.push(cleanup_container(
            &p.opts.image,
            c,
            p.opts.chips,
            &p.spec.cap_drop,
        ));
    }
    PodSpec {
        init_containers: (!init_containers.is_empty()).then_some(init_containers),
        containers: vec![container],
        volumes: Some(volumes),
        resource_claims: card.and_then(|c| pod_claims(c, p.claim_template)),
        // UMD's chip lock is in host shared memory: the pod takes the same lock as every
        // other process on the node that opens the board (serve's `--ipc host`).
        host_ipc: card.map(|_| true),
        affinity: card.map(|_| card_node_affinity()),
        // The server never talks to the API server.
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(pod_security()),
        // Soft: a fleet larger than its card hosts still schedules; the cards are the hard limit.
        topology_spread_constraints: Some(vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "kubernetes.io/hostname".into(),
            when_unsatisfiable: "ScheduleAnyway".into(),
            label_selector: Some(LabelSelector {
                match_labels: Some(p.selector.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// Every pod of a fleet runs as [`RUN_AS`], never root, with the runtime's default seccomp
/// profile; volumes (the weights claim) are group-owned by it, so the server reads what the
/// weights Job wrote.
pub(crate) fn pod_security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_user: Some(RUN_AS),
        run_as_group: Some(RUN_AS),
        run_as_non_root: Some(true),
        fs_group: Some(RUN_AS),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}
