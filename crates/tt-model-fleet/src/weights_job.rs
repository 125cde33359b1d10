//! The fleet fills its own weights claim (`serve --print k8s --tools-image REF`): the package's
//! manifest in a ConfigMap, a ReadWriteMany claim (unless `--weights-claim` names one), a Job
//! that runs `tt-model weights` from the tools image into the claim, and in every server pod an
//! init container that runs `tt-model weights --check` on the claim, read-only.
//!
//! Why a Job and not a downloading init container per replica: one download serves every
//! replica (N replicas would fetch the same gigabytes N times), and replicas never race to
//! write one cache. The pods wait for it through their check: until the Job has filled the
//! claim at the pinned revisions the check fails and the kubelet retries it (with back-off), so
//! a server never starts on missing or stale weights. The download is the project's own
//! (`tt-model weights`: serve's pin checks, `allow_patterns`, auxiliary weights, every file
//! verified), not a second downloader written for the cluster.
//!
//! The Job's name carries a hash of the manifest: a Job's pod template cannot be changed once
//! created, and a completed Job never runs again, so a new revision (a new manifest) needs a new
//! Job, while re-applying the same fleet leaves the finished one as it is.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, KeyToPath, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, ResourceRequirements,
    SecretKeySelector, SecurityContext, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tt_model_engine::run_spec::HUB_CACHE_IN_CONTAINER;

use crate::options::{HF_TOKEN_SECRET_KEY, WeightsFill};
use crate::pod::pod_security;

/// Where the Job and the check find the package's manifest (the ConfigMap's mount).
pub const MANIFEST_DIR: &str = "/etc/tt-model";
/// The manifest the Job and the check are given.
pub const MANIFEST_PATH: &str = "/etc/tt-model/tt_kernel_manifest.json";
/// The ConfigMap's key: the file name `tt-model weights` reads.
const MANIFEST_KEY: &str = "tt_kernel_manifest.json";
/// The binary, found on the tools image's `PATH`.
const TOOL: &str = "tt-model";
/// Retries of the Job before it is failed (Kubernetes' default, written out): a Hub that is
/// briefly unreachable does not fail the fleet; a refused revision fails the same way each time.
const BACKOFF_LIMIT: i32 = 6;
/// The ConfigMap's volume in the Job and the server pods.
const MANIFEST_VOLUME: &str = "tt-model-manifest";
/// The tools' writable `/tmp` (their `HOME` and state root): the root filesystem is read-only.
const TOOLS_TMP_VOLUME: &str = "tools-tmp";
/// The longest object name a Job's pods can carry in their `job-name` label.
const MAX_NAME: usize = 63;

/// What the renderer adds to the fleet when it fills its own weights.
pub(crate) struct FillObjects {
    /// `<name>-manifest`: the package's wire manifest.
    pub config_map: ConfigMap,
    /// The claim the fleet creates (`None`: `--weights-claim` names an existing one).
    pub claim: Option<PersistentVolumeClaim>,
    /// `<name>-weights-<hash>`: `tt-model weights` into the claim.
    pub job: Job,
    /// The claim every pod of the fleet mounts at `/hf-hub`.
    pub claim_name: String,
    /// The server pods' init container: `tt-model weights --check` on the claim, read-only.
    pub check: Container,
    /// The volumes the check needs besides the claim (the manifest, a `/tmp`).
    pub check_volumes: Vec<Volume>,
}

/// What [`fill_objects`] is built from.
pub(crate) struct FillInputs<'a> {
    pub fill: &'a WeightsFill,
    /// The fleet's name (an RFC 1035 label).
    pub name: &'a str,
    pub namespace: Option<String>,
    /// The fleet's object labels.
    pub labels: &'a BTreeMap<String, String>,
    /// `--weights-claim`, used when the fleet creates none.
    pub weights_claim: &'a str,
    pub hf_token_secret: &'a str,
    /// The server pod's volume holding the claim.
    pub hub_volume: &'a str,
}

