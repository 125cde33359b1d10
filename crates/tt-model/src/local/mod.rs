//! What this machine holds and runs, which every command reads: the state root
//! (`TT_MODEL_HOME`), staged and pulled packages and their installed records, the weights in the
//! HF cache, images in the engine, and the host's devices and running containers. The files
//! under `commands/` decide and print; they reach this machine through here.

use std::path::PathBuf;

pub(crate) mod host;
pub(crate) mod image;
pub(crate) mod installed;
pub(crate) mod package;
pub(crate) mod target;
pub(crate) mod weights;

/// The one state root every command reads and writes under: `TT_MODEL_HOME`, else
/// `$XDG_CACHE_HOME/tt-model`, else `~/.cache/tt-model`.
pub fn state_root() -> PathBuf {
    if let Some(h) = std::env::var_os("TT_MODEL_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h);
    }
    // The XDG spec: a relative value is invalid and ignored.
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        });
    cache.join("tt-model")
}
