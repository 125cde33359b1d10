//! The fleet's objects: a Deployment of interchangeable replicas, the ResourceClaimTemplate its
//! pods claim their boards from (DRA), a Service for the port, and a PodDisruptionBudget, and
//! where the fleet fills its own weights the manifest's ConfigMap, the weights claim and the
//! Job that fills it (`weights_job.rs`), written as multi-document YAML.
//!
//! A Deployment, not a StatefulSet: replicas share nothing and need no stable identity (each
//! reads the same pinned weights and compiles its own kernels), so ordered start-up and
//! per-pod claims would only slow a fleet down. Rolling updates replace one pod at a time
//! without a surge pod: a card host has no spare card for one.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, PodTemplateSpec, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tt_model_engine::run_spec::{HUB_CACHE_IN_CONTAINER, RunSpec};
use tt_model_oci::labels;

use crate::card::{Card, card, claim_template};
use crate::names::{dns_label, label_value};
use crate::options::FleetOptions;
use crate::pod::{PORT_NAME, PodInputs, pod_spec, reads_offline};
use crate::weights_job::{FillInputs, fill_objects};
use crate::{FleetError, check_pinned};

/// Grace on top of the startup deadline before the Deployment reports no progress.
const PROGRESS_GRACE_S: u64 = 5 * 60;

/// The rendered fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct Fleet {
    /// The package's manifest, which the weights Job and the pods' check read (a fleet that
    /// fills its own weights; `None` otherwise).
    pub manifest: Option<ConfigMap>,
    /// The weights claim the fleet creates (`None`: a claim that exists, or no filling).
    pub weights_claim: Option<PersistentVolumeClaim>,
    /// The Job that fills the weights claim at the pinned revisions.
    pub weights_job: Option<Job>,
    /// The claim each pod's boards come from (a DRA fleet on a card; `None` otherwise).
    pub claim_template: Option<ResourceClaimTemplate>,
    /// The replicas.
    pub deployment: Deployment,
    /// The port, in front of the ready replicas.
    pub service: Service,
    /// At most one replica down for voluntary disruptions (node drains).
    pub disruption_budget: PodDisruptionBudget,
}

impl Fleet {
    /// Multi-document YAML as `kubectl apply -f -` takes it: what the pods need first (the
    /// manifest, the weights claim and its Job, the claim template), then the Deployment, the
    /// Service and the budget.
    pub fn to_yaml(&self) -> Result<String, FleetError> {
        // Long single-line values (the image reference, paths) stay on their line: a folded
        // `>-` block reads worse and is one more thing for a reviewer to decode.
        let opts = || serde_saphyr::ser_options! { prefer_block_scalars: false };
        let mut docs = Vec::new();
        if let Some(m) = &self.manifest {
            // The manifest's JSON is one multi-line value: a literal block keeps it readable.
            docs.push(serde_saphyr::to_string(m)?);
        }
        if let Some(c) = &self.weights_claim {
            docs.push(serde_saphyr::to_string_with_options(c, opts())?);
        }
        if let Some(j) = &self.weights_job {
            docs.push(serde_saphyr::to_string_with_options(j, opts())?);
        }
        if let Some(t) = &self.claim_template {
            docs.push(serde_saphyr::to_string_with_options(t, opts())?);
        }
        docs.push(serde_saphyr::to_string_with_options(
            &self.deployment,
            opts(),
        )?);
        docs.push(serde_saphyr::to_string_with_options(&self.service, opts())?);
        docs.push(serde_saphyr::to_string_with_options(
            &self.disruption_budget,
            opts(),
        )?);
        Ok(docs.join("---\n"))
    }
}

