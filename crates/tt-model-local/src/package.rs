//! The served package: a wire manifest (`tt_kernel_manifest.json`) read through
//! `tt_model_manifest::WireManifest` (tolerant of the Python original's output), with the
//! facts serve, list and rm use. The server's argv and env come from the one launcher
//! `package` also uses for the image's default command.

use std::path::{Path, PathBuf};

use tt_model_manifest::launch::{ServerCommand, wire_launch};
use tt_model_manifest::validate::hardware::chips_or_one;
use tt_model_manifest::{ServeSettings, WireError, WireManifest};

use crate::LocalError;
/// The file name of a staged package's manifest.
pub use crate::state::WIRE_MANIFEST;

/// The tag `serve --print` shows for an image that `package` has not built yet.
pub use tt_model_manifest::wire::preview::UNBUILT_TAG;

/// The revision served when the manifest pins none.
const DEFAULT_REVISION: &str = "main";

/// The weights a package serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsRef {
    /// The Hub repository (`org/name`).
    pub repo_id: String,
    /// The revision served (the manifest's pin, else `main`).
    pub revision: String,
    /// Only files matching one of these are fetched (empty: all).
    pub allow: Vec<String>,
    /// Files matching one of these are skipped.
    pub ignore: Vec<String>,
}

impl WeightsRef {
    /// The wire manifest's pointer, with the revision served when it pins none.
    fn from_wire(w: &tt_model_manifest::wire::WeightsRef) -> Self {
        WeightsRef {
            repo_id: w.repo_id.clone(),
            revision: w
                .revision
                .clone()
                .unwrap_or_else(|| DEFAULT_REVISION.into()),
            allow: w.allow_patterns.clone(),
            ignore: w.ignore_patterns.clone(),
        }
    }
}

/// One serve profile, merged over the shared defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The profile's name.
    pub name: String,
    /// Its serve settings, merged over the shared `serve` block.
    pub settings: ServeSettings,
}

impl Profile {
    /// Chips the profile needs (from `hardware`), or 1.
    pub fn chip_count(&self) -> usize {
        chips_or_one(self.settings.hardware.as_deref()) as usize
    }
}

/// A package ready to serve.
#[derive(Debug, Clone)]
pub struct Package {
    /// The wire manifest the package was read from.
    pub manifest_path: PathBuf,
    /// The package name.
    pub name: String,
    /// The manifest's schema version.
    pub schema_version: String,
    /// The image serve runs.
    pub image: String,
    /// The kind's wire spelling (`vllm-plugin`, …), as the engine's labels take it.
    pub kind: String,
    /// The primary weights, if the package serves any.
    pub weights: Option<WeightsRef>,
    /// `auxiliary_weights` (drafters, adapters): prefetched, verified, mounted and removed
    /// exactly as the primary weights.
    pub auxiliary: Vec<WeightsRef>,
    /// Every serve profile, in manifest order.
    pub profiles: Vec<Profile>,
    /// The profile served when none is named.
    pub default_profile: String,
    wire: WireManifest,
}

impl Package {
    /// Read and interpret a wire manifest.
    pub fn load(path: &Path) -> Result<Package, LocalError> {
        Package::from_wire(WireManifest::read(path)?, path)
    }

    /// Interpret a wire manifest read from `path`.
    fn from_wire(wire: WireManifest, path: &Path) -> Result<Package, LocalError> {
        let profiles = wire
            .container
            .serve_profiles
            .iter()
            .map(|p| {
                let (_, settings) = wire.resolve_profile(Some(&p.name))?;
                Ok(Profile {
                    name: p.name.clone(),
                    settings,
                })
            })
            .collect::<Result<Vec<_>, WireError>>()
            .map_err(|problem| LocalError::Wire {
                path: path.to_path_buf(),
                problem,
            })?;
        let weights = wire.weights.as_ref().map(WeightsRef::from_wire);
        let auxiliary = wire
            .auxiliary_weights
            .iter()
            .map(WeightsRef::from_wire)
            .collect();
        Ok(Package {
            manifest_path: path.to_path_buf(),
            name: wire.name.clone(),
            schema_version: wire.schema_version.clone(),
            image: wire.run_image(),
            kind: wire.container.kind.as_str().to_string(),
            weights,
            auxiliary,
            profiles,
            default_profile: wire.container.default_profile_name().to_string(),
            wire,
        })
    }

    /// An authoring manifest (`tt-model.yaml`) seen as the package `package` would stage from
    /// it, for `serve --print` only: the image is the tag `package` gives, with the image id
    /// it does not have yet shown as [`UNBUILT_TAG`].
    pub fn from_authoring(path: &Path) -> Result<Package, LocalError> {
        let (manifest, _warnings) =
            tt_model_manifest::load_path(path, &tt_model_manifest::CheckOptions::default())?;
        let wire = WireManifest::preview(&manifest);
        Package::from_wire(wire, path)
    }

    /// Every weights repository the package serves: the primary first, then the auxiliary
    /// ones in manifest order.
    pub fn all_weights(&self) -> impl Iterator<Item = &WeightsRef> {
        self.weights.iter().chain(&self.auxiliary)
    }

