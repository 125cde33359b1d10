//! `runtime`, typed per kind: an enum with a struct per kind, the one place where the block's
//! keys become values. `package`, `serve` and lint's source checks read this, never the map.
//!
//! The manifest and the wire manifest still carry the block as written: lint validates the
//! map's keys per kind with their spans (an unknown key is a located finding, not a serde
//! error that hides every other one), and a wire manifest written by another tool keeps keys
//! we do not know when we read and write it. Values that lint refuses do not reach here; if
//! they do (a hand-edited wire manifest), reading fails with serde's message naming the key.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{CargoBinary, Kind};

/// Where a component of a vLLM image (vLLM itself, the plugin) comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ComponentSource {
    /// A release from the package index, `{version}`.
    Version {
        /// The version to install.
        version: String,
    },
    /// A local wheel, `{wheel}` (vLLM only).
    Wheel {
        /// The wheel file (a glob is allowed), relative to the working directory.
        wheel: String,
    },
    /// A local pip-installable directory, `{path}`.
    Path {
        /// The directory, relative to the working directory.
        path: String,
    },
    /// A git repository at a ref, `{repo, ref}` (pinned to its commit at package time).
    Git {
        /// The repository URL.
        repo: String,
        /// A branch, tag or commit.
        #[serde(rename = "ref")]
        git_ref: String,
    },
}

/// `kind: vllm-plugin`: stock vLLM plus the standalone plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct VllmPluginRuntime {
    /// `runtime.vllm`.
    pub vllm: Option<ComponentSource>,
    /// `runtime.plugin`.
    pub plugin: Option<ComponentSource>,
    /// A pip-installable path inside `code/`.
    pub extension: Option<String>,
    /// The directory whose children hold `vllm_metadata.json`.
    pub extra_models_dir: Option<String>,
    /// A pinned requirements file.
    pub lock: Option<String>,
    /// Extra uv override pins.
    #[serde(default, deserialize_with = "one_or_many")]
    pub overrides: Vec<String>,
    /// Extra local wheels, installed last.
    #[serde(default, deserialize_with = "one_or_many")]
    pub wheels: Vec<String>,
}

/// A component source in its resolved form, as the package pipeline's templates read it: the
/// variant named by `from` (`version`, `wheel`, `path`, `git`) beside its fields (`ref` as
/// `git_ref`). The manifest's own (untagged) form is only ever read.
impl serde::Serialize for ComponentSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        match self {
            ComponentSource::Version { version } => {
                map.serialize_entry("from", "version")?;
                map.serialize_entry("version", version)?;
            }
            ComponentSource::Wheel { wheel } => {
                map.serialize_entry("from", "wheel")?;
                map.serialize_entry("wheel", wheel)?;
            }
            ComponentSource::Path { path } => {
                map.serialize_entry("from", "path")?;
                map.serialize_entry("path", path)?;
            }
            ComponentSource::Git { repo, git_ref } => {
                map.serialize_entry("from", "git")?;
                map.serialize_entry("repo", repo)?;
                map.serialize_entry("git_ref", git_ref)?;
            }
        }
        map.end()
    }
}

/// `kind: vllm-fork`: the fork with the plugin in-tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct VllmForkRuntime {
    /// `runtime.vllm` (the fork).
    pub vllm: Option<ComponentSource>,
    /// A pip-installable path inside `code/`.
    pub extension: Option<String>,
    /// A pinned requirements file.
    pub lock: Option<String>,
    /// The model directory inside `code/`.
    pub model_dir: Option<String>,
}

/// `kind: tt-dit-server`: the model's ASGI app under uvicorn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct TtDitServerRuntime {
    /// The ASGI target, `module:attr`.
    pub app: Option<String>,
    /// Extra pip packages (the HTTP stack).
    #[serde(default, deserialize_with = "one_or_many")]
    pub packages: Vec<String>,
    /// A pinned requirements file.
    pub lock: Option<String>,
    /// The env var the server reads its mesh shape from.
    pub mesh_shape_env: Option<String>,
}

