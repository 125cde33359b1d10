//! The docker-archive's `manifest.json` (what dockerd 20.10 saves and loads; not an OCI
//! format, so not in `oci-spec`): one entry per image, naming its config and layer files.

use serde::{Deserialize, Deserializer, Serialize};

/// One image of a docker-archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ArchiveImage {
    /// The config file's name in the archive (`<hex>.json`).
    pub config: String,
    /// The tags to give the image on load (`null` when saved by id).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub repo_tags: Vec<String>,
    /// The layer tars' names, base first.
    pub layers: Vec<String>,
}

fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_saved_by_id_has_null_tags() {
        let saved = r#"[{"Config":"ab.json","RepoTags":null,"Layers":["x/layer.tar"]}]"#;
        let images: Vec<ArchiveImage> = serde_json::from_str(saved).unwrap();
        assert_eq!(images[0].repo_tags, Vec::<String>::new());
        assert_eq!(images[0].layers, ["x/layer.tar"]);
    }
}
