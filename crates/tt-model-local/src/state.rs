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

    /// Where `package` writes its build logs: `<state root>/build`.
    pub fn build_log_dir(&self) -> PathBuf {
        self.root.join("build")
    }
}

/// The state root: `TT_MODEL_HOME`, else `$XDG_CACHE_HOME/tt-model`, else
/// `~/.cache/tt-model`, with `get` reading the environment. The original's rename shims apply
/// (`tenstorrent`'s `tt` applies the same ones when it reads our state): `TT_KERNEL_HOME`
/// stands in for an unset `TT_MODEL_HOME`, and a pre-rename `tt-kernel` directory is used
/// while no `tt-model` one exists beside it.
pub fn state_root_from(get: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    if let Some(h) = env_with_legacy(&get, "TT_MODEL_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h);
    }
    // The XDG spec: a relative value is invalid and ignored.
    let cache = get("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(get("HOME").unwrap_or_else(|| "/root".into())).join(".cache")
        });
    data_dir(&cache)
}

/// The prefix of the tool's environment variables, and the one it had before the rename.
const ENV_PREFIX: &str = "TT_MODEL_";
const LEGACY_ENV_PREFIX: &str = "TT_KERNEL_";

/// `name` (a `TT_MODEL_*` variable) as `get` reads it, else its pre-rename `TT_KERNEL_*`
/// spelling, as the original's `compat.env` does: a set variable wins even when empty.
pub fn env_with_legacy(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
    name: &str,
) -> Option<std::ffi::OsString> {
    get(name).or_else(|| {
        let rest = name.strip_prefix(ENV_PREFIX)?;
        get(&format!("{LEGACY_ENV_PREFIX}{rest}"))
    })
}

/// Every `TT_KERNEL_*` variable of `vars` whose `TT_MODEL_*` name is not among them, as the
/// `(TT_MODEL_* name, value)` pairs to set: how the CLI honours the legacy names for every
/// variable at once (clap's `env =` attributes included) before anything reads them.
pub fn legacy_env_to_adopt(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, std::ffi::OsString)> {
    let vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = vars.into_iter().collect();
    let set = |n: &str| vars.iter().any(|(k, _)| k.to_str() == Some(n));
    let mut adopt: Vec<(String, std::ffi::OsString)> = vars
        .iter()
        .filter_map(|(k, v)| {
            let rest = k.to_str()?.strip_prefix(LEGACY_ENV_PREFIX)?;
            let current = format!("{ENV_PREFIX}{rest}");
            (!rest.is_empty() && !set(&current)).then(|| (current, v.clone()))
        })
        .collect();
    adopt.sort();
    adopt
}

/// `<base>/tt-model`, or an existing pre-rename `<base>/tt-kernel` while `tt-model` does not
/// exist (the original's `compat.data_dir`; creating `tt-model` beside it would orphan the
/// legacy `installed.json`, so both tools keep agreeing on one directory).
pub fn data_dir(base: &Path) -> PathBuf {
    let current = base.join("tt-model");
    let legacy = base.join("tt-kernel");
    if !current.exists() && legacy.is_dir() {
        return legacy;
    }
    current
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
        assert_eq!(
            state_root_from(env(&[("TT_KERNEL_HOME", "/k"), ("HOME", "/h")])),
            PathBuf::from("/k"),
            "the pre-rename variable stands in"
        );
        assert_eq!(
            state_root_from(env(&[("TT_MODEL_HOME", "/t"), ("TT_KERNEL_HOME", "/k")])),
            PathBuf::from("/t")
        );
    }

    #[test]
    fn a_pre_rename_directory_is_used_until_a_new_one_exists() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(
            data_dir(t.path()),
            t.path().join("tt-model"),
            "neither exists"
        );
        std::fs::create_dir(t.path().join("tt-kernel")).unwrap();
        assert_eq!(data_dir(t.path()), t.path().join("tt-kernel"));
        std::fs::create_dir(t.path().join("tt-model")).unwrap();
        assert_eq!(
            data_dir(t.path()),
            t.path().join("tt-model"),
            "the new one wins"
        );
        let xdg = t.path().as_os_str().to_owned();
        let root = state_root_from(|k| (k == "XDG_CACHE_HOME").then(|| xdg.clone()));
        assert_eq!(root, t.path().join("tt-model"));
    }

    #[test]
    fn legacy_variables_are_adopted_unless_the_new_name_is_set() {
        let vars = [
            ("TT_KERNEL_READY_TIMEOUT", "60"),
            ("TT_KERNEL_HOME", "/k"),
            ("TT_MODEL_HOME", "/t"),
            ("TT_KERNEL_", "nothing"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        assert_eq!(
            legacy_env_to_adopt(vars),
            vec![("TT_MODEL_READY_TIMEOUT".to_string(), "60".into())]
        );
        let get = |k: &str| (k == "TT_KERNEL_NO_PIN").then(|| "1".into());
        assert_eq!(env_with_legacy(get, "TT_MODEL_NO_PIN"), Some("1".into()));
        assert_eq!(env_with_legacy(get, "OTHER"), None);
    }
}
