//! The local record of each push: `<state>/pushed/<ns>__<name>.json` with the repo, the
//! commit, the staged directory, the bytes sent and (for a registry package) the pushed image
//! by digest, so the commit a package went out as is known without asking the Hub.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::{Local, LocalError};

/// One push, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRecord<'a> {
    /// The Hub repository (`org/name`).
    pub repo: &'a str,
    /// The commit the push made (or found already there).
    pub commit: &'a str,
    /// The staged package directory that was pushed.
    pub dir: &'a Path,
    /// Bytes uploaded.
    pub bytes_sent: u64,
    /// A registry package's image, pinned by the manifest digest the registry stored.
    pub image: Option<&'a str>,
}

impl Local {
    /// Where the record of pushes to `repo` lives.
    pub fn push_record_path(&self, repo: &str) -> PathBuf {
        self.root()
            .join("pushed")
            .join(format!("{}.json", repo.replace('/', "__")))
    }

    /// Writes the record of a push (temp file + rename) and returns its path.
    pub fn record_push(&self, record: &PushRecord<'_>) -> Result<PathBuf, LocalError> {
        let p = self.push_record_path(record.repo);
        let parent = p.parent().expect("a record has a parent");
        std::fs::create_dir_all(parent).map_err(|detail| LocalError::Io {
            action: "create",
            path: parent.to_path_buf(),
            detail,
        })?;
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let body = json!({
            "repo": record.repo,
            "commit": record.commit,
            "dir": record.dir.canonicalize().unwrap_or_else(|_| record.dir.to_path_buf()),
            "pushed_at": at,
            "bytes_sent": record.bytes_sent,
            "image": record.image,
        });
        let tmp = parent.join(format!(
            ".{}.{}.tmp",
            record.repo.replace('/', "__"),
            std::process::id()
        ));
        std::fs::write(&tmp, format!("{body:#}\n"))
            .and_then(|()| std::fs::rename(&tmp, &p))
            .map_err(|detail| {
                let _ = std::fs::remove_file(&tmp);
                LocalError::Io {
                    action: "write",
                    path: p.clone(),
                    detail,
                }
            })?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use tt_model_hub::env::HubEnv;

    use super::*;

    #[test]
    fn a_push_is_recorded_under_the_state_root_by_repo() {
        let dir = tempfile::tempdir().unwrap();
        let hub = HubEnv {
            endpoint: "http://127.0.0.1:9".into(),
            hf_home: dir.path().join("hf"),
            hub_cache: dir.path().join("hf/hub"),
            token: None,
        };
        let local = Local::new(dir.path().join("state"), hub);
        let staged = dir.path().join("out/pkg");
        std::fs::create_dir_all(&staged).unwrap();
        let record = PushRecord {
            repo: "acme/pkg",
            commit: "c0ffee",
            dir: &staged,
            bytes_sent: 42,
            image: Some("127.0.0.1:5000/acme/pkg@sha256:aa"),
        };
        let p = local.record_push(&record).unwrap();
        assert_eq!(p, dir.path().join("state/pushed/acme__pkg.json"));
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["repo"], "acme/pkg");
        assert_eq!(v["commit"], "c0ffee");
        assert_eq!(v["bytes_sent"], 42);
        assert_eq!(v["image"], "127.0.0.1:5000/acme/pkg@sha256:aa");
        assert_eq!(v["dir"], staged.canonicalize().unwrap().to_str().unwrap());
        // A second push replaces the record whole.
        local
            .record_push(&PushRecord {
                commit: "beef",
                image: None,
                ..record
            })
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(
            (v["commit"].as_str(), v["image"].is_null()),
            (Some("beef"), true)
        );
        assert_eq!(std::fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }
}
