//! The settings every command shares, resolved once: the state root (`TT_MODEL_HOME`) and
//! where the Hub client looks ([`HubEnv`]). The CLI builds one [`Local`] from the environment
//! and passes it down; nothing below reads these variables again.

use std::path::{Path, PathBuf};

use tt_model_hub::env::HubEnv;

use crate::localdb::LocalDb;

/// The file name of a staged package's manifest.
pub use tt_model_manifest::wire::MANIFEST_NAME as WIRE_MANIFEST;

/// This machine's tt-model state and Hub settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    root: PathBuf,
    hub: HubEnv,
    hf_token_in_env: bool,
}

impl Local {
    /// The settings as the process environment gives them (see [`state_root_from`]).
    pub fn from_env() -> Self {
        let mut local = Local::new(state_root_from(|k| std::env::var_os(k)), HubEnv::from_env());
        local.hf_token_in_env = std::env::var_os("HF_TOKEN").is_some_and(|v| !v.is_empty());
        local
    }

    /// Explicit settings (tests, and callers that resolved them elsewhere).
    pub fn new(root: PathBuf, hub: HubEnv) -> Self {
        Local {
            root,
            hub,
            hf_token_in_env: false,
        }
    }

    /// `HF_TOKEN` is set in this process's environment, so a served container is given it
    /// by name (never by value on a command line).
    pub fn hf_token_in_env(&self) -> bool {
        self.hf_token_in_env
    }

    /// The one state root every command reads and writes under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the Hub client looks: endpoint, cache and token.
    pub fn hub(&self) -> &HubEnv {
        &self.hub
    }

    /// The installed-packages database, `installed.json` under the state root.
    pub fn db(&self) -> LocalDb {
        LocalDb::under(&self.root)
    }

    /// Where `pull` keeps a package's manifest: `pulled/<org>__<name>/tt_kernel_manifest.json`.
    pub fn pulled_manifest(&self, repo_id: &str) -> PathBuf {
        self.root
            .join("pulled")
            .join(repo_id.replace('/', "__"))
            .join(WIRE_MANIFEST)
    }

    /// The per-package state directory `<state root>/<name>`.
    pub fn package_state_dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
}

/// The state root: `TT_MODEL_HOME`, else `$XDG_CACHE_HOME/tt-model`, else
/// `~/.cache/tt-model`, with `get` reading the environment.
pub fn state_root_from(get: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    if let Some(h) = get("TT_MODEL_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h);
    }
    // The XDG spec: a relative value is invalid and ignored.
    let cache = get("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(get("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        });
    cache.join("tt-model")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_root_follows_tt_model_home_then_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(*v))
            }
        };
        assert_eq!(
            state_root_from(env(&[("TT_MODEL_HOME", "/t"), ("HOME", "/h")])),
            PathBuf::from("/t")
        );
        assert_eq!(
            state_root_from(env(&[
                ("TT_MODEL_HOME", ""),
                ("XDG_CACHE_HOME", "/x"),
                ("HOME", "/h")
            ])),
            PathBuf::from("/x/tt-model")
        );
        assert_eq!(
            state_root_from(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])),
            PathBuf::from("/h/.cache/tt-model"),
            "a relative XDG_CACHE_HOME is ignored"
        );
    }
}
