//! The one place that reads the authoring manifest: `Manifest` → [`PackageSpec`], and the
//! `built` facts → the wire manifest.
//!
//! Local paths in the manifest (`source.tt_metal`, `extra_code` roots, `runtime.lock`) are
//! resolved against a base directory the caller chooses. The CLI passes the process's working
//! directory, as the original tool and `tt-model lint --check-sources` do.

use std::path::Path;

use serde_json::Value;
use tt_model_manifest::launch::serve_default;
use tt_model_manifest::wire::WireBuild;
use tt_model_manifest::{ImageRef, Manifest, Producer, WireManifest};

use crate::error::{FieldError, PackageError};
use crate::pipeline::Packaged;
use crate::spec::{PackageSpec, ProfileSummary};

/// Builds the package spec from a validated manifest read from `manifest_path`, resolving its
/// relative paths against `base`.
pub fn spec_from_manifest(
    m: &Manifest,
    manifest_path: &Path,
    base: &Path,
) -> Result<PackageSpec, PackageError> {
    let kind = m.kind;
    let metal = m.source.tt_metal.resolve_metal(base);
    let extra_code = m
        .source
        .extra_code
        .iter()
        .map(|e| e.resolve(base))
        .collect();
    let runtime = m
        .runtime_spec()
        .map_err(|e| FieldError::new("invalid-value", "runtime", format!("`runtime`: {e}")))?
        .resolve(base);
    let default_name = m.default_profile_name();
    let settings = m.effective_serve(None).ok_or_else(|| {
        FieldError::new(
            "missing-profile",
            "default_profile",
            format!("default profile `{default_name}` does not exist"),
        )
    })?;
    let serve = serve_default(&default_name, &settings);
    let profiles = m
        .profiles()
        .into_iter()
        .map(|p| {
            let eff = m.effective_serve(Some(&p.name)).unwrap_or_default();
            ProfileSummary {
                default: p.name == default_name,
                name: p.name,
                hardware: eff.hardware,
                mesh: eff.mesh_device,
                max_model_len: eff.max_model_len,
            }
        })
        .collect();
    Ok(PackageSpec {
        manifest_path: manifest_path.to_path_buf(),
        name: m.name.clone(),
        repo: m.repo.clone(),
        weights: m.weights.repo().to_string(),
        weights_revision: m.weights.revision().map(String::from),
        kind,
        arch: m.arch.as_str().to_string(),
        metal,
        code: m.source.code.clone(),
        extra_code,
        ubuntu: m.source.ubuntu.clone(),
        python: m.source.python.clone(),
        runtime,
        serve,
        profiles,
        verify: m.verify.clone(),
        card: m.card.clone(),
    })
}

/// The host name recorded as the producer.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub use tt_model_manifest::wire::preview::UNBUILT_TAG;

/// The wire manifest JSON for a packaged manifest.
pub fn wire_json(m: &Manifest, packaged: &Packaged) -> Result<String, PackageError> {
    Ok(wire_manifest(m, Some(packaged)).to_json())
}

/// The one builder of the wire manifest from an authoring manifest: with what `package`
/// made, what it writes; without, the preview `serve --print` shows of a manifest not
/// packaged yet (the image `tt-model/<name>:unbuilt`, no digest, no provenance).
pub fn wire_manifest(m: &Manifest, packaged: Option<&Packaged>) -> WireManifest {
    let Some(packaged) = packaged else {
        return WireManifest::preview(m);
    };
    let repository = m.image.repository.clone().unwrap_or_else(|| m.name.clone());
    let built = &packaged.built;
    let (_, tag) = built.image.rsplit_once(':').unwrap_or((&built.image, ""));
    let mut runtime = m.runtime.clone();
    runtime.insert("lock".into(), Value::String("requirements.lock".into()));
    WireManifest::from_manifest(
        m,
        WireBuild {
            image: ImageRef {
                registry: m.image.registry.clone(),
                repository,
                tag: Some(tag.to_string()),
                // A registry stores the layout's manifest: pin that (what `docker pull`
                // takes); an image that travels in the Hub repo is named by its image id.
                digest: if m.image.registry == "hf" {
                    built.image_digest.clone()
                } else {
                    Some(packaged.manifest_digest.clone())
                },
            },
            runtime: Some(runtime),
            built: built.clone(),
            producer: Producer {
                tt_kernel_version: built.tt_model_version.clone(),
                created_at: built.created_at.clone(),
                hostname: hostname(),
            },
        },
    )
}
