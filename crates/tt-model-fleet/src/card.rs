//! How a replica gets its Tenstorrent card, done the way Tenstorrent's own stack does it
//! (tt-operator's DRA driver, and the tt-inference-server chart that runs model servers on it):
//!
//! - **The card**: by default a `ResourceClaimTemplate` (`resource.k8s.io/v1`): one request of
//!   the DeviceClass `tenstorrent.com` for exactly the profile's boards, selected by the board's
//!   name, so a pod never lands on another board type (the driver publishes one device per
//!   board). `--devices extended` asks for an extended resource counted in chips instead, for
//!   clusters with a device plugin and no DRA.
//! - **Placement**: where tt-operator places its own driver: nodes labelled
//!   `tenstorrent.com/has-tt=true` or carrying node-feature-discovery's label for the
//!   Tenstorrent PCI vendor. No hand-made board label: the claim's selector picks the board.
//! - **Hugepages**: the host's `/dev/hugepages-1G` (a hostPath), where UMD names one file per
//!   board, and a `hugepages-1Gi` request of 1 GiB per chip, which sets the pod's hugetlb cgroup
//!   limit (0 without it, and mapping the page would fail) and makes the scheduler count the
//!   node's pages. The files outlive a crashed pod, so an init container holding the same
//!   card deletes only its own boards' stale files before the server starts (the mount is
//!   world-writable: deleting by pattern alone would pull pages from under a neighbour's pod).
//! - **IPC**: `hostIPC`, as serve's `--ipc host`: UMD's chip lock lives in shared memory, so the
//!   host's tools (tt-smi, a reset) and the pod see the same lock.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, Container, HostPathVolumeSource, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, PodResourceClaim, ResourceClaim,
    ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceRequest, DeviceSelector, ExactDeviceRequest,
    ResourceClaimSpec, ResourceClaimTemplate, ResourceClaimTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tt_model_engine::run_spec::HUGEPAGES_1G;

use crate::FleetError;
use crate::options::{
    BOARD_NAME_ATTRIBUTE, DEFAULT_EXTENDED_RESOURCE, DEVICE_CLASS, DeviceMode, FleetOptions,
    HAS_TT_LABEL, NFD_PCI_LABEL,
};

/// The claim's name inside the pod (and the request's inside the claim).
pub(crate) const POD_CLAIM: &str = "boards";
/// The hugepages volume's name.
pub(crate) const HUGEPAGES_VOLUME: &str = "hugepages-1g";
/// Where the card's device nodes appear in a container (the host's numbering).
const DEVICE_DIR: &str = "/dev/tenstorrent";

/// How the pods of a fleet on a card get it, resolved from the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Card {
    /// A claim from the template named like the fleet, for `boards` boards named `board`.
    Dra { boards: u32, board: String },
    /// `chips` units of an extended resource.
    Extended { resource: String },
}

/// The card access the options ask for; errors name what to fix.
pub(crate) fn card(profile: &str, opts: &FleetOptions) -> Result<Card, FleetError> {
    match opts.devices {
        DeviceMode::Dra => {
            if let Some(name) = &opts.board_resource {
                return Err(FleetError::ResourceWithoutExtended { name: name.clone() });
            }
            let board = opts.board.clone().ok_or_else(|| FleetError::NoBoard {
                profile: profile.to_string(),
            })?;
            Ok(Card::Dra {
                boards: opts.boards.max(1),
                board,
            })
        }
        DeviceMode::Extended => {
            let name = opts
                .board_resource
                .clone()
                .unwrap_or_else(|| DEFAULT_EXTENDED_RESOURCE.into());
            match name.split_once('/') {
                Some((domain, n)) if domain.contains('.') && !n.is_empty() && !n.contains('/') => {
                    Ok(Card::Extended { resource: name })
                }
                _ => Err(FleetError::BadResourceName { name }),
            }
        }
    }
}

