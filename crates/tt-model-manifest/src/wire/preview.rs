//! The wire manifest of an authoring manifest not packaged yet: what `serve --print` of a
//! `tt-model.yaml` shows, so that a manifest previews through the same launcher and run spec
//! as the package it will become.

use super::{Built, ImageRef, Producer, WireBuild, WireManifest};
use crate::Manifest;

/// The image repository every package is tagged under (`tt-model/<name>:<tag>`).
pub const IMAGE_REPOSITORY_PREFIX: &str = "tt-model";

/// The tag an authoring manifest's image has before `package` built it: what `serve --print`
/// of a `tt-model.yaml` shows in place of the image id.
pub const UNBUILT_TAG: &str = "unbuilt";

impl WireManifest {
    /// The preview of `m` before any build: the image `tt-model/<name>:unbuilt`, no digest,
    /// no provenance, the authored runtime block.
    pub fn preview(m: &Manifest) -> Self {
        let repository = m.image.repository.clone().unwrap_or_else(|| m.name.clone());
        WireManifest::from_manifest(
            m,
            WireBuild {
                image: ImageRef {
                    registry: m.image.registry.clone(),
                    repository,
                    tag: Some(UNBUILT_TAG.into()),
                    digest: None,
                },
                runtime: None,
                built: Built {
                    image: format!("{IMAGE_REPOSITORY_PREFIX}/{}:{UNBUILT_TAG}", m.name),
                    ..Default::default()
                },
                producer: Producer {
                    tt_kernel_version: env!("CARGO_PKG_VERSION").into(),
                    created_at: String::new(),
                    hostname: String::new(),
                },
            },
        )
    }
}
