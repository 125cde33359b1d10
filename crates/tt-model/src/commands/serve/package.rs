//! The served package as serve needs it, read from a wire manifest (`tt_kernel_manifest.json`).
//!
//! The reader is tolerant by design: it accepts both field spellings the Python original
//! accepts (`repo_id`/`repo`) and ignores what serve does not use, so a package staged by
//! another tt-model version still serves. Profile merging follows the original's deep merge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

/// The file name of a staged package's manifest.
pub const WIRE_MANIFEST: &str = "tt_kernel_manifest.json";

/// The weights a package serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsRef {
    pub repo_id: String,
    pub revision: String,
    pub allow: Vec<String>,
    pub ignore: Vec<String>,
}

/// One serve profile, merged over the shared defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    /// The merged settings object (ServeSettings fields).
    pub settings: serde_json::Map<String, Value>,
}

impl Profile {
    fn str(&self, k: &str) -> Option<String> {
        self.settings
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
    fn u64(&self, k: &str) -> Option<u64> {
        self.settings.get(k).and_then(Value::as_u64)
    }
    pub fn hardware(&self) -> Option<String> {
        self.str("hardware")
    }
    pub fn mesh_device(&self) -> Option<String> {
        self.str("mesh_device")
    }
    /// Chips the profile needs (from `hardware`), or 1.
    pub fn chip_count(&self) -> usize {
        self.hardware()
            .and_then(|h| hardware_chips(&h))
            .unwrap_or(1)
    }
    /// `serve.args`, flattened (`[k, v]` pairs become two tokens).
    pub fn args(&self) -> Vec<String> {
        let mut out = Vec::new();
        for a in self
            .settings
            .get("args")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match a {
                Value::String(s) => out.push(s.clone()),
                Value::Array(pair) => out.extend(pair.iter().map(value_text)),
                other => out.push(value_text(other)),
            }
        }
        out
    }
    pub fn env(&self) -> BTreeMap<String, String> {
        self.settings
            .get("env")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), value_text(v))).collect())
            .unwrap_or_default()
    }
    fn capability(&self, k: &str) -> Option<String> {
        self.settings
            .get("capabilities")
            .and_then(|c| c.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A package ready to serve.
#[derive(Debug, Clone)]
pub struct Package {
    pub manifest_path: PathBuf,
    pub name: String,
    pub schema_version: String,
    pub image: String,
    pub kind: String,
    pub weights: Option<WeightsRef>,
    pub profiles: Vec<Profile>,
    pub default_profile: String,
    pub runtime: serde_json::Map<String, Value>,
}

impl Package {
    /// Read and interpret a wire manifest.
    pub fn load(path: &Path) -> anyhow::Result<Package> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: not valid JSON: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        Self::from_json(path, &json)
    }

    pub fn from_json(path: &Path, j: &Value) -> anyhow::Result<Package> {
        let where_ = path.display();
        let name = j
            .get("name")
            .and_then(Value::as_str)
            .with_context(|| format!("{where_}: no `name`"))?;
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            || name.is_empty()
            || name.starts_with('.')
        {
            bail!(
                "{where_}: unsafe package name '{name}': refusing to derive a container name or path from it"
            );
        }
        if let Some(v) = j.get("schema_version").map(value_text)
            && !matches!(v.as_str(), "5" | "5.1")
        {
            bail!(
                "{where_}: Unsupported bundle schema_version '{v}'; this tt-model serves schema(s) 5, 5.1. Re-publish the bundle with a current tt-model."
            );
        }
        let Some(c) = j.get("container").filter(|c| c.is_object()) else {
            bail!(
                "{where_} is not a container package (no `container` block); tt-model serves container packages only"
            );
        };
        let kind = c
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("http-server")
            .to_string();
        let image =
            image_ref(c, name).with_context(|| format!("{where_}: no `container.image`"))?;
        let empty = serde_json::Map::new();
        let base = c.get("serve").and_then(Value::as_object).unwrap_or(&empty);
        let mut profiles = Vec::new();
        for p in c
            .get("serve_profiles")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let pname = p
                .get("name")
                .and_then(Value::as_str)
                .with_context(|| format!("{where_}: a serve profile has no name"))?;
            let mut settings = base.clone();
            deep_merge(&mut settings, p.as_object().unwrap_or(&empty));
            settings.remove("name");
            settings.remove("description");
            profiles.push(Profile {
                name: pname.to_string(),
                settings,
            });
        }
        if profiles.is_empty() {
            profiles.push(Profile {
                name: "default".into(),
                settings: base.clone(),
            });
        }
        let default_profile = c
            .get("default_profile")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| profiles[0].name.clone());
        let weights = j.get("weights").filter(|w| w.is_object()).and_then(|w| {
            let repo = w
                .get("repo_id")
                .or_else(|| w.get("repo"))
                .and_then(Value::as_str)?;
            let list = |k: &str| -> Vec<String> {
                w.get(k)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            };
            Some(WeightsRef {
                repo_id: repo.to_string(),
                revision: w
                    .get("revision")
                    .and_then(Value::as_str)
                    .unwrap_or("main")
                    .to_string(),
                allow: list("allow_patterns"),
                ignore: list("ignore_patterns"),
            })
        });
        Ok(Package {
            manifest_path: path.to_path_buf(),
            name: name.to_string(),
            schema_version: j.get("schema_version").map(value_text).unwrap_or_default(),
            image,
            kind,
            weights,
            profiles,
            default_profile,
            runtime: c
                .get("runtime")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        })
    }

    /// The chosen profile, or a clear error listing the available ones.
    pub fn profile(&self, name: Option<&str>) -> anyhow::Result<&Profile> {
        let want = name.unwrap_or(&self.default_profile);
        self.profiles
            .iter()
            .find(|p| p.name == want)
            .ok_or_else(|| {
                let names: Vec<&str> = self.profiles.iter().map(|p| p.name.as_str()).collect();
                anyhow::Error::new(crate::UserError(format!(
                    "no serve profile named '{want}'; available: {}",
                    names.join(", ")
                )))
            })
    }

    /// Profile names, default first.
    pub fn profile_names(&self) -> Vec<String> {
        let mut v = vec![self.default_profile.clone()];
        v.extend(
            self.profiles
                .iter()
                .map(|p| p.name.clone())
                .filter(|n| *n != self.default_profile),
        );
        v
    }

    /// The log line that says the server is ready.
    pub fn ready_line(&self) -> Option<String> {
        if let Some(l) = self.runtime.get("ready_line").and_then(Value::as_str) {
            return Some(l.to_string());
        }
        match self.kind.as_str() {
            "vllm-fork" => Some("Server ready after".into()),
            "vllm-plugin" | "tt-dit-server" => Some("Application startup complete".into()),
            _ => None,
        }
    }

    /// The health endpoint probed for readiness.
    pub fn health_path(&self) -> String {
        self.runtime
            .get("health_path")
            .or_else(|| self.runtime.get("health"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| "/health".into())
    }

    /// The manifest selects a runtime that needs no card (`runtime.device: none|cpu`).
    pub fn runs_without_card(&self) -> bool {
        matches!(
            self.runtime.get("device").and_then(Value::as_str),
            Some("none" | "cpu" | "emulation")
        )
    }

    /// `HF_MODEL`: the weights id, or the package name when it has no weights.
    pub fn weights_id(&self) -> String {
        self.weights
            .as_ref()
            .map(|w| w.repo_id.clone())
            .unwrap_or_else(|| self.name.clone())
    }

    /// The server argv for `profile` on `port` (§4.7 of the reference: one launcher per kind).
    pub fn launcher_argv(&self, p: &Profile, port: u16) -> Vec<String> {
        let port_s = port.to_string();
        let w = self.weights_id();
        let mut a: Vec<String> = Vec::new();
        let mut push = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
        match self.kind.as_str() {
            "vllm-plugin" => {
                push(&["vllm", "serve", &w]);
                if let Some(n) = p.u64("max_model_len") {
                    push(&["--max-model-len", &n.to_string()]);
                }
                if let Some(n) = p.u64("max_num_seqs") {
                    push(&["--max-num-seqs", &n.to_string()]);
                }
                if let Some(n) = p.u64("block_size") {
                    push(&["--block-size", &n.to_string()]);
                }
                if let Some(cfg) = p.settings.get("additional_config").filter(|v| !v.is_null()) {
                    push(&["--additional-config", &cfg.to_string()]);
                }
                if let Some(t) = p.capability("tool_parser") {
                    push(&["--enable-auto-tool-choice", "--tool-call-parser", &t]);
                }
                if let Some(r) = p.capability("reasoning_parser") {
                    push(&["--reasoning_parser", &r]);
                }
                a.extend(p.args());
                a.extend(["--port".to_string(), port_s]);
            }
            "vllm-fork" => {
                push(&[
                    "python",
                    "-m",
                    "models.common.readiness_check.run_vllm_server",
                    "--stages",
                    "serve",
                ]);
                if let Some(d) = self.runtime.get("model_dir").and_then(Value::as_str) {
                    push(&["--model-dir", d]);
                }
                push(&["--hf-model", &w]);
                if let Some((r, c)) = p.mesh_device().as_deref().and_then(mesh_shape) {
                    push(&["--mesh-device", &format!("({r}, {c})")]);
                }
                for (flag, key) in [
                    ("--max-num-seqs", "max_num_seqs"),
                    ("--max-model-len", "max_model_len"),
                    ("--block-size", "block_size"),
                    ("--server-timeout", "server_timeout"),
                ] {
                    if let Some(n) = p.u64(key) {
                        push(&[flag, &n.to_string()]);
                    }
                }
                push(&["--port", &port_s]);
                if let Some(tt) = p
                    .settings
                    .get("additional_config")
                    .and_then(|c| c.get("tt"))
                {
                    push(&["--tt-config", &tt.to_string()]);
                }
                let mut extra = p.args();
                if let Some(t) = p.capability("tool_parser") {
                    extra.extend([
                        "--enable-auto-tool-choice".into(),
                        "--tool-call-parser".into(),
                        t,
                    ]);
                }
                if let Some(r) = p.capability("reasoning_parser") {
                    extra.extend(["--reasoning_parser".into(), r]);
                }
                if !extra.is_empty() {
                    let joined: Vec<String> = extra
                        .iter()
                        .map(|t| tt_model_engine::run_spec::shell_quote(t))
                        .collect();
                    push(&["--additional-server-args", &joined.join(" ")]);
                }
            }
            "tt-dit-server" => {
                push(&[
                    "python",
                    "-m",
                    "uvicorn",
                    "--host",
                    "0.0.0.0",
                    "--port",
                    &port_s,
                    "--lifespan",
                    "on",
                ]);
                a.extend(p.args());
                if let Some(app) = self.runtime.get("app").and_then(Value::as_str) {
                    a.push(app.to_string());
                }
            }
            _ => {
                let cmd: Vec<String> = self
                    .runtime
                    .get("command")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(value_text)
                    .collect();
                for t in cmd {
                    a.push(t.replace("{host}", "0.0.0.0").replace("{port}", &port_s));
                }
                a.extend(p.args().into_iter().map(|t| t.replace("{port}", &port_s)));
            }
        }
        a
    }

    /// Launcher env plus the profile env (profile wins).
    pub fn launcher_env(&self, p: &Profile) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        env.insert("HF_MODEL".to_string(), self.weights_id());
        if let Some(w) = &self.weights {
            env.insert("TT_MODEL_WEIGHTS_REVISION".into(), w.revision.clone());
        }
        match self.kind.as_str() {
            "vllm-plugin" => {
                if let Some(m) = p.mesh_device() {
                    env.insert("MESH_DEVICE".into(), m);
                }
            }
            "vllm-fork" => {
                env.insert("PYTHONUNBUFFERED".into(), "1".into());
            }
            "tt-dit-server" => {
                if let Some(m) = p.mesh_device() {
                    if let Some((r, c)) = mesh_shape(&m) {
                        let key = self
                            .runtime
                            .get("mesh_shape_env")
                            .and_then(Value::as_str)
                            .unwrap_or("FLUX2_MESH_SHAPE");
                        env.insert(key.to_string(), format!("{r}x{c}"));
                    }
                    env.insert("MESH_DEVICE".into(), m);
                }
            }
            _ => {}
        }
        env.extend(p.env());
        env
    }
}

