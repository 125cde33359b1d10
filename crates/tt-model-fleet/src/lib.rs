//! Kubernetes fleets for a packaged model: `tt-model serve TARGET --print k8s` renders a
//! Deployment, a Service and a PodDisruptionBudget (and, on a card, the ResourceClaimTemplate
//! its pods claim their boards from) from the same [`RunSpec`] that `serve`
//! composes for one container, so a fleet keeps what `serve` knows (the card's device and
//! hugepages, the hardening, the environment, the port, readiness on the health path, weights
//! at the pinned revision) instead of a hand-written copy of it.
//!
//! Everything here is a pure function of its inputs: [`render`] builds typed `k8s-openapi`
//! objects (API version 1.34, the first with `resource.k8s.io/v1`) and [`Fleet::to_yaml`]
//! writes them as multi-document YAML.
//! [`pinned_image`] decides which image reference a cluster can pull (a registry image by
//! digest) and says how to get one when the package has none.
//!
//! [`RunSpec`]: tt_model_engine::run_spec::RunSpec

#![warn(missing_docs)]

mod card;
mod error;
mod image;
mod names;
mod options;
mod pod;
mod render;
mod weights_job;

pub use card::board_selector;
pub use error::FleetError;
pub use image::{check_pinned, pinned_image};
pub use options::{
    BOARD_NAME_ATTRIBUTE, DEFAULT_CPU, DEFAULT_EXTENDED_RESOURCE, DEFAULT_HF_TOKEN_SECRET,
    DEFAULT_HUGEPAGES_GIB_PER_CHIP, DEFAULT_MEMORY, DEFAULT_WEIGHTS_CLAIM, DEFAULT_WEIGHTS_SIZE,
    DEVICE_CLASS, DeviceMode, FleetOptions, HAS_TT_LABEL, HF_TOKEN_SECRET_KEY, NFD_PCI_LABEL,
    WeightsFill, WeightsPin,
};
pub use render::{Fleet, render};
pub use weights_job::{MANIFEST_DIR, MANIFEST_PATH};