/// `base` + `suffix`, the base shortened so the whole fits a 63-character name.
fn suffixed(base: &str, suffix: &str) -> String {
    let keep = MAX_NAME.saturating_sub(suffix.len());
    let base: String = base.chars().take(keep).collect();
    format!("{}{suffix}", base.trim_end_matches('-'))
}

/// FNV-1a (64 bit) of `text` as 8 hex digits: a stable name suffix, not a security measure.
fn short_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", h >> 32)
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
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

/// The tools' environment: the claim is the hub cache the server reads (`HF_HUB_CACHE`), and
/// everything the binary might write (its state root, `HF_HOME`) is under the emptyDir `/tmp`.
fn tools_env() -> Vec<EnvVar> {
    vec![
        env("HF_HOME", "/tmp/hf-home"),
        env("HF_HUB_CACHE", HUB_CACHE_IN_CONTAINER),
        env("HOME", "/tmp"),
        env("NO_COLOR", "1"),
        env("TT_MODEL_HOME", "/tmp/tt-model"),
    ]
}

/// Hardened as the server: no privilege escalation, no capabilities, a read-only root.
fn hardened() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        read_only_root_filesystem: Some(true),
        ..Default::default()
    }
}

fn resources(cpu: &str, memory: &str, limit: &str) -> ResourceRequirements {
    let q = |s: &str| Quantity(s.to_string());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), q(cpu)),
            ("memory".to_string(), q(memory)),
        ])),
        limits: Some(BTreeMap::from([("memory".to_string(), q(limit))])),
        ..Default::default()
    }
}