fn image_ref(c: &Value, name: &str) -> Option<String> {
    if let Some(b) = c
        .get("built")
        .and_then(|b| b.get("image"))
        .and_then(Value::as_str)
    {
        return Some(b.to_string());
    }
    let img = c.get("image")?;
    if let Some(s) = img.as_str() {
        return Some(s.to_string());
    }
    let repo = img
        .get("repository")
        .and_then(Value::as_str)
        .unwrap_or(name);
    // `hf`: the image travels in the Hub repo and is loaded under its local tag.
    let reg = img
        .get("registry")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty() && *r != "hf");
    let base = match reg {
        Some(r) => format!("{r}/{repo}"),
        None => repo.to_string(),
    };
    match (
        img.get("tag").and_then(Value::as_str),
        img.get("digest").and_then(Value::as_str),
    ) {
        (Some(t), _) => Some(format!("{base}:{t}")),
        (None, Some(d)) => Some(format!("{base}@{d}")),
        _ => Some(format!("{base}:latest")),
    }
}

/// The original's merge: dicts recurse, scalars override, empty lists/dicts do not erase.
pub fn deep_merge(
    base: &mut serde_json::Map<String, Value>,
    over: &serde_json::Map<String, Value>,
) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (_, Value::Null) => {}
            (Some(Value::Object(b)), Value::Object(o)) => deep_merge(b, o),
            (Some(_), Value::Array(a)) if a.is_empty() => {}
            (Some(_), Value::Object(o)) if o.is_empty() => {}
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Chips of a board label `<board>[xN]` (`p150` = 1, `p300` = 2, `p150x4` = 4).
pub fn hardware_chips(label: &str) -> Option<usize> {
    let l = label.trim().to_ascii_lowercase();
    let (board, n) = match l.split_once('x') {
        Some((b, n)) => (b.to_string(), n.parse::<usize>().ok()?),
        None => (l.clone(), 1),
    };
    let bytes = board.as_bytes();
    let revision_ok = board.len() == 4 || (board.len() == 5 && bytes[4].is_ascii_lowercase());
    if !revision_ok {
        return None;
    }
    let per = match &board[..4] {
        "p100" | "p150" | "n150" | "e150" => 1,
        "p300" | "n300" => 2,
        _ => return None,
    };
    (n > 0).then_some(per * n)
}

