//! The package pipeline: Resolve ── Stage ── Build ── Verify ── Export, then the atomic swap.
//!
//! Everything is written into a temporary directory beside the final output and renamed at
//! the end, so a failed or interrupted package leaves the previous output intact. When the
//! rebuilt image has the same id as the previous output's (the engine's layer cache made the
//! build a no-op), verification and export are not repeated: the previous, verified OCI
//! layout is moved into the new output.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tt_model_engine::Client;
use tt_model_engine::build::{BuildEvent, BuildRequest};
use tt_model_engine::oneshot::OneShot;
use tt_model_oci::labels;

use crate::card::render_card;
use crate::context::ContextBuilder;
use crate::error::PackageError;
use crate::git::metal_facts;
use crate::report::{Event, Phase, Progress};
use crate::spec::{MetalSource, PackageSpec};
use crate::stage::{check_metal_tree, read_torch_pin, stage_code, walk_metal};
use crate::templates::{DOCKERFILE, RenderOptions, render};

mod base;
mod build;
mod export;
mod resolve;
mod staging;
mod verify;

pub use base::{OPENMPI_DIR, PullPolicy};
use build::{ImageBuilt, build};
use export::export;
use resolve::{Resolved, resolve};
use staging::{Staged, StagedFiles, stage};
pub use verify::{RUNTIME_USER, freeze_run, verify_run};
use verify::{Verified, freeze_lock, verify};

/// The image repository every package is tagged under.
pub use tt_model_manifest::wire::preview::IMAGE_REPOSITORY_PREFIX;

/// Options that are not in the manifest.
#[derive(Debug, Clone)]
pub struct PackageOptions {
    /// The staging root; the package lands in `<out_root>/<name>/`.
    pub out_root: PathBuf,
    /// Replaces both base images (dev and runtime). It must already carry the runtime
    /// libraries: no apt step runs on it.
    pub base_image: Option<String>,
    /// The directory build logs go to (`<name>.log`, [`crate::entry::log_path`]).
    pub log_dir: PathBuf,
    /// The directory the manifest's relative paths resolve against (the working directory,
    /// as in `lint`).
    pub sources_base: PathBuf,
    /// The tt-model version recorded in the outputs.
    pub tool_version: String,
    /// Network for the build's `RUN` steps (`None`: the engine default).
    pub build_network: Option<String>,
    /// Ignore the layer cache.
    pub no_cache: bool,
    /// The engine's builder: the classic one, or BuildKit with the tt-metal build cache.
    pub builder: Builder,
    /// When a base image is pulled (`--pull`).
    pub pull: PullPolicy,
    /// The registry credentials base-image pulls send (the CLI reads the Docker config).
    pub credentials: tt_model_engine::pull::CredentialSource,
}

/// Which of the engine's builders builds the image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Builder {
    /// BuildKit when the engine is on its local socket, else the classic builder.
    #[default]
    Auto,
    /// The classic builder (`version=1`): bases pinned by image id, the layer cache only.
    Classic,
    /// BuildKit (`version=2`, the engine's local socket): the tt-metal build step gets a cache
    /// mount that outlives every package (ccache and CPM's sources; docs/packaging.md, "Build
    /// cache for tt-metal").
    BuildKit,
}

impl Builder {
    /// Whether the build goes through BuildKit with the engine at `host`: `Auto` takes it where
    /// the BuildKit request can go (a `unix://` socket); an explicit `BuildKit` on another host
    /// fails at the build with the reason.
    pub fn uses_buildkit(self, host: &str) -> bool {
        match self {
            Builder::Auto => host.starts_with("unix://"),
            Builder::Classic => false,
            Builder::BuildKit => true,
        }
    }
}

/// The `built` provenance block: the pipeline fills the wire manifest's own type, so what
/// `package` returns and what `tt_kernel_manifest.json` records are one value.
pub use tt_model_manifest::Built;

/// What `package` produced.
#[derive(Debug, Clone)]
pub struct Packaged {
    /// The package directory, `<out_root>/<name>/`.
    pub out_dir: PathBuf,
    /// The provenance recorded in the wire manifest.
    pub built: Built,
    /// The OCI manifest digest of the exported layout (what a registry stores it as).
    pub manifest_digest: String,
    /// Verify checks the image passed (this run, or the previous one when verify was skipped).
    pub verify_checks: usize,
    /// The image was the one the previous output already held, so verify was skipped and its OCI
    /// layout kept instead of exported again.
    pub reused_export: bool,
    /// Paths `source.code` dropped by the ignore list.
    pub ignored: Vec<String>,
}