/// `kind: http-server`: the model's own HTTP server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct HttpServerRuntime {
    /// The server argv, with `{host}`/`{port}` placeholders.
    #[serde(default, deserialize_with = "one_or_many")]
    pub command: Vec<String>,
    /// The log line that says the server is ready.
    pub ready_line: Option<String>,
    /// Extra pip packages.
    #[serde(default, deserialize_with = "one_or_many")]
    pub packages: Vec<String>,
    /// A pinned requirements file.
    pub lock: Option<String>,
    /// A Rust binary built on the host and shipped in the image.
    pub cargo: Option<CargoBinary>,
}

/// The kind-specific part of `runtime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindRuntime {
    /// `vllm-plugin`.
    VllmPlugin(VllmPluginRuntime),
    /// `vllm-fork`.
    VllmFork(VllmForkRuntime),
    /// `tt-dit-server`.
    TtDitServer(TtDitServerRuntime),
    /// `http-server`.
    HttpServer(HttpServerRuntime),
}

/// The keys every kind accepts ([`super::COMMON_RUNTIME_KEYS`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CommonRuntime {
    /// The HTTP path serve probes for readiness.
    pub health_path: Option<String>,
    /// Whether the runtime needs a Tenstorrent device ([`super::RUNTIME_DEVICES`]).
    pub device: Option<String>,
}

/// `runtime`, typed: the keys every kind shares and the kind's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSpec {
    /// `health_path`, `device`.
    pub common: CommonRuntime,
    /// The kind's own keys.
    pub kind: KindRuntime,
}

impl RuntimeSpec {
    /// Reads the block of a manifest of `kind` (keys of other kinds are ignored: lint has
    /// already refused them).
    pub fn from_map(kind: Kind, map: &Map<String, Value>) -> Result<Self, serde_json::Error> {
        let value = Value::Object(map.clone());
        let common = CommonRuntime::deserialize(&value)?;
        let kind = match kind {
            Kind::VllmPlugin => KindRuntime::VllmPlugin(Deserialize::deserialize(&value)?),
            Kind::VllmFork => KindRuntime::VllmFork(Deserialize::deserialize(&value)?),
            Kind::TtDitServer => KindRuntime::TtDitServer(Deserialize::deserialize(&value)?),
            Kind::HttpServer => KindRuntime::HttpServer(Deserialize::deserialize(&value)?),
        };
        Ok(Self { common, kind })
    }

    /// A block of `kind` with no keys set (every key at its default).
    pub fn empty(kind: Kind) -> Self {
        let kind = match kind {
            Kind::VllmPlugin => KindRuntime::VllmPlugin(VllmPluginRuntime::default()),
            Kind::VllmFork => KindRuntime::VllmFork(VllmForkRuntime::default()),
            Kind::TtDitServer => KindRuntime::TtDitServer(TtDitServerRuntime::default()),
            Kind::HttpServer => KindRuntime::HttpServer(HttpServerRuntime::default()),
        };
        Self {
            common: CommonRuntime::default(),
            kind,
        }
    }

    /// `runtime.lock`, whichever kind.
    pub fn lock(&self) -> Option<&str> {
        match &self.kind {
            KindRuntime::VllmPlugin(r) => r.lock.as_deref(),
            KindRuntime::VllmFork(r) => r.lock.as_deref(),
            KindRuntime::TtDitServer(r) => r.lock.as_deref(),
            KindRuntime::HttpServer(r) => r.lock.as_deref(),
        }
    }

    /// `runtime.packages` (tt-dit-server, http-server).
    pub fn packages(&self) -> &[String] {
        match &self.kind {
            KindRuntime::TtDitServer(r) => &r.packages,
            KindRuntime::HttpServer(r) => &r.packages,
            _ => &[],
        }
    }

    /// `runtime.vllm` (the vLLM kinds).
    pub fn vllm(&self) -> Option<&ComponentSource> {
        match &self.kind {
            KindRuntime::VllmPlugin(r) => r.vllm.as_ref(),
            KindRuntime::VllmFork(r) => r.vllm.as_ref(),
            _ => None,
        }
    }

    /// `runtime.plugin` (vllm-plugin).
    pub fn plugin(&self) -> Option<&ComponentSource> {
        match &self.kind {
            KindRuntime::VllmPlugin(r) => r.plugin.as_ref(),
            _ => None,
        }
    }

