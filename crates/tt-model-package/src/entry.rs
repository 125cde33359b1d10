//! The one packaging entry point: a manifest file, options and the caller's progress in; a verified,
//! staged package (or a typed error with its exit class) out. `tt-model package` and the
//! end-to-end tests both go through it, so reading, checking and resolving a manifest happen
//! the same way everywhere.

use std::path::{Path, PathBuf};

use tt_model_manifest::{CheckOptions, load_path};

use crate::error::PackageError;
use crate::from_manifest::{spec_from_manifest, wire_json};
use crate::pipeline::{PackageOptions, Packaged, package};
use crate::report::{Event, Progress};

/// Where the build log of package `name` goes under the log directory.
pub fn log_path(log_dir: &Path, name: &str) -> PathBuf {
    log_dir.join(format!("{name}.log"))
}

/// Packages the manifest at `path`: reads and checks it as `lint --check-sources` does (its
/// relative paths resolve against `options.sources_base`), reports its warnings
/// ([`Event::Findings`]) and where the build log goes ([`Event::Log`]), connects to the
/// container engine and runs the pipeline. A manifest with errors fails before the engine is
/// asked for anything.
pub async fn package_manifest(
    path: &Path,
    options: &PackageOptions,
    progress: &dyn Progress,
) -> Result<Packaged, PackageError> {
    let checks = CheckOptions {
        sources_base: Some(options.sources_base.clone()),
    };
    let (manifest, warnings) =
        load_path(path, &checks).map_err(|e| PackageError::Manifest(Box::new(e)))?;
    if !warnings.is_empty() {
        progress.emit(Event::Findings(warnings));
    }
    let spec = spec_from_manifest(&manifest, path, &options.sources_base)?;
    let log = log_path(&options.log_dir, &spec.name);
    progress.emit(Event::Log(log.clone()));
    let client = tt_model_engine::Client::connect().await?;
    let wire = |packaged: &Packaged| wire_json(&manifest, packaged);
    package(&spec, &wire, &client, options, &log, progress).await
}
