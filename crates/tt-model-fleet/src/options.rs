//! What a fleet needs beyond the run spec: how many replicas, where, the card's resource, and
//! the documented defaults for what a manifest does not say.

use std::time::Duration;

/// The device plugin's resource is `tenstorrent.com/<board>` (`tenstorrent.com/p150`), one unit
/// per chip (one `/dev/tenstorrent/N` node), as the community Tenstorrent device plugins
/// advertise boards; `--board-resource` names another.
pub const DEFAULT_RESOURCE_PREFIX: &str = "tenstorrent.com/";
/// The node label a fleet selects card hosts by (`tenstorrent.com/board=p150`).
pub const BOARD_LABEL: &str = "tenstorrent.com/board";
/// 1 GiB hugepages per chip: the host memory UMD maps for each chip's system-memory channel.
pub const DEFAULT_HUGEPAGES_GIB_PER_CHIP: u32 = 1;
/// CPU requested per replica when the manifest says nothing: the server, its tokenizer and the
/// card's dispatch threads.
pub const DEFAULT_CPU: &str = "4";
/// Memory requested (and the limit) per replica when the manifest says nothing.
pub const DEFAULT_MEMORY: &str = "32Gi";
/// The PersistentVolumeClaim holding a Hugging Face cache with the pinned weights, mounted
/// read-only.
pub const DEFAULT_WEIGHTS_CLAIM: &str = "tt-model-hf-hub";
/// The Secret whose key [`HF_TOKEN_SECRET_KEY`] becomes `HF_TOKEN` where a pod downloads.
pub const DEFAULT_HF_TOKEN_SECRET: &str = "hf-token";
/// The key of the token in that Secret.
pub const HF_TOKEN_SECRET_KEY: &str = "token";

/// A weights repository at the revision the package pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsPin {
    /// `org/name`.
    pub repo: String,
    /// The pinned commit (or the branch the manifest names).
    pub revision: String,
}

/// The fleet's shape and the cluster's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetOptions {
    /// The image, pinned by digest ([`crate::pinned_image`] or [`crate::check_pinned`]).
    pub image: String,
    /// Pods in the Deployment.
    pub replicas: u32,
    /// The namespace written into every object; `None` leaves it to `kubectl -n`.
    pub namespace: Option<String>,
    /// Chips each replica needs (the profile's); 0 for a runtime without a card.
    pub chips: u32,
    /// The profile's board (`p150`), for the default resource name and the node selector.
    pub board: Option<String>,
    /// The device plugin's resource; `None` is `tenstorrent.com/<board>`.
    pub board_resource: Option<String>,
    /// 1 GiB hugepages per chip.
    pub hugepages_gib_per_chip: u32,
    /// CPU request (a Kubernetes quantity).
    pub cpu: String,
    /// Memory request and limit (a Kubernetes quantity).
    pub memory: String,
    /// How long a cold start may take before the kubelet restarts the pod (the first boot
    /// compiles the kernels): serve's readiness deadline.
    pub startup_timeout: Duration,
    /// The weights the server reads; empty for a model without any.
    pub weights: Vec<WeightsPin>,
    /// The claim holding the Hugging Face cache with those weights.
    pub weights_claim: String,
    /// The Secret holding `HF_TOKEN` for pods that download.
    pub hf_token_secret: String,
    /// The log line that says the server is ready, recorded for people reading the fleet.
    pub ready_line: Option<String>,
}

impl FleetOptions {
    /// The documented defaults for an image; the caller sets the rest.
    pub fn new(image: String) -> Self {
        FleetOptions {
            image,
            replicas: 1,
            namespace: None,
            chips: 0,
            board: None,
            board_resource: None,
            hugepages_gib_per_chip: DEFAULT_HUGEPAGES_GIB_PER_CHIP,
            cpu: DEFAULT_CPU.into(),
            memory: DEFAULT_MEMORY.into(),
            startup_timeout: Duration::from_secs(30 * 60),
            weights: Vec::new(),
            weights_claim: DEFAULT_WEIGHTS_CLAIM.into(),
            hf_token_secret: DEFAULT_HF_TOKEN_SECRET.into(),
            ready_line: None,
        }
    }
}