    /// `runtime.overrides` (vllm-plugin).
    pub fn overrides(&self) -> &[String] {
        match &self.kind {
            KindRuntime::VllmPlugin(r) => &r.overrides,
            _ => &[],
        }
    }

    /// `runtime.wheels` (vllm-plugin).
    pub fn wheels(&self) -> &[String] {
        match &self.kind {
            KindRuntime::VllmPlugin(r) => &r.wheels,
            _ => &[],
        }
    }

    /// `runtime.extra_models_dir` (vllm-plugin).
    pub fn extra_models_dir(&self) -> Option<&str> {
        match &self.kind {
            KindRuntime::VllmPlugin(r) => r.extra_models_dir.as_deref(),
            _ => None,
        }
    }

    /// `runtime.extension` (the vLLM kinds).
    pub fn extension(&self) -> Option<&str> {
        match &self.kind {
            KindRuntime::VllmPlugin(r) => r.extension.as_deref(),
            KindRuntime::VllmFork(r) => r.extension.as_deref(),
            _ => None,
        }
    }

    /// `runtime.cargo` (http-server).
    pub fn cargo(&self) -> Option<&CargoBinary> {
        match &self.kind {
            KindRuntime::HttpServer(r) => r.cargo.as_ref(),
            _ => None,
        }
    }

    /// The ready line: `runtime.ready_line` (http-server), else the kind's.
    pub fn ready_line(&self, kind: Kind) -> Option<String> {
        match &self.kind {
            KindRuntime::HttpServer(r) => r.ready_line.clone(),
            _ => None,
        }
        .or_else(|| kind.ready_line().map(String::from))
    }
}

/// A list of strings, where a lone string is a one-item list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => Vec::new(),
        Some(OneOrMany::One(s)) => vec![s],
        Some(OneOrMany::Many(v)) => v,
    })
}

impl super::Manifest {
    /// `runtime`, typed for this manifest's kind.
    pub fn runtime_spec(&self) -> Result<RuntimeSpec, serde_json::Error> {
        RuntimeSpec::from_map(self.kind, &self.runtime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn each_kind_reads_its_own_keys() {
        let rt = RuntimeSpec::from_map(
            Kind::VllmPlugin,
            &map(serde_json::json!({
                "vllm": {"version": "0.10.1"},
                "plugin": {"repo": "https://example.com/p.git", "ref": "v1"},
                "wheels": "dist/x.whl",
                "health_path": "/ping",
            })),
        )
        .unwrap();
        assert_eq!(rt.common.health_path.as_deref(), Some("/ping"));
        let KindRuntime::VllmPlugin(p) = &rt.kind else {
            panic!("{rt:?}")
        };
        assert_eq!(
            p.vllm,
            Some(ComponentSource::Version {
                version: "0.10.1".into()
            })
        );
        assert_eq!(
            p.plugin,
            Some(ComponentSource::Git {
                repo: "https://example.com/p.git".into(),
                git_ref: "v1".into()
            })
        );
        assert_eq!(p.wheels, ["dist/x.whl"]);
        assert_eq!(
            rt.ready_line(Kind::VllmPlugin).as_deref(),
            Some("Application startup complete")
        );

        let rt = RuntimeSpec::from_map(
            Kind::HttpServer,
            &map(serde_json::json!({
                "command": ["srv", "--port", "{port}"],
                "ready_line": "up",
                "cargo": {"workspace": "..", "package": "srv", "features": ["device"]},
                "device": "none",
            })),
        )
        .unwrap();
        assert_eq!(rt.common.device.as_deref(), Some("none"));
        assert_eq!(rt.ready_line(Kind::HttpServer).as_deref(), Some("up"));
        assert_eq!(
            rt.cargo().map(|c| c.features.clone()),
            Some(vec!["device".to_string()])
        );
        assert!(rt.vllm().is_none());
    }

    #[test]
    fn a_value_of_the_wrong_type_names_itself() {
        let err = RuntimeSpec::from_map(
            Kind::TtDitServer,
            &map(serde_json::json!({"app": ["not", "a", "string"]})),
        )
        .unwrap_err();
        assert!(err.to_string().contains("string"), "{err}");
    }
}
