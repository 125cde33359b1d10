//! Where the weights are: a plain `--model-dir`, or the offline Hugging Face cache snapshot
//! `$HF_HOME/hub/models--{org}--{name}/snapshots/{revision}/` (the layout `huggingface_hub`
//! writes; `refs/main` names the revision when none is pinned).

use std::path::{Path, PathBuf};

/// Files a model directory must hold.
pub const REQUIRED_FILES: [&str; 4] = [
    "config.json",
    "processor_config.json",
    "statistics.json",
    "embodiment_id.json",
];

/// Why no usable model directory was found.
#[derive(Debug, thiserror::Error)]
pub enum ModelDirError {
    /// The directory does not exist (or is not a directory).
    #[error("model directory `{0}` does not exist")]
    Missing(PathBuf),
    /// One of [`REQUIRED_FILES`] is absent.
    #[error("model directory `{dir}` lacks `{file}`")]
    MissingFile {
        /// The model directory.
        dir: PathBuf,
        /// The file name it lacks.
        file: String,
    },
    /// Neither a sharded nor a single-file safetensors checkpoint.
    #[error(
        "model directory `{0}` has neither `model.safetensors.index.json` nor `model.safetensors`"
    )]
    NoWeights(PathBuf),
    /// No revision was pinned and the cache's `refs/main` (this path) cannot be read.
    #[error("no revision pinned (TT_WEIGHTS_REVISION) and `{0}` is unreadable")]
    NoRef(PathBuf),
    /// The weights repo (`TT_WEIGHTS_REPO`) is not `org/name`.
    #[error("weights repo `{0}` is not of the form org/name")]
    BadRepo(String),
}

/// The snapshot directory for `repo` at `revision` (or `refs/main`) in the hub cache
/// `hub_cache` (`HF_HUB_CACHE`, by default `$HF_HOME/hub`).
pub fn hf_snapshot(
    hub_cache: &Path,
    repo: &str,
    revision: Option<&str>,
) -> Result<PathBuf, ModelDirError> {
    let (org, name) = repo
        .split_once('/')
        .filter(|(a, b)| !a.is_empty() && !b.is_empty() && !b.contains('/'))
        .ok_or_else(|| ModelDirError::BadRepo(repo.into()))?;
    let root = hub_cache.join(format!("models--{org}--{name}"));
    let rev = match revision {
        Some(r) => r.to_string(),
        None => {
            let refp = root.join("refs/main");
            std::fs::read_to_string(&refp)
                .map_err(|_| ModelDirError::NoRef(refp))?
                .trim()
                .to_string()
        }
    };
    Ok(root.join("snapshots").join(rev))
}

/// Check that `dir` holds a loadable checkpoint.
pub fn check(dir: &Path) -> Result<(), ModelDirError> {
    if !dir.is_dir() {
        return Err(ModelDirError::Missing(dir.into()));
    }
    for f in REQUIRED_FILES {
        if !dir.join(f).is_file() {
            return Err(ModelDirError::MissingFile {
                dir: dir.into(),
                file: f.into(),
            });
        }
    }
    if !dir.join("model.safetensors.index.json").is_file()
        && !dir.join("model.safetensors").is_file()
    {
        return Err(ModelDirError::NoWeights(dir.into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_path_follows_the_hub_layout() {
        let p = hf_snapshot(Path::new("/hf/hub"), "nvidia/GR00T-N1.6-3B", Some("abc")).unwrap();
        assert_eq!(
            p,
            Path::new("/hf/hub/models--nvidia--GR00T-N1.6-3B/snapshots/abc")
        );
        assert!(hf_snapshot(Path::new("/hf/hub"), "noslash", Some("a")).is_err());
        let tmp = std::env::temp_dir().join(format!("gr00t-hf-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("hub/models--o--n/refs")).unwrap();
        std::fs::write(tmp.join("hub/models--o--n/refs/main"), "deadbeef\n").unwrap();
        assert_eq!(
            hf_snapshot(&tmp.join("hub"), "o/n", None).unwrap(),
            tmp.join("hub/models--o--n/snapshots/deadbeef")
        );
        assert!(matches!(
            check(&tmp),
            Err(ModelDirError::MissingFile { .. })
        ));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