    /// The chosen profile, or a clear error listing the available ones.
    pub fn profile(&self, name: Option<&str>) -> Result<&Profile, LocalError> {
        let want = name.unwrap_or(&self.default_profile);
        if let Some(p) = self.profiles.iter().find(|p| p.name == want) {
            return Ok(p);
        }
        if self.profiles.is_empty() {
            return Err(LocalError::Wire {
                path: self.manifest_path.clone(),
                problem: WireError::NoProfiles,
            });
        }
        let unknown = WireError::UnknownProfile {
            name: want.to_string(),
            available: self.profiles.iter().map(|p| p.name.clone()).collect(),
        };
        Err(LocalError::refused("--profile", unknown.to_string()))
    }

    /// The wire manifest as read.
    pub fn wire(&self) -> &WireManifest {
        &self.wire
    }

    /// The image digest the package records (`container.image.digest`, else
    /// `container.built.image_digest`): the build serve, list and pull judge the loaded image by.
    /// A registry package's `image.digest` is the registry's manifest digest, so the image id
    /// in `built` comes first there.
    pub fn recorded_digest(&self) -> Option<String> {
        self.wire.recorded_image_digest().map(str::to_owned)
    }

    /// The card architecture the package was built for (`blackhole`, `wormhole_b0`).
    pub fn arch(&self) -> Option<String> {
        self.wire.arch.map(|a| a.as_str().to_string())
    }

    /// Profile names, default first.
    pub fn profile_names(&self) -> Vec<String> {
        self.wire.container.profile_names()
    }

    /// The log line that says the server is ready.
    pub fn ready_line(&self) -> Option<String> {
        self.wire.container.ready_line()
    }

    /// The health endpoint probed for readiness.
    pub fn health_path(&self) -> String {
        self.wire.container.health_path()
    }

    /// The health endpoint readiness waits for, or `None` when the ready line alone decides:
    /// a package of the original's kinds (vLLM, tt-dit-server) that declares no
    /// `runtime.health_path` is ready when its log says so, as the original judged it; a
    /// declared path, and our `http-server` kind, are probed.
    pub fn readiness_probe(&self) -> Option<String> {
        let c = &self.wire.container;
        let declared = c.runtime_spec().ok().and_then(|r| r.common.health_path);
        let ours = c.kind == tt_model_manifest::types::Kind::HttpServer;
        match declared {
            Some(path) => Some(path),
            None if ours || self.ready_line().is_none() => Some(self.health_path()),
            None => None,
        }
    }

    /// The manifest selects a runtime that needs no card (`runtime.device: none|cpu`).
    pub fn runs_without_card(&self) -> bool {
        self.wire.container.runs_without_card()
    }

    /// The server `profile` runs on `port`: the package's launcher, plus the weights revision
    /// serve mounted (`TT_MODEL_WEIGHTS_REVISION`, unless the profile's env sets it; for
    /// `vllm-plugin` also `--revision` after the model id).
    pub fn launch(&self, profile: &Profile, port: u16) -> ServerCommand {
        let mut cmd = wire_launch(&self.wire, &profile.name, &profile.settings, port);
        if let Some(w) = &self.weights {
            cmd.env
                .entry("TT_MODEL_WEIGHTS_REVISION".into())
                .or_insert_with(|| w.revision.clone());
            // `vllm serve <id>` alone loads the branch tip; the pin makes it load the snapshot
            // serve prefetched and mounted (the original's newest launcher passes it too).
            let vllm = self.wire.container.kind == tt_model_manifest::types::Kind::VllmPlugin;
            if vllm
                && !cmd.argv.iter().any(|a| a == "--revision")
                && let Some(at) = cmd.argv.iter().position(|a| *a == w.repo_id)
            {
                cmd.argv.splice(
                    at + 1..at + 1,
                    ["--revision".to_string(), w.revision.clone()],
                );
            }
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, doc: serde_json::Value) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(WIRE_MANIFEST);
        std::fs::write(&path, doc.to_string()).unwrap();
        path
    }

