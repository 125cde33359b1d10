//! The local record of each push: `<state>/pushed/<ns>__<name>.json` with the repo, the commit,
//! the staged directory, the bytes sent and (for a registry package) the pushed image by digest, so the commit a package went out as is known
//! without asking the Hub.

use std::path::{Path, PathBuf};

use serde_json::json;
use tt_model_local::Local;

/// Where the record of pushes to `repo` lives.
pub(crate) fn path(local: &Local, repo: &str) -> PathBuf {
    local
        .root()
        .join("pushed")
        .join(format!("{}.json", repo.replace('/', "__")))
}

/// Writes the record (temp file + rename).
pub(crate) fn write(
    local: &Local,
    repo: &str,
    commit: &str,
    dir: &Path,
    bytes_sent: u64,
    image: Option<&str>,
) -> anyhow::Result<PathBuf> {
    let p = path(local, repo);
    let parent = p.parent().expect("a record has a parent");
    std::fs::create_dir_all(parent)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", parent.display()))?;
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let body = json!({
        "repo": repo,
        "commit": commit,
        "dir": dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()),
        "pushed_at": at,
        "bytes_sent": bytes_sent,
        // A registry package's image, pinned by the manifest digest the registry stored.
        "image": image,
    });
    let tmp = parent.join(format!(
        ".{}.{}.tmp",
        repo.replace('/', "__"),
        std::process::id()
    ));
    std::fs::write(&tmp, format!("{body:#}\n"))
        .and_then(|()| std::fs::rename(&tmp, &p))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            anyhow::anyhow!("cannot write {}: {e}", p.display())
        })?;
    Ok(p)
}