/// The CEL expression that selects a device of the DeviceClass by its board name.
pub fn board_selector(board: &str) -> String {
    // A CEL string literal: backslashes and quotes escaped (board names are plain words, but
    // the expression must stay one literal whatever a manifest says).
    let literal: String = board
        .chars()
        .flat_map(|c| match c {
            '\\' | '"' => vec!['\\', c],
            c => vec![c],
        })
        .collect();
    format!("device.attributes[\"{DEVICE_CLASS}\"].{BOARD_NAME_ATTRIBUTE} == \"{literal}\"")
}

/// The per-pod claim template of a DRA fleet: exactly `boards` devices of the DeviceClass, each
/// selected by board name.
pub(crate) fn claim_template(
    metadata: ObjectMeta,
    boards: u32,
    board: &str,
) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata,
        spec: ResourceClaimTemplateSpec {
            metadata: None,
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(vec![DeviceRequest {
                        name: POD_CLAIM.into(),
                        exactly: Some(ExactDeviceRequest {
                            device_class_name: DEVICE_CLASS.into(),
                            allocation_mode: Some("ExactCount".into()),
                            count: Some(i64::from(boards)),
                            selectors: Some(vec![DeviceSelector {
                                cel: Some(CELDeviceSelector {
                                    expression: board_selector(board),
                                }),
                            }]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
        },
    }
}

/// The pod's reference to its claim template (DRA only).
pub(crate) fn pod_claims(card: &Card, template: &str) -> Option<Vec<PodResourceClaim>> {
    matches!(card, Card::Dra { .. }).then(|| {
        vec![PodResourceClaim {
            name: POD_CLAIM.into(),
            resource_claim_template_name: Some(template.into()),
            ..Default::default()
        }]
    })
}

/// Adds the card to a container's resources: the claim, or the extended resource × chips
/// (requests = limits, as Kubernetes requires for extended resources).
pub(crate) fn add_card(res: &mut ResourceRequirements, card: &Card, chips: u32) {
    match card {
        Card::Dra { .. } => {
            res.claims = Some(vec![ResourceClaim {
                name: POD_CLAIM.into(),
                ..Default::default()
            }]);
        }
        Card::Extended { resource } => {
            for m in [&mut res.requests, &mut res.limits] {
                m.get_or_insert_with(BTreeMap::new)
                    .insert(resource.clone(), Quantity(chips.to_string()));
            }
        }
    }
}

/// The host's hugetlbfs and its mount at the path UMD looks for.
pub(crate) fn hugepages_volume() -> (Volume, VolumeMount) {
    (
        Volume {
            name: HUGEPAGES_VOLUME.into(),
            host_path: Some(HostPathVolumeSource {
                path: HUGEPAGES_1G.into(),
                // Not created if missing: a node without the mount has no pages to give.
                type_: Some("Directory".into()),
            }),
            ..Default::default()
        },
        VolumeMount {
            name: HUGEPAGES_VOLUME.into(),
            mount_path: HUGEPAGES_1G.into(),
            ..Default::default()
        },
    )
}

/// The shell that deletes the hugepage files of the boards whose device nodes are in
/// `device_dir`, from `hugepages_dir`. UMD names a board's file `device_<N>_tenstorrent`
/// (`device_<N>_channel_<C>_tenstorrent` for further channels), except board 0's first channel,
/// which keeps the old shared name `tenstorrent`.
pub(crate) fn cleanup_script(device_dir: &str, hugepages_dir: &str) -> String {
    format!(
        "for dev in {device_dir}/*; do [ -e \"$dev\" ] || continue; n=${{dev##*/}}; \
         rm -fv {hugepages_dir}/device_${{n}}_tenstorrent {hugepages_dir}/device_${{n}}_channel_*_tenstorrent; \
         if [ \"$n\" = 0 ]; then rm -fv {hugepages_dir}/tenstorrent; fi; done"
    )
}

/// The init container that clears this pod's boards' stale hugepage files. It runs the
/// server's own image (pinned by digest, already on the node; every base tt-model packages on
/// has `/bin/sh`), holds the same card so it sees exactly its boards' device nodes, and is as
/// locked down as the server.
pub(crate) fn cleanup_container(
    image: &str,
    card: &Card,
    chips: u32,
    cap_drop: &[String],
) -> Container {
    let mut resources = ResourceRequirements::default();
    add_card(&mut resources, card, chips);
    let (_, mount) = hugepages_volume();
    Container {
        name: "hugepages-cleanup".into(),
        image: Some(image.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec![
            "/bin/sh".into(),
            "-c".into(),
            cleanup_script(DEVICE_DIR, HUGEPAGES_1G),
        ]),
        resources: Some(resources),
        volume_mounts: Some(vec![mount]),
        // Unlinking files needs no capability (the mount is world-writable).
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                add: None,
                drop: Some(cap_drop.to_vec()),
            }),
            read_only_root_filesystem: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Card nodes as tt-operator finds them for its own driver: the `has-tt` label, or the label
/// node-feature-discovery puts on nodes with a Tenstorrent PCI device (terms are ORed).
pub(crate) fn card_node_affinity() -> Affinity {
    let term = |key: &str| NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: key.into(),
            operator: "In".into(),
            values: Some(vec!["true".into()]),
        }]),
        ..Default::default()
    };
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![term(HAS_TT_LABEL), term(NFD_PCI_LABEL)],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_names_the_board_as_one_cel_literal() {
        assert_eq!(
            board_selector("p150"),
            r#"device.attributes["tenstorrent.com"].boardName == "p150""#
        );
        assert_eq!(
            board_selector(r#"p1"50\"#),
            r#"device.attributes["tenstorrent.com"].boardName == "p1\"50\\""#
        );
    }

    fn opts(devices: DeviceMode, board: Option<&str>, resource: Option<&str>) -> FleetOptions {
        let mut o = FleetOptions::new("r@sha256:0".into());
        o.devices = devices;
        o.board = board.map(str::to_string);
        o.board_resource = resource.map(str::to_string);
        o.boards = 4;
        o
    }

    #[test]
    fn dra_needs_a_board_and_no_resource_name() {
        assert_eq!(
            card("default", &opts(DeviceMode::Dra, Some("p150"), None)).unwrap(),
            Card::Dra {
                boards: 4,
                board: "p150".into()
            }
        );
        assert!(matches!(
            card("default", &opts(DeviceMode::Dra, None, None)),
            Err(FleetError::NoBoard { .. })
        ));
        let err = card("d", &opts(DeviceMode::Dra, Some("p150"), Some("a.b/c"))).unwrap_err();
        assert!(err.to_string().contains("--devices extended"), "{err}");
    }

    #[test]
    fn extended_defaults_to_chips_and_checks_the_name() {
        assert_eq!(
            card("d", &opts(DeviceMode::Extended, None, None)).unwrap(),
            Card::Extended {
                resource: "tenstorrent.com/chip".into()
            }
        );
        for bad in ["p150", "tenstorrent/p150", "a.b/", "a.b/c/d"] {
            assert!(
                matches!(
                    card("d", &opts(DeviceMode::Extended, None, Some(bad))),
                    Err(FleetError::BadResourceName { .. })
                ),
                "{bad}"
            );
        }
    }

    /// The script runs in a real shell on fake device and hugepage directories: it deletes
    /// exactly its own boards' files, never a neighbour's (board 13 is not board 3).
    #[test]
    fn the_cleanup_deletes_only_its_own_boards_files() {
        let root = std::env::temp_dir().join(format!("tt-fleet-hp-{}", std::process::id()));
        let (dev, hp) = (root.join("dev"), root.join("hp"));
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::create_dir_all(&hp).unwrap();
        for n in ["0", "3"] {
            std::fs::write(dev.join(n), "").unwrap();
        }
        let files = [
            "tenstorrent",
            "device_3_tenstorrent",
            "device_3_channel_1_tenstorrent",
            "device_13_tenstorrent",
            "device_1_tenstorrent",
            "device_1_channel_2_tenstorrent",
        ];
        for f in files {
            std::fs::write(hp.join(f), "").unwrap();
        }
        let script = cleanup_script(dev.to_str().unwrap(), hp.to_str().unwrap());
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let mut left: Vec<String> = std::fs::read_dir(&hp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(
            left,
            [
                "device_13_tenstorrent",
                "device_1_channel_2_tenstorrent",
                "device_1_tenstorrent"
            ]
        );
    }
}