    #[test]
    fn recorded_digest_prefers_the_image_block_and_arch_is_read() {
        let dir = std::env::temp_dir().join(format!("tt-model-serve-dig-{}", std::process::id()));
        let doc = |image: serde_json::Value, built: serde_json::Value| {
            serde_json::json!({
                "schema_version": "5.1", "name": "d", "arch": "blackhole",
                "container": {"image": image, "built": built, "kind": "http-server",
                              "serve_profiles": [{"name": "p"}], "default_profile": "p"}
            })
        };
        let built = serde_json::json!({"image": "tt-model/d:1", "image_digest": "sha256:b",
            "tt_model_version": "5.1.0", "created_at": "2026-11-30T00:00:00Z"});
        let image = |d: serde_json::Value| serde_json::json!({"registry": "hf", "repository": "tt-model/d", "tag": "1", "digest": d});
        let pkg =
            Package::load(&write(&dir, doc(image("sha256:a".into()), built.clone()))).unwrap();
        assert_eq!(pkg.recorded_digest().as_deref(), Some("sha256:a"));
        assert_eq!(pkg.arch().as_deref(), Some("blackhole"));
        // A registry package pins the registry's manifest digest in the image block; the
        // engine knows the image by the build's image id.
        let registry = serde_json::json!({"registry": "127.0.0.1:5000/tt", "repository": "d", "tag": "1", "digest": "sha256:m"});
        let pkg = Package::load(&write(&dir, doc(registry, built.clone()))).unwrap();
        assert_eq!(pkg.recorded_digest().as_deref(), Some("sha256:b"));
        // Python's dump writes null for an unset digest: the build's digest is the record.
        let pkg = Package::load(&write(&dir, doc(image(serde_json::Value::Null), built))).unwrap();
        assert_eq!(pkg.recorded_digest().as_deref(), Some("sha256:b"));
        let pkg =
            Package::load(&write(&dir, doc(image("".into()), serde_json::Value::Null))).unwrap();
        assert_eq!(
            pkg.recorded_digest(),
            None,
            "an empty digest records nothing"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn loads_profiles_weights_and_the_launcher() {
        let dir = std::env::temp_dir().join(format!("tt-model-serve-pkg-{}", std::process::id()));
        let path = write(
            &dir,
            serde_json::json!({
                "schema_version": "5.1",
                "name": "demo",
                "weights": {"repo_id": "acme/w", "allow_patterns": ["*.json"], "ignore_patterns": null},
                "container": {
                    "image": {"registry": "hf", "repository": "tt-model/demo", "tag": "1"},
                    "kind": "http-server",
                    "runtime": {"command": ["/serve.sh", "{port}"]},
                    "serve": {"hardware": "p150", "env": {"TT_MODEL_WEIGHTS_REVISION": "mine"}},
                    "serve_profiles": [{"name": "one"}, {"name": "four", "hardware": "p150x4", "env": {}}],
                    "default_profile": "one"
                }
            }),
        );
        let pkg = Package::load(&path).unwrap();
        assert_eq!(pkg.image, "tt-model/demo:1");
        let w = pkg.weights.clone().unwrap();
        assert_eq!((w.revision.as_str(), w.allow.len()), ("main", 1));
        let four = pkg.profile(Some("four")).unwrap();
        assert_eq!(four.chip_count(), 4);
        let cmd = pkg.launch(pkg.profile(None).unwrap(), 20000);
        assert_eq!(cmd.argv, vec!["/serve.sh", "20000"]);
        assert_eq!(cmd.env["HF_MODEL"], "acme/w");
        assert_eq!(
            cmd.env["TT_MODEL_WEIGHTS_REVISION"], "mine",
            "the profile's env wins"
        );
        let err = pkg.profile(Some("nope")).unwrap_err();
        assert!(matches!(
            err,
            LocalError::Refused {
                field: "--profile",
                ..
            }
        ));
        assert!(err.to_string().contains("available: one, four"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn vllm_gets_the_pinned_revision_and_readiness_follows_the_original() {
        let dir = std::env::temp_dir().join(format!("tt-model-serve-rev-{}", std::process::id()));
        let rev = "0123456789abcdef0123456789abcdef01234567";
        let load = |kind: &str, runtime: serde_json::Value| {
            Package::load(&write(
                &dir,
                serde_json::json!({
                    "schema_version": "5.1", "name": "q",
                    "weights": {"repo_id": "Qwen/Qwen3-8B", "revision": rev},
                    "container": {
                        "image": {"registry": "hf", "repository": "tt-model/q", "tag": "1"},
                        "kind": kind, "runtime": runtime,
                        "serve": {"hardware": "p150", "mesh_device": "P150", "max_num_seqs": 32, "block_size": 64},
                        "serve_profiles": [{"name": "p150"}], "default_profile": "p150"
                    }
                }),
            ))
            .unwrap()
        };
        let vllm = load("vllm-plugin", serde_json::json!({}));
        let argv = vllm.launch(vllm.profile(None).unwrap(), 20000).argv;
        assert_eq!(
            argv[..5],
            ["vllm", "serve", "Qwen/Qwen3-8B", "--revision", rev],
            "{argv:?}"
        );
        // No health path declared: the original's kinds are ready by their ready line alone.
        assert_eq!(vllm.readiness_probe(), None);
        let declared = load(
            "vllm-plugin",
            serde_json::json!({"health_path": "/v1/models"}),
        );
        assert_eq!(declared.readiness_probe().as_deref(), Some("/v1/models"));
        // Our http-server kind is probed at the default path, with or without a ready line.
        let http = load(
            "http-server",
            serde_json::json!({"command": ["/s"], "ready_line": "up"}),
        );
        assert_eq!(http.readiness_probe().as_deref(), Some("/health"));
        let fork = load("vllm-fork", serde_json::json!({"model_dir": "models/q"}));
        let argv = fork.launch(fork.profile(None).unwrap(), 20000).argv;
        assert!(
            !argv.contains(&"--revision".to_string()),
            "the fork's runner takes none"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
