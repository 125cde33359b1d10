//! Why a fleet cannot be rendered; each message says what to do.

/// A fleet that cannot be rendered.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The image travels in the Hub repo (`image.registry: hf`): no cluster can pull it.
    #[error(
        "{package}'s image travels in its Hub repo (`image.registry: hf`), which a cluster cannot pull\n  \
         → set `image.registry` (e.g. `ghcr.io/acme`) in tt-model.yaml, run `tt-model package --container`, \
         then `tt-model push` to put the image in that registry (or name an image you pushed yourself with --image REF@sha256:…)"
    )]
    NoRegistryImage {
        /// The package name.
        package: String,
    },
    /// The image has a registry but no digest yet: it was never packaged.
    #[error(
        "{package}'s image {reference} has no digest yet (not packaged): a fleet runs an image pinned by digest\n  \
         → run `tt-model package --container` and `tt-model push` (the image goes to `image.registry`), \
         then render the fleet from the pushed package (or pass --image REF@sha256:…)"
    )]
    NoDigest {
        /// The package name.
        package: String,
        /// The reference without a digest.
        reference: String,
    },
    /// An image reference given explicitly is not pinned by digest.
    #[error(
        "image `{reference}` is not pinned by digest: a fleet needs `REPOSITORY@sha256:<64 hex digits>`"
    )]
    NotPinned {
        /// The reference as given.
        reference: String,
    },
    /// A fleet of zero replicas.
    #[error("a fleet needs at least 1 replica")]
    ZeroReplicas,
    /// The profile runs on a card but names no board, so a DRA claim cannot select one.
    #[error(
        "profile `{profile}` runs on a Tenstorrent card but names no `hardware` board, so the fleet's device \
         claim cannot select one: set `serve.hardware` (e.g. p150), or pass --devices extended to ask for \
         chips of an extended resource instead"
    )]
    NoBoard {
        /// The profile.
        profile: String,
    },
    /// `--board-resource` names an extended resource, which a DRA fleet does not ask for.
    #[error(
        "--board-resource names an extended resource, but this fleet claims its boards through DRA \
         (the default): add --devices extended to ask for `{name}` instead"
    )]
    ResourceWithoutExtended {
        /// The name as given.
        name: String,
    },
    /// A resource name that is not `<domain>/<name>`.
    #[error(
        "`{name}` is not an extended resource name: it must be `<domain>/<name>`, e.g. tenstorrent.com/chip"
    )]
    BadResourceName {
        /// The name as given.
        name: String,
    },
    /// The YAML writer refused an object.
    #[error("cannot write the fleet as YAML: {0}")]
    Yaml(#[from] serde_saphyr::ser::Error),
}
