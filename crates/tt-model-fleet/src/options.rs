//! What a fleet needs beyond the run spec: how many replicas, where, how a pod gets its card,
//! and the documented defaults for what a manifest does not say.

use std::time::Duration;

/// The DeviceClass (and DRA driver) name of Tenstorrent's `tt-operator`: one device per board.
pub const DEVICE_CLASS: &str = "tenstorrent.com";
/// The device attribute naming the board (`p150`, `p300`, `n150`, ...): the driver's docs warn
/// that `chipArch` + `chipCount` cannot tell a Galaxy's MMIO chip from an n150, so selectors
/// name the board.
pub const BOARD_NAME_ATTRIBUTE: &str = "boardName";
/// The extended resource of `--devices extended`: one unit per chip (one `/dev/tenstorrent/N`
/// node), the name tt-operator's DeviceClass also maps to its boards where Kubernetes' DRA
/// extended-resource feature is on; `--board-resource` names another.
pub const DEFAULT_EXTENDED_RESOURCE: &str = "tenstorrent.com/chip";
/// The node label tt-operator's own DaemonSets (the DRA driver's kubelet plugin) are placed
/// by, set by the cluster's operator on card nodes.
pub const HAS_TT_LABEL: &str = "tenstorrent.com/has-tt";
/// The label node-feature-discovery (which tt-operator installs) sets on every node with a
/// Tenstorrent PCI device: class 0x1200 (processing accelerator), vendor 0x1e52.
pub const NFD_PCI_LABEL: &str = "feature.node.kubernetes.io/pci-1200_1e52.present";
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
/// The size of the weights claim a fleet creates for its weights Job to fill.
pub const DEFAULT_WEIGHTS_SIZE: &str = "200Gi";

/// How a pod gets its card.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeviceMode {
    /// Dynamic Resource Allocation (`resource.k8s.io/v1`, Kubernetes 1.34+): a claim per pod
    /// for the profile's boards by name, satisfied by tt-operator's DRA driver. The vendor's
    /// supported path.
    #[default]
    Dra,
    /// An extended resource counted in chips, for clusters with a device plugin and no DRA.
    Extended,
}

/// A weights repository at the revision the package pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsPin {
    /// `org/name`.
    pub repo: String,
    /// The pinned commit (or the branch the manifest names).
    pub revision: String,
}

/// The fleet fills its own weights claim (`serve --print k8s --tools-image`): a Job runs
/// `tt-model weights` from the tools image on the package's manifest (a ConfigMap), and every
/// server pod first runs `tt-model weights --check` on the claim, read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsFill {
    /// An image holding the `tt-model` binary on its `PATH`, pinned by digest.
    pub tools_image: String,
    /// The package's wire manifest (`tt_kernel_manifest.json`), as the Job and the check read it.
    pub manifest_json: String,
    /// `Some(size)`: the fleet creates its own ReadWriteMany claim `<name>-hf-hub` of that size;
    /// `None`: the claim [`FleetOptions::weights_claim`] exists already.
    pub create_claim: Option<String>,
    /// `HF_ENDPOINT` for the Job where the renderer had one set (a mirror); `None`: the Hub.
    pub hf_endpoint: Option<String>,
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
    /// Boards each replica claims (the profile's `xN`): the DRA claim's count.
    pub boards: u32,
    /// The profile's board (`p150`), which the DRA claim's selector names.
    pub board: Option<String>,
    /// How a pod gets its card.
    pub devices: DeviceMode,
    /// `--devices extended`'s resource; `None` is [`DEFAULT_EXTENDED_RESOURCE`].
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
    /// A ReadWriteMany claim that keeps the compiled kernels (`TT_METAL_CACHE`) between pods,
    /// one directory per image; `None`: each pod compiles its own (an emptyDir).
    pub kernel_cache_claim: Option<String>,
    /// The log line that says the server is ready, recorded for people reading the fleet.
    pub ready_line: Option<String>,
    /// The fleet fills its weights claim itself; `None`: a person fills it. Applies where the
    /// pods read the weights from the claim (weights, not `--no-weights`).
    pub weights_fill: Option<WeightsFill>,
}

impl FleetOptions {
    /// The documented defaults for an image; the caller sets the rest.
    pub fn new(image: String) -> Self {
        FleetOptions {
            image,
            replicas: 1,
            namespace: None,
            chips: 0,
            boards: 0,
            board: None,
            devices: DeviceMode::Dra,
            board_resource: None,
            hugepages_gib_per_chip: DEFAULT_HUGEPAGES_GIB_PER_CHIP,
            cpu: DEFAULT_CPU.into(),
            memory: DEFAULT_MEMORY.into(),
            startup_timeout: Duration::from_secs(30 * 60),
            weights: Vec::new(),
            weights_claim: DEFAULT_WEIGHTS_CLAIM.into(),
            hf_token_secret: DEFAULT_HF_TOKEN_SECRET.into(),
            kernel_cache_claim: None,
            ready_line: None,
            weights_fill: None,
        }
    }
}
