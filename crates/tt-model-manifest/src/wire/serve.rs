//! What `serve` takes from a container package besides the launcher: the image to run, the
//! weights id, the profiles, and the readiness signals the runtime block names.

use super::{ContainerSpec, WireManifest, lenient::HF_REGISTRY};

/// The health endpoint probed when the runtime names none.
pub const DEFAULT_HEALTH_PATH: &str = "/health";

impl WireManifest {
    /// The image `serve` runs: the tag `package` built (`built.image`), else the image block's
    /// reference — `<registry>/<repository>` (just `<repository>` for `hf`, whose image is
    /// loaded under its local name), then `:<tag>`, `@<digest>` or `:latest`.
    pub fn run_image(&self) -> String {
        let c = &self.container;
        if let Some(built) = c.built.as_ref().filter(|b| !b.image.is_empty()) {
            return built.image.clone();
        }
        let image = &c.image;
        let repository = if image.repository.is_empty() {
            &self.name
        } else {
            &image.repository
        };
        let base = if image.registry == HF_REGISTRY {
            repository.clone()
        } else {
            format!("{}/{repository}", image.registry)
        };
        match (&image.tag, &image.digest) {
            (Some(tag), _) => format!("{base}:{tag}"),
            (None, Some(digest)) => format!("{base}@{digest}"),
            (None, None) => format!("{base}:latest"),
        }
    }

    /// The image digest the package records for judging a loaded image: `container.image.digest`,
    /// else `built.image_digest`, empty meaning none. A registry package's `image.digest` is the
    /// registry's manifest digest, so there the image id in `built` comes first.
    pub fn recorded_image_digest(&self) -> Option<&str> {
        let c = &self.container;
        let built = c.built.as_ref().and_then(|b| b.image_digest.as_deref());
        let block = c.image.digest.as_deref();
        let (first, second) = if c.image.in_registry() {
            (built, block)
        } else {
            (block, built)
        };
        first.or(second).filter(|d| !d.is_empty())
    }

    /// What the server loads (`HF_MODEL`): the weights id, or the package name when the
    /// package serves without weights.
    pub fn weights_id(&self) -> &str {
        self.weights
            .as_ref()
            .map_or(self.name.as_str(), |w| w.repo_id.as_str())
    }
}

impl ContainerSpec {
    /// The profile served without `--profile`: `default_profile`, else the first profile.
    pub fn default_profile_name(&self) -> &str {
        if !self.default_profile.is_empty() {
            return &self.default_profile;
        }
        self.serve_profiles
            .first()
            .map_or(crate::profile::DEFAULT_PROFILE, |p| p.name.as_str())
    }

    /// Every profile name, the default first.
    pub fn profile_names(&self) -> Vec<String> {
        let default = self.default_profile_name();
        std::iter::once(default.to_owned())
            .chain(
                self.serve_profiles
                    .iter()
                    .map(|p| p.name.clone())
                    .filter(|n| n != default),
            )
            .collect()
    }

    /// `runtime`, typed for this container's kind.
    pub fn runtime_spec(&self) -> Result<crate::types::RuntimeSpec, serde_json::Error> {
        crate::types::RuntimeSpec::from_map(self.kind, &self.runtime)
    }

    /// The keys every kind shares; a block that does not read (a hand-edited manifest) gives
    /// the defaults, as a tolerant read should.
    fn common_runtime(&self) -> crate::types::CommonRuntime {
        self.runtime_spec().map(|r| r.common).unwrap_or_default()
    }

    /// The log line that says the server is ready: `runtime.ready_line`, else the kind's.
    pub fn ready_line(&self) -> Option<String> {
        match self.runtime_spec() {
            Ok(rt) => rt.ready_line(self.kind),
            Err(_) => self.kind.ready_line().map(str::to_owned),
        }
    }

    /// The health endpoint probed for readiness (`runtime.health_path`, one of the
    /// [`crate::types::COMMON_RUNTIME_KEYS`] lint accepts for every kind).
    pub fn health_path(&self) -> String {
        self.common_runtime()
            .health_path
            .unwrap_or_else(|| DEFAULT_HEALTH_PATH.to_owned())
    }

    /// The runtime needs no Tenstorrent device (`runtime.device` is one of
    /// [`crate::types::RUNTIME_DEVICES`] other than `card`).
    pub fn runs_without_card(&self) -> bool {
        self.common_runtime()
            .device
            .is_some_and(|d| d != "card" && crate::types::RUNTIME_DEVICES.contains(&d.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(container: serde_json::Value) -> WireManifest {
        let doc =
            serde_json::json!({"schema_version": "5.1", "name": "demo", "container": container});
        WireManifest::from_json(&doc.to_string()).expect("a tolerant read")
    }

    #[test]
    fn the_image_to_run() {
        let built = wire(serde_json::json!({
            "image": {"registry": "hf", "repository": "acme/demo", "tag": "t1"},
            "built": {"image": "tt-model/demo:abc", "tt_model_version": "0", "created_at": "x"}
        }));
        assert_eq!(built.run_image(), "tt-model/demo:abc", "built wins");
        let hf =
            wire(serde_json::json!({"image": {"registry": null, "repository": "r", "tag": "t"}}));
        assert_eq!(hf.run_image(), "r:t", "null registry is hf: the local name");
        let oci = wire(
            serde_json::json!({"image": {"registry": "ghcr.io/acme", "repository": "r", "digest": "sha256:d"}}),
        );
        assert_eq!(oci.run_image(), "ghcr.io/acme/r@sha256:d");
        let bare = wire(serde_json::json!({"image": {}}));
        assert_eq!(
            bare.run_image(),
            "demo:latest",
            "repository defaults to the name"
        );
    }

    #[test]
    fn profiles_readiness_and_device() {
        let w = wire(serde_json::json!({
            "image": {"registry": "hf", "repository": "r"},
            "kind": "vllm-fork",
            "runtime": {"health_path": "/ping", "device": "cpu"},
            "serve_profiles": [{"name": "a"}, {"name": "b"}],
        }));
        let c = &w.container;
        assert_eq!(
            c.default_profile_name(),
            "a",
            "no default_profile: the first"
        );
        assert_eq!(c.profile_names(), vec!["a", "b"]);
        assert_eq!(c.ready_line().as_deref(), Some("Server ready after"));
        assert_eq!(c.health_path(), "/ping");
        assert!(c.runs_without_card());
        assert_eq!(w.weights_id(), "demo", "no weights: the package name");
        let card = wire(serde_json::json!({"image": {}, "runtime": {"device": "card"}}));
        assert!(!card.container.runs_without_card());
        assert_eq!(card.container.health_path(), DEFAULT_HEALTH_PATH);
    }
}