/// Build the fleet from the run spec serve composed for one container. Pure.
pub fn render(spec: &RunSpec, opts: &FleetOptions) -> Result<Fleet, FleetError> {
    check_pinned(&opts.image)?;
    if let Some(fill) = &opts.weights_fill {
        check_pinned(&fill.tools_image)?;
    }
    if opts.replicas == 0 {
        return Err(FleetError::ZeroReplicas);
    }
    let label = |k: &str| spec.labels.get(k).map(String::as_str);
    let package = label(labels::PACKAGE).unwrap_or(&spec.name);
    let profile = label(labels::PROFILE).unwrap_or("default");
    let kind = label(labels::KIND).unwrap_or_default();
    let health_path = label(labels::HEALTH_PATH).unwrap_or("/health");
    let port = spec
        .publish
        .as_ref()
        .map(|p| p.container_port)
        .or_else(|| label(labels::PORT).and_then(|p| p.parse().ok()))
        .unwrap_or(20000);
    let on_card = !spec.devices.is_empty() && opts.chips > 0;
    let card = on_card.then(|| card(profile, opts)).transpose()?;

    let name = dns_label(&spec.name);
    let selector = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), label_value(package)),
        ("app.kubernetes.io/instance".to_string(), name.clone()),
    ]);
    let mut object_labels = selector.clone();
    object_labels.insert("app.kubernetes.io/managed-by".into(), "tt-model".into());
    let meta = || ObjectMeta {
        name: Some(name.clone()),
        namespace: opts.namespace.clone(),
        labels: Some(object_labels.clone()),
        ..Default::default()
    };

    // What serve records on its container, for people and tools reading the pods.
    let mut annotations: BTreeMap<String, String> = spec
        .labels
        .iter()
        .filter(|(k, _)| k.starts_with("tt.model.") && *k != labels::HOST_IP && *k != labels::PORT)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(labels::PROFILE.into(), profile.into());
    if let Some(line) = &opts.ready_line {
        annotations.insert("tt.model.ready_line".into(), line.clone());
    }
    if !opts.weights.is_empty() {
        let pins: Vec<String> = opts
            .weights
            .iter()
            .map(|w| format!("{}@{}", w.repo, w.revision))
            .collect();
        annotations.insert("tt.model.weights".into(), pins.join(","));
    }

    // The fleet fills its own weights where its pods read them from the claim.
    let fill = opts
        .weights_fill
        .as_ref()
        .filter(|_| !opts.weights.is_empty() && reads_offline(spec))
        .map(|fill| {
            fill_objects(&FillInputs {
                fill,
                name: &name,
                namespace: opts.namespace.clone(),
                labels: &object_labels,
                weights_claim: &opts.weights_claim,
                hf_token_secret: &opts.hf_token_secret,
                hub_volume: &crate::names::dns_label(HUB_CACHE_IN_CONTAINER),
            })
        });
    let pod = PodInputs {
        spec,
        opts,
        kind,
        port,
        health_path,
        card: card.clone(),
        claim_template: &name,
        selector: &selector,
        weights_claim: fill
            .as_ref()
            .map_or(opts.weights_claim.as_str(), |f| f.claim_name.as_str()),
        weights_check: fill
            .as_ref()
            .map(|f| (f.check.clone(), f.check_volumes.clone())),
    };
    let label_selector = LabelSelector {
        match_labels: Some(selector.clone()),
        ..Default::default()
    };
    let deployment = Deployment {
        metadata: meta(),
        spec: Some(DeploymentSpec {
            replicas: Some(i32::try_from(opts.replicas).unwrap_or(i32::MAX)),
            selector: label_selector.clone(),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(0)),
                    max_unavailable: Some(IntOrString::Int(1)),
                }),
            }),
            // A cold boot may take the whole startup deadline: no "stalled" report before it.
            progress_deadline_seconds: Some(
                i32::try_from(opts.startup_timeout.as_secs() + PROGRESS_GRACE_S)
                    .unwrap_or(i32::MAX),
            ),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(object_labels.clone()),
                    annotations: Some(annotations),
                    ..Default::default()
                }),
                spec: Some(pod_spec(&pod)),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    let service = Service {
        metadata: meta(),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector.clone()),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: i32::from(port),
                target_port: Some(IntOrString::String(PORT_NAME.into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let disruption_budget = PodDisruptionBudget {
        metadata: meta(),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(label_selector),
            ..Default::default()
        }),
        ..Default::default()
    };
    let claim_template = match &card {
        Some(Card::Dra { boards, board }) => Some(claim_template(meta(), *boards, board)),
        _ => None,
    };
    let (manifest, weights_claim, weights_job) = match fill {
        Some(f) => (Some(f.config_map), f.claim, Some(f.job)),
        None => (None, None, None),
    };
    Ok(Fleet {
        manifest,
        weights_claim,
        weights_job,
        claim_template,
        deployment,
        service,
        disruption_budget,
    })
}
