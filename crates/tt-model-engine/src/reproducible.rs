//! Bit-reproducible images: the same inputs give the same image id, built cold or warm.
//!
//! We build with the classic builder ([`crate::build`]), which stamps every build with its
//! wall-clock time (the config's `created` and history, the mtimes of what `RUN` steps write)
//! and with its throwaway containers' ids. BuildKit's `SOURCE_DATE_EPOCH` rewrite needs
//! BuildKit 0.13, which dockerd 20.10 does not carry, so we do what it does after the fact:
//! the built image is exported as an OCI layout, `tt_model_oci::reproducible` normalises each
//! layer the build added and the config with it, and the result is loaded back into the
//! engine.
//!
//! The layout written here is the package's `image/`, so the export phase need not save the
//! image again; its index records the build it was made from
//! (`tt_model_oci::reproducible::BUILD_ID_ANNOTATION`), so a re-package served from the layer
//! cache reuses it.

use std::path::PathBuf;

use tt_model_oci::OciLayout;
use tt_model_oci::reproducible::{Reproduced, normalize_layout};

use crate::client::Client;
use crate::error::EngineError;
use crate::export::image_error;
use crate::oci_load::LoadError;

/// What to make reproducible.
#[derive(Debug, Clone)]
pub struct Reproduce {
    /// The built image (its id, as the build returned it).
    pub built: String,
    /// The base image of its final stage: its layers are kept as they are.
    pub base: String,
    /// `SOURCE_DATE_EPOCH`: seconds since 1970 that later times are clamped to.
    pub epoch: u64,
    /// Where the normalised OCI layout goes (must not exist, or be empty).
    pub dest: PathBuf,
    /// The repository the result is tagged in; the tag is the first 12 hex digits of its id.
    pub repository: String,
}

impl Client {
    /// Exports `request.built`, normalises it for `request.epoch` into `request.dest` and
    /// loads the result. The layout names it `<repository>:<12 hex of its id>`, but the engine
    /// gets it untagged: the caller tags it once it passed its checks, so a failed package
    /// leaves no tag on an image no package records.
    pub async fn reproducible_image(&self, request: &Reproduce) -> Result<Reproduced, LoadError> {
        let base_layers = self.diff_ids(&request.base).await?;
        self.export_oci_layout(&request.built, &request.dest, "")
            .await?;
        let (dest, built, epoch, repository) = (
            request.dest.clone(),
            request.built.clone(),
            request.epoch,
            request.repository.clone(),
        );
        let done = tokio::task::spawn_blocking(move || {
            normalize_layout(&dest, &base_layers, epoch, &built, |id| {
                let hex = id.trim_start_matches("sha256:");
                format!("{repository}:{}", &hex[..hex.len().min(12)])
            })
        })
        .await
        .map_err(|e| EngineError::BadArchive {
            reference: request.built.clone(),
            detail: format!("the normalising task failed: {e}"),
        })?
        .map_err(|e| match e {
            tt_model_oci::convert::ImageError::Layout(e) => LoadError::Layout(e),
            other => image_error(&request.built, other).into(),
        })?;
        let layout = OciLayout::open(&request.dest)?;
        self.load_oci_layout(&layout, "").await?;
        Ok(done)
    }

    /// The uncompressed layer digests of an image, base first.
    pub async fn diff_ids(&self, reference: &str) -> Result<Vec<String>, EngineError> {
        let inspect = self
            .docker()
            .inspect_image(reference)
            .await
            .map_err(|source| EngineError::InspectImage {
                reference: reference.to_string(),
                source,
            })?;
        Ok(inspect.root_fs.and_then(|r| r.layers).unwrap_or_default())
    }
}