/// Builds the wire manifest JSON from what was packaged (supplied by the caller, which owns
/// the authoring manifest).
pub type WireFn<'a> = dyn Fn(&Packaged) -> Result<String, PackageError> + Send + Sync + 'a;

/// The default dev base image for a Ubuntu release.
pub fn default_dev_image(ubuntu: &str) -> String {
    format!("ghcr.io/tenstorrent/tt-metal/tt-metalium/ubuntu-{ubuntu}-dev-amd64:latest")
}

pub use crate::out_root::check_out_root;

pub use tt_model_manifest::timefmt::utc_now;

struct Log {
    file: Option<fs::File>,
}

impl Log {
    fn open(path: &Path) -> Self {
        let file = path
            .parent()
            .map(fs::create_dir_all)
            .and_then(|r| r.ok())
            .and_then(|_| fs::File::create(path).ok());
        Self { file }
    }
    fn line(&mut self, text: &str) {
        if let Some(f) = &mut self.file {
            let _ = writeln!(f, "{text}");
        }
    }
}

struct Phases<'r> {
    progress: &'r dyn Progress,
    current: Option<(Phase, Instant)>,
}

impl Phases<'_> {
    fn start(&mut self, phase: Phase) {
        if let Some((p, t)) = self.current.take() {
            self.progress.emit(Event::PhaseFinished(p, t.elapsed()));
        }
        self.progress.emit(Event::PhaseStarted(phase));
        self.current = Some((phase, Instant::now()));
    }
    fn finish(&mut self) {
        if let Some((p, t)) = self.current.take() {
            self.progress.emit(Event::PhaseFinished(p, t.elapsed()));
        }
    }
    fn event(&mut self, e: Event) {
        self.progress.emit(e);
    }
}

/// The previous output's image id and whether its OCI layout is complete.
fn previous_output(out_dir: &Path) -> Option<String> {
    let text = fs::read_to_string(out_dir.join(tt_model_manifest::wire::MANIFEST_NAME)).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let id = json["container"]["built"]["image_digest"]
        .as_str()?
        .to_string();
    out_dir.join("image/index.json").is_file().then_some(id)
}

/// Runs the whole pipeline on a resolved spec, logging to `log_path`: one function per phase, each handing the next
/// what it produced. `wire` renders the wire manifest from the `built` block (the caller owns
/// the authoring manifest); [`crate::package_manifest`] is the entry point that reads one.
pub async fn package(
    spec: &PackageSpec,
    wire: &WireFn<'_>,
    client: &Client,
    options: &PackageOptions,
    log_path: &Path,
    progress: &dyn Progress,
) -> Result<Packaged, PackageError> {
    let mut run = Run {
        client,
        options,
        phases: Phases {
            progress,
            current: None,
        },
        log: Log::open(log_path),
    };
    run.log.line(&format!(
        "+ tt-model package --container {}",
        spec.manifest_path.display()
    ));
    run.phases.start(Phase::Resolve);
    let resolved = resolve(spec, &mut run).await?;
    run.phases.start(Phase::Stage);
    let Staged {
        context,
        rendered,
        files,
    } = stage(&resolved, &mut run).await?;
    run.phases.start(Phase::Build);
    let image = build(&resolved, &files, context, &mut run).await?;
    run.phases.start(Phase::Verify);
    let verified = verify(&resolved, &rendered, &image, &files.out_dir, &mut run).await?;
    run.phases.start(Phase::Export);
    let packaged = export(resolved, files, image, verified, wire, &mut run).await?;
    run.phases.finish();
    run.log.line(&format!(
        "packaged {} into {}",
        packaged.built.image,
        packaged.out_dir.display()
    ));
    Ok(packaged)
}

/// What every phase shares: the engine, the options, the progress stepper and the log.
struct Run<'a, 'r> {
    client: &'a Client,
    options: &'a PackageOptions,
    phases: Phases<'r>,
    log: Log,
}