/// A mesh preset or a literal `(r, c)`.
pub fn mesh_shape(m: &str) -> Option<(u32, u32)> {
    let t = m.trim();
    if let Some(inner) = t.strip_prefix('(').and_then(|s| s.strip_suffix(')')) {
        let (r, c) = inner.split_once(',')?;
        return Some((r.trim().parse().ok()?, c.trim().parse().ok()?));
    }
    Some(match t {
        "N150" | "P100" | "P150" => (1, 1),
        "P150x2" | "N300" | "P300" => (1, 2),
        "N150x4" | "P150x4" | "P300x2" => (1, 4),
        "QB2" => (2, 2),
        "T3K" | "P150x8" => (1, 8),
        "TG" | "BH-Galaxy" => (4, 8),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire() -> Value {
        serde_json::json!({
            "schema_version": "5.1",
            "name": "qwen",
            "weights": {"repo_id": "Qwen/Qwen3-8B", "revision": "abc", "allow_patterns": ["*.json"], "ignore_patterns": null},
            "container": {
                "image": {"registry": null, "repository": "tt-model/qwen", "tag": "7c27", "digest": "sha256:x"},
                "kind": "vllm-plugin",
                "runtime": {},
                "serve": {"hardware": "p150", "mesh_device": "P150", "max_num_seqs": 32, "block_size": 64,
                          "capabilities": {"tool_parser": "hermes", "reasoning_parser": "qwen3"},
                          "args": ["--enforce-eager", ["--seed", 7]], "env": {"A": "1"}},
                "serve_profiles": [
                    {"name": "p150", "description": "one chip"},
                    {"name": "p150x4", "hardware": "p150x4", "mesh_device": "P150x4", "capabilities": {"tool_parser": "x"}, "args": [], "env": {"B": "2"}}
                ],
                "default_profile": "p150"
            }
        })
    }

    #[test]
    fn reads_the_wire_manifest_and_merges_profiles() {
        let p = Package::from_json(Path::new("m.json"), &wire()).unwrap();
        assert_eq!(p.image, "tt-model/qwen:7c27");
        assert_eq!(p.weights.as_ref().unwrap().allow, vec!["*.json"]);
        let big = p.profile(Some("p150x4")).unwrap();
        assert_eq!(big.chip_count(), 4);
        assert_eq!(big.capability("tool_parser").as_deref(), Some("x"));
        assert_eq!(
            big.capability("reasoning_parser").as_deref(),
            Some("qwen3"),
            "dicts recurse"
        );
        assert_eq!(
            big.args(),
            vec!["--enforce-eager", "--seed", "7"],
            "empty list does not erase"
        );
        assert_eq!(
            big.env(),
            BTreeMap::from([("A".into(), "1".into()), ("B".into(), "2".into())])
        );
        assert_eq!(p.profile_names(), vec!["p150", "p150x4"]);
        assert!(
            p.profile(Some("nope"))
                .unwrap_err()
                .to_string()
                .contains("available: p150, p150x4")
        );
    }

    #[test]
    fn vllm_plugin_argv_matches_the_reference_launcher() {
        let p = Package::from_json(Path::new("m.json"), &wire()).unwrap();
        let prof = p.profile(None).unwrap();
        assert_eq!(
            p.launcher_argv(prof, 20001).join(" "),
            "vllm serve Qwen/Qwen3-8B --max-num-seqs 32 --block-size 64 --enable-auto-tool-choice --tool-call-parser hermes \
             --reasoning_parser qwen3 --enforce-eager --seed 7 --port 20001"
        );
        let env = p.launcher_env(prof);
        assert_eq!(env.get("MESH_DEVICE").map(String::as_str), Some("P150"));
        assert_eq!(
            env.get("HF_MODEL").map(String::as_str),
            Some("Qwen/Qwen3-8B")
        );
    }

    #[test]
    fn boards_and_meshes() {
        assert_eq!(hardware_chips("p150a"), Some(1));
        assert_eq!(hardware_chips("p300x2"), Some(4));
        assert_eq!(hardware_chips("QB2"), None);
        assert_eq!(hardware_chips("p150x0"), None);
        assert_eq!(mesh_shape("(2, 2)"), Some((2, 2)));
        assert_eq!(mesh_shape("P300x2"), Some((1, 4)));
    }

    #[test]
    fn refuses_non_container_and_unsafe_names() {
        let mut j = wire();
        j["name"] = "../x".into();
        assert!(
            Package::from_json(Path::new("m.json"), &j)
                .unwrap_err()
                .to_string()
                .contains("unsafe package name")
        );
        let j = serde_json::json!({"name": "x", "container": null});
        assert!(
            Package::from_json(Path::new("m.json"), &j)
                .unwrap_err()
                .to_string()
                .contains("not a container package")
        );
    }
}
