//! Environment variables the Hub client reads, one documented constant each.
//!
//! They follow Python `huggingface_hub` so a user's existing setup keeps working.

use std::path::{Path, PathBuf};

/// Base URL of the Hub (`https://huggingface.co` when unset). Tests point it at a local server.
pub const HF_ENDPOINT: &str = "HF_ENDPOINT";
/// Root of the Hugging Face home (`~/.cache/huggingface` when unset). Holds the token file.
pub const HF_HOME: &str = "HF_HOME";
/// The hub cache itself (`$HF_HOME/hub` when unset). Only this directory is mounted into containers.
pub const HF_HUB_CACHE: &str = "HF_HUB_CACHE";
/// Older spelling of [`HF_HUB_CACHE`], still honoured by Python.
pub const HUGGINGFACE_HUB_CACHE: &str = "HUGGINGFACE_HUB_CACHE";
/// Access token. Passed to containers by name only, never by value.
pub const HF_TOKEN: &str = "HF_TOKEN";
/// `XDG_CACHE_HOME`, the parent of the default HF home.
pub const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";

/// The default public endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Where the Hub client looks: endpoint, cache and token, resolved once from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubEnv {
    /// Base URL of the Hub, without a trailing `/`.
    pub endpoint: String,
    /// The Hugging Face home (`HF_HOME`): where the `token` file is read from.
    pub hf_home: PathBuf,
    /// The hub cache root (`HF_HUB_CACHE`), where snapshots are downloaded.
    pub hub_cache: PathBuf,
    /// The token value for host-side requests; `None` when neither `HF_TOKEN` nor the token file has one.
    pub token: Option<String>,
}

impl HubEnv {
    /// Resolve from the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// Resolve from any lookup function (pure: tests inject the variables).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let home = get("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"));
        let xdg = get(XDG_CACHE_HOME)
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".cache"));
        let hf_home = get(HF_HOME)
            .map(PathBuf::from)
            .unwrap_or_else(|| xdg.join("huggingface"));
        let hub_cache = get(HF_HUB_CACHE)
            .or_else(|| get(HUGGINGFACE_HUB_CACHE))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        let endpoint = get(HF_ENDPOINT)
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = get(HF_TOKEN).or_else(|| read_token_file(&hf_home));
        HubEnv {
            endpoint,
            hf_home,
            hub_cache,
            token,
        }
    }
}

fn read_token_file(hf_home: &Path) -> Option<String> {
    let text = std::fs::read_to_string(hf_home.join("token")).ok()?;
    let t = text.trim();
    (!t.is_empty()).then(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> HubEnv {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        HubEnv::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_follow_python_huggingface_hub() {
        let e = env(&[("HOME", "/home/u")]);
        assert_eq!(e.endpoint, "https://huggingface.co");
        assert_eq!(e.hf_home, PathBuf::from("/home/u/.cache/huggingface"));
        assert_eq!(e.hub_cache, PathBuf::from("/home/u/.cache/huggingface/hub"));
    }

    #[test]
    fn hub_cache_overrides_and_endpoint_slash_trimmed() {
        let e = env(&[
            ("HOME", "/h"),
            ("HF_HOME", "/x/hf"),
            ("HUGGINGFACE_HUB_CACHE", "/old"),
            ("HF_ENDPOINT", "http://127.0.0.1:9/"),
            ("HF_TOKEN", "hf_abc"),
        ]);
        assert_eq!(e.hub_cache, PathBuf::from("/old"));
        assert_eq!(e.endpoint, "http://127.0.0.1:9");
        assert_eq!(e.token.as_deref(), Some("hf_abc"));
        let e = env(&[("HF_HUB_CACHE", "/new"), ("HUGGINGFACE_HUB_CACHE", "/old")]);
        assert_eq!(e.hub_cache, PathBuf::from("/new"));
    }
}
