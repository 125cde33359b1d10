//! The top of an OCI image layout: `index.json` naming the one image manifest a package
//! ships, and the `oci-layout` marker. One writer for the layouts the engine exports and the
//! ones a registry pull lays down, so both read back the same way.

use std::path::{Path, PathBuf};

use oci_spec::image::{Descriptor, ImageIndexBuilder, MediaType, OciLayoutBuilder, SCHEMA_VERSION};

/// The annotation that names an image inside a layout (`org.opencontainers.image.ref.name`).
pub const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// Why the top of a layout could not be written.
#[derive(Debug, thiserror::Error)]
pub enum LayoutWriteError {
    /// The index or marker could not be described (an invalid descriptor).
    #[error("cannot describe the layout as OCI: {0}")]
    Spec(#[from] oci_spec::OciSpecError),
    /// A file could not be written.
    #[error("cannot write `{}`", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Writes `dir/index.json`, listing `manifest` annotated with `ref_name`, and
/// `dir/oci-layout` (version 1.0.0). The blobs are the caller's.
pub fn write_index(
    dir: &Path,
    mut manifest: Descriptor,
    ref_name: &str,
) -> Result<(), LayoutWriteError> {
    let mut annotations = manifest.annotations().clone().unwrap_or_default();
    annotations.insert(REF_NAME_ANNOTATION.to_string(), ref_name.to_string());
    manifest.set_annotations(Some(annotations));
    let index = ImageIndexBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![manifest])
        .build()?;
    let layout = OciLayoutBuilder::default()
        .image_layout_version("1.0.0")
        .build()?;
    let write = |name: &str, bytes: Vec<u8>| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|source| LayoutWriteError::Io { path, source })
    };
    write(
        "index.json",
        serde_json::to_vec_pretty(&index).expect("OCI types serialize"),
    )?;
    write(
        "oci-layout",
        serde_json::to_vec(&layout).expect("OCI types serialize"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr as _;

    #[test]
    fn index_names_the_manifest_and_the_marker_has_its_version() {
        let dir = std::env::temp_dir().join(format!("tt-model-oci-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let digest =
            oci_spec::image::Digest::from_str(&format!("sha256:{}", "a".repeat(64))).unwrap();
        let d = Descriptor::new(MediaType::ImageManifest, 42, digest);
        write_index(&dir, d, "tt-model/x:1").unwrap();
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
        assert_eq!(index["schemaVersion"], 2);
        assert_eq!(index["manifests"][0]["size"], 42);
        assert_eq!(
            index["manifests"][0]["annotations"][REF_NAME_ANNOTATION],
            "tt-model/x:1"
        );
        let marker: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("oci-layout")).unwrap()).unwrap();
        assert_eq!(marker["imageLayoutVersion"], "1.0.0");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
