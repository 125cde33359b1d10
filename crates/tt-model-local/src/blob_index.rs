//! Which repository of an OCI registry holds which blob, remembered in
//! `<state>/registry-blobs.json` (per host: digest → repository), as the Docker CLI remembers
//! it, so a second package on the same base mounts the base layers instead of sending them
//! again. Best effort: a lost or unreadable record only costs a mount.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::state::Local;

/// The blob → repository memory of pushes.
#[derive(Debug, Clone)]
pub struct BlobIndex {
    path: PathBuf,
}

impl BlobIndex {
    /// The index under `local`'s state root.
    pub fn under(local: &Local) -> Self {
        BlobIndex {
            path: local.root().join("registry-blobs.json"),
        }
    }

    /// digest → repository for the registry at `host`; empty when nothing is recorded.
    pub fn known(&self, host: &str) -> HashMap<String, String> {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return HashMap::new();
        };
        serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| serde_json::from_value(v[host].clone()).ok())
            .unwrap_or_default()
    }

    /// Records that `repository` on `host` holds `digests` (temp file + rename, so a reader
    /// never sees half a file).
    pub fn remember(&self, host: &str, repository: &str, digests: &[String]) {
        let mut all: Value = std::fs::read(&self.path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        let Some(hosts) = all.as_object_mut() else {
            return;
        };
        let host_map = hosts
            .entry(host.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(m) = host_map.as_object_mut() {
            for d in digests {
                m.insert(d.clone(), Value::String(repository.to_string()));
            }
        }
        let Some(parent) = self.path.parent() else {
            return;
        };
        let tmp = parent.join(format!(".registry-blobs.{}.tmp", std::process::id()));
        let _ = std::fs::create_dir_all(parent)
            .and_then(|()| std::fs::write(&tmp, format!("{all:#}\n")))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_remembered_per_host_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let local = Local::new(
            dir.path().to_path_buf(),
            tt_model_hub::env::HubEnv::from_lookup(|_| None),
        );
        let index = BlobIndex::under(&local);
        assert!(index.known("r:5000").is_empty());
        index.remember("r:5000", "tt/base", &["sha256:a".into(), "sha256:b".into()]);
        index.remember("other:5000", "x/y", &["sha256:a".into()]);
        let again = BlobIndex::under(&local).known("r:5000");
        assert_eq!(again.len(), 2);
        assert_eq!(again["sha256:a"], "tt/base");
        assert_eq!(
            BlobIndex::under(&local).known("other:5000")["sha256:a"],
            "x/y"
        );
    }
}
