//! Export an image as an OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/…`).
//!
//! dockerd 20.10 only saves docker-archives (`manifest.json`, `<id>.json`, `<dir>/layer.tar`);
//! OCI-layout output arrived in Docker 25. So we stream the archive to disk, then
//! `tt_model_oci::convert` rewrites it as a layout (deterministic for a given image).

use std::fs;
use std::path::Path;

use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tt_model_oci::convert::{ImageError, OciExport, docker_archive_to_oci};

use crate::client::Client;
use crate::error::EngineError;

impl Client {
    /// Saves `reference` and writes it as an OCI layout at `dest`, which must not exist or be
    /// empty. `ref_name` becomes the index's `org.opencontainers.image.ref.name`.
    pub async fn export_oci_layout(
        &self,
        reference: &str,
        dest: &Path,
        ref_name: &str,
    ) -> Result<OciExport, EngineError> {
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| EngineError::Write { path, source }
        };
        if dest.exists()
            && fs::read_dir(dest)
                .map_err(write_err(dest))?
                .next()
                .is_some()
        {
            return Err(EngineError::Write {
                path: dest.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "the destination is not empty",
                ),
            });
        }
        fs::create_dir_all(dest).map_err(write_err(dest))?;
        let archive = dest.join(".docker-save.tar");
        let mut file = tokio::fs::File::create(&archive)
            .await
            .map_err(write_err(&archive))?;
        let mut stream = self.docker().export_image(reference);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|source| EngineError::Export {
                reference: reference.to_string(),
                source,
            })?;
            file.write_all(&chunk).await.map_err(write_err(&archive))?;
        }
        file.flush().await.map_err(write_err(&archive))?;
        drop(file);
        let (dest_owned, ref_name, reference_owned) = (
            dest.to_path_buf(),
            ref_name.to_string(),
            reference.to_string(),
        );
        let result = tokio::task::spawn_blocking(move || {
            let out = docker_archive_to_oci(&archive, &dest_owned, &ref_name)
                .map_err(|e| image_error(&reference_owned, e));
            let _ = fs::remove_file(&archive);
            out
        })
        .await
        .map_err(|e| EngineError::BadArchive {
            reference: reference.to_string(),
            detail: format!("the conversion task failed: {e}"),
        })?;
        if result.is_err() {
            let _ = fs::remove_dir_all(dest);
        }
        result
    }
}

/// An image-format failure as the engine crate reports it, for the image `reference`.
pub(crate) fn image_error(reference: &str, e: ImageError) -> EngineError {
    match e {
        ImageError::Write { path, source } => EngineError::Write { path, source },
        other => EngineError::BadArchive {
            reference: reference.to_string(),
            detail: other.to_string(),
        },
    }
}