fn manifest_volume(config_map: &str) -> Volume {
    Volume {
        name: MANIFEST_VOLUME.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.into(),
            items: Some(vec![KeyToPath {
                key: MANIFEST_KEY.into(),
                path: MANIFEST_KEY.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn tmp_volume() -> Volume {
    Volume {
        name: TOOLS_TMP_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }
}

/// The ConfigMap, the claim, the Job and the pods' check for `inputs`. Pure.
pub(crate) fn fill_objects(i: &FillInputs<'_>) -> FillObjects {
    let meta = |name: String| ObjectMeta {
        name: Some(name),
        namespace: i.namespace.clone(),
        labels: Some(i.labels.clone()),
        ..Default::default()
    };
    let config_map_name = suffixed(i.name, "-manifest");
    let config_map = ConfigMap {
        metadata: meta(config_map_name.clone()),
        data: Some(BTreeMap::from([(
            MANIFEST_KEY.to_string(),
            i.fill.manifest_json.clone(),
        )])),
        ..Default::default()
    };
    let (claim_name, claim) = match &i.fill.create_claim {
        Some(size) => {
            let name = suffixed(i.name, "-hf-hub");
            let claim = PersistentVolumeClaim {
                metadata: meta(name.clone()),
                spec: Some(PersistentVolumeClaimSpec {
                    // The Job writes while the servers (on other nodes) read.
                    access_modes: Some(vec!["ReadWriteMany".into()]),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".to_string(),
                            Quantity(size.clone()),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            (name, Some(claim))
        }
        None => (i.weights_claim.to_string(), None),
    };

    let mut job_env = tools_env();
    if let Some(endpoint) = &i.fill.hf_endpoint {
        job_env.push(env("HF_ENDPOINT", endpoint));
    }
    job_env.push(EnvVar {
        name: "HF_TOKEN".into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: i.hf_token_secret.into(),
                key: HF_TOKEN_SECRET_KEY.into(),
                // Public weights need no token: the Job runs without the Secret.
                optional: Some(true),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    job_env.sort_by(|a, b| a.name.cmp(&b.name));
    const CLAIM_VOLUME: &str = "hf-hub";
    let job_pod_labels = BTreeMap::from([
        // Not the Deployment's selector labels: the Service and the budget must not count the
        // Job's pod as a replica.
        ("app.kubernetes.io/component".to_string(), "weights".into()),
        (
            "app.kubernetes.io/managed-by".to_string(),
            "tt-model".into(),
        ),
        ("app.kubernetes.io/part-of".to_string(), i.name.to_string()),
    ]);
    let job = Job {
        metadata: meta(suffixed(
            i.name,
            &format!("-weights-{}", short_hash(&i.fill.manifest_json)),
        )),
        spec: Some(JobSpec {
            backoff_limit: Some(BACKOFF_LIMIT),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(job_pod_labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    restart_policy: Some("OnFailure".into()),
                    containers: vec![Container {
                        name: "weights".into(),
                        image: Some(i.fill.tools_image.clone()),
                        image_pull_policy: Some("IfNotPresent".into()),
                        command: Some(vec![TOOL.into(), "weights".into(), MANIFEST_PATH.into()]),
                        env: Some(job_env),
                        resources: Some(resources("1", "1Gi", "2Gi")),
                        volume_mounts: Some(vec![
                            mount(CLAIM_VOLUME, HUB_CACHE_IN_CONTAINER, false),
                            mount(MANIFEST_VOLUME, MANIFEST_DIR, true),
                            mount(TOOLS_TMP_VOLUME, "/tmp", false),
                        ]),
                        security_context: Some(hardened()),
                        ..Default::default()
                    }],
                    volumes: Some(vec![
                        Volume {
                            name: CLAIM_VOLUME.into(),
                            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                                claim_name: claim_name.clone(),
                                read_only: None,
                            }),
                            ..Default::default()
                        },
                        manifest_volume(&config_map_name),
                        tmp_volume(),
                    ]),
                    // The download needs the Hub, not the API server.
                    automount_service_account_token: Some(false),
                    enable_service_links: Some(false),
                    // The claim's files belong to the group the servers read as.
                    security_context: Some(pod_security()),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };

    let check = Container {
        name: "weights-check".into(),
        image: Some(i.fill.tools_image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec![
            TOOL.into(),
            "weights".into(),
            "--check".into(),
            MANIFEST_PATH.into(),
        ]),
        env: Some(tools_env()),
        resources: Some(resources("100m", "128Mi", "512Mi")),
        volume_mounts: Some(vec![
            mount(i.hub_volume, HUB_CACHE_IN_CONTAINER, true),
            mount(MANIFEST_VOLUME, MANIFEST_DIR, true),
            mount(TOOLS_TMP_VOLUME, "/tmp", false),
        ]),
        security_context: Some(hardened()),
        ..Default::default()
    };
    FillObjects {
        config_map,
        claim,
        job,
        claim_name,
        check,
        check_volumes: vec![manifest_volume(&config_map_name), tmp_volume()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs<'a>(fill: &'a WeightsFill, labels: &'a BTreeMap<String, String>) -> FillInputs<'a> {
        FillInputs {
            fill,
            name: "m-default",
            namespace: Some("ns".into()),
            labels,
            weights_claim: "shared-hub",
            hf_token_secret: "hf-token",
            hub_volume: "hf-hub",
        }
    }

    fn fill(create: bool, manifest: &str) -> WeightsFill {
        WeightsFill {
            tools_image: "ghcr.io/acme/tools@sha256:00".into(),
            manifest_json: manifest.into(),
            create_claim: create.then(|| "50Gi".into()),
            hf_endpoint: Some("http://mirror:8080".into()),
        }
    }

    #[test]
    fn a_created_claim_is_the_fleets_own_and_an_existing_one_is_used_as_named() {
        let labels = BTreeMap::new();
        let f = fill(true, "{}");
        let o = fill_objects(&inputs(&f, &labels));
        let claim = o.claim.expect("created");
        assert_eq!(claim.metadata.name.as_deref(), Some("m-default-hf-hub"));
        assert_eq!(o.claim_name, "m-default-hf-hub");
        let spec = claim.spec.unwrap();
        assert_eq!(spec.access_modes.unwrap(), vec!["ReadWriteMany"]);
        assert_eq!(
            spec.resources.unwrap().requests.unwrap()["storage"],
            Quantity("50Gi".into())
        );
        let f = fill(false, "{}");
        let o = fill_objects(&inputs(&f, &labels));
        assert!(o.claim.is_none());
        assert_eq!(o.claim_name, "shared-hub");
        let job_pod = o.job.spec.unwrap().template.spec.unwrap();
        let vols = job_pod.volumes.unwrap();
        let pvc = vols[0].persistent_volume_claim.as_ref().unwrap();
        assert_eq!(
            (pvc.claim_name.as_str(), pvc.read_only),
            ("shared-hub", None)
        );
    }

    #[test]
    fn a_new_manifest_is_a_new_job_and_the_same_one_the_same_job() {
        let labels = BTreeMap::new();
        let name = |m: &str| {
            let f = fill(true, m);
            fill_objects(&inputs(&f, &labels))
                .job
                .metadata
                .name
                .unwrap()
        };
        assert_eq!(name("{\"a\":1}"), name("{\"a\":1}"));
        assert_ne!(name("{\"a\":1}"), name("{\"a\":2}"));
        assert!(name("{}").starts_with("m-default-weights-"));
        assert_eq!(name("{}").len(), "m-default-weights-".len() + 8);
    }

    #[test]
    fn long_names_still_fit_63_characters() {
        let base = "a".repeat(63);
        for suffix in ["-manifest", "-hf-hub", "-weights-0123abcd"] {
            let n = suffixed(&base, suffix);
            assert!(n.len() <= 63 && n.ends_with(suffix), "{n}");
        }
        assert_eq!(suffixed("x-", "-y"), "x-y");
    }

    #[test]
    fn the_job_writes_the_claim_and_the_check_reads_it() {
        let labels = BTreeMap::new();
        let f = fill(true, "{}");
        let o = fill_objects(&inputs(&f, &labels));
        let pod = o.job.spec.as_ref().unwrap().template.spec.clone().unwrap();
        let c = &pod.containers[0];
        assert_eq!(
            c.command.as_deref().unwrap(),
            ["tt-model", "weights", MANIFEST_PATH]
        );
        let hub = |m: &[VolumeMount]| {
            m.iter()
                .find(|m| m.mount_path == HUB_CACHE_IN_CONTAINER)
                .unwrap()
                .read_only
        };
        assert_eq!(hub(c.volume_mounts.as_ref().unwrap()), None);
        let env = c.env.as_ref().unwrap();
        let token = env.iter().find(|e| e.name == "HF_TOKEN").unwrap();
        let secret = token
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (secret.name.as_str(), secret.optional),
            ("hf-token", Some(true))
        );
        assert!(
            env.iter().any(
                |e| e.name == "HF_ENDPOINT" && e.value.as_deref() == Some("http://mirror:8080")
            )
        );
        assert_eq!(o.check.command.as_deref().unwrap()[2], "--check");
        assert_eq!(hub(o.check.volume_mounts.as_ref().unwrap()), Some(true));
        assert!(
            !o.check
                .env
                .as_ref()
                .unwrap()
                .iter()
                .any(|e| e.name == "HF_TOKEN"),
            "the check is offline and needs no token"
        );
        for sc in [
            c.security_context.as_ref(),
            o.check.security_context.as_ref(),
        ] {
            let sc = sc.unwrap();
            assert_eq!(sc.read_only_root_filesystem, Some(true));
            assert_eq!(sc.allow_privilege_escalation, Some(false));
        }
        assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
        assert_eq!(o.job.spec.unwrap().backoff_limit, Some(BACKOFF_LIMIT));
    }
}
