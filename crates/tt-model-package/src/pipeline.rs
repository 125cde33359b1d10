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

use crate::card::{CardFacts, render_card};
use crate::context::ContextBuilder;
use crate::error::PackageError;
use crate::git::{MetalFacts, metal_facts};
use crate::report::{Event, Phase, Reporter};
use crate::spec::{MetalSource, PackageSpec};
use crate::stage::{check_metal_tree, read_torch_pin, stage_code, walk_metal};
use crate::templates::{DOCKERFILE, RenderOptions, render};

/// The label keys put on every packaged image.
pub mod labels {
    /// The package slug (`name:`); what `list` and `rm` find packaged images by.
    pub const NAME: &str = "org.tenstorrent.tt-model";
    /// The Hub repo, `org/name`.
    pub const REPO: &str = "org.tenstorrent.tt-model.repo";
    /// The primary weights id.
    pub const WEIGHTS: &str = "org.tenstorrent.tt-model.weights";
    /// The architecture (`arch:`).
    pub const ARCH: &str = "org.tenstorrent.tt-model.arch";
    /// The server kind (`kind:`).
    pub const KIND: &str = "org.tenstorrent.tt-model.kind";
    /// The serve profile names, comma-separated, in manifest order.
    pub const PROFILES: &str = "org.tenstorrent.tt-model.profiles";
    /// Tree digest of the shipped `code/`, `sha256:<hex>`.
    pub const CODE_SHA256: &str = "org.tenstorrent.tt-model.code-sha256";
    /// The tt-metal commit; the label is absent when the tree has no git facts.
    pub const TT_METAL_SHA: &str = "org.tenstorrent.tt-model.tt-metal-sha";
}

/// The image repository every package is tagged under.
pub const IMAGE_REPOSITORY_PREFIX: &str = "tt-model";

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
}

/// The `built` provenance block.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Built {
    /// The final tag, `tt-model/<name>:<12 hex>`.
    pub image: String,
    /// The engine's image id, `sha256:…`.
    pub image_digest: String,
    /// The OCI manifest digest of the exported layout (what a registry stores it as).
    pub manifest_digest: String,
    /// The Hub repo (`org/name`).
    pub repo: String,
    /// The tt-model version that packaged it.
    pub tt_model_version: String,
    /// When it was packaged, UTC, `YYYY-MM-DDTHH:MM:SSZ` ([`utc_now`]).
    pub created_at: String,
    /// Git facts of the tt-metal tree that was packaged.
    pub tt_metal: MetalFacts,
    /// Tree digest of the shipped `code/` ([`crate::digest`]), `sha256:<hex>`.
    pub code_sha256: String,
    /// Base images by stage, pinned (`sha256:` ids or registry digests).
    pub base_images: BTreeMap<String, String>,
    /// SHA-256 of the build-context tar.
    pub context_sha256: String,
    /// The `runtime.cargo` binary shipped in the image.
    pub cargo: Option<tt_model_manifest::wire::CargoBuild>,
    /// The vLLM source (`vllm.path` with its commit and dirty flag, the fork's repo at its
    /// resolved commit).
    pub vllm: Option<tt_model_manifest::wire::ComponentBuild>,
    /// The plugin source (`plugin.path` or `{repo, ref}` at its resolved commit).
    pub plugin: Option<tt_model_manifest::wire::ComponentBuild>,
    /// Git `extra_code` roots, each at its resolved commit.
    pub extra_code: Vec<crate::sources::GitPin>,
}

/// What `package` produced.
#[derive(Debug, Clone)]
pub struct Packaged {
    /// The package directory, `<out_root>/<name>/`.
    pub out_dir: PathBuf,
    /// The provenance recorded in the wire manifest.
    pub built: Built,
    /// Verify checks the image passed (this run, or the previous one when verify was skipped).
    pub verify_checks: usize,
    /// The image was the one the previous output already held, so verify was skipped and its OCI
    /// layout kept instead of exported again.
    pub reused_export: bool,
    /// Paths `source.code` dropped by the ignore list.
    pub ignored: Vec<String>,
}

/// Builds the wire manifest JSON from the `built` block (supplied by the caller, which owns
/// the authoring manifest).
pub type WireFn<'a> = dyn Fn(&Built) -> Result<String, PackageError> + Send + Sync + 'a;

/// The default dev base image for a Ubuntu release.
pub fn default_dev_image(ubuntu: &str) -> String {
    format!("ghcr.io/tenstorrent/tt-metal/tt-metalium/ubuntu-{ubuntu}-dev-amd64:latest")
}

/// Refuses an output root inside a git checkout (outputs hold images and code copies).
pub fn check_out_root(out_root: &Path) -> Result<PathBuf, PackageError> {
    let abs = if out_root.is_absolute() {
        out_root.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(PackageError::io(
                "Reading the current directory for",
                out_root,
            ))?
            .join(out_root)
    };
    let mut probe = Some(abs.as_path());
    while let Some(dir) = probe {
        if dir.join(".git").exists() {
            return Err(PackageError::OutInsideGit(abs));
        }
        probe = dir.parent();
    }
    Ok(abs)
}

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

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
    reporter: &'r mut dyn Reporter,
    current: Option<(Phase, Instant)>,
}

impl Phases<'_> {
    fn start(&mut self, phase: Phase) {
        if let Some((p, t)) = self.current.take() {
            self.reporter.event(Event::PhaseFinished(p, t.elapsed()));
        }
        self.reporter.event(Event::PhaseStarted(phase));
        self.current = Some((phase, Instant::now()));
    }
    fn finish(&mut self) {
        if let Some((p, t)) = self.current.take() {
            self.reporter.event(Event::PhaseFinished(p, t.elapsed()));
        }
    }
    fn event(&mut self, e: Event) {
        self.reporter.event(e);
    }
}

/// The previous output's image id and whether its OCI layout is complete.
fn previous_output(out_dir: &Path) -> Option<String> {
    let text = fs::read_to_string(out_dir.join("tt_kernel_manifest.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let id = json["container"]["built"]["image_digest"]
        .as_str()?
        .to_string();
    out_dir.join("image/index.json").is_file().then_some(id)
}

/// Resolves an image reference to the engine's pinned id, refusing one that is missing.
async fn pin_image(client: &Client, reference: &str) -> Result<String, PackageError> {
    match client.image(reference).await? {
        Some(facts) => Ok(facts.pinned_ref()),
        None => Err(PackageError::Spec(format!(
            "base image `{reference}` is not present in the container engine, and no registry is reachable to pull it; build it locally (scripts/make-base-images.sh makes the test bases) or pass `--base-image`"
        ))),
    }
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
    reporter: &mut dyn Reporter,
) -> Result<Packaged, PackageError> {
    let mut run = Run {
        client,
        options,
        phases: Phases {
            reporter,
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

/// Resolve's result: sources fetched and pinned, the tt-metal facts, the base images pinned.
struct Resolved {
    /// The spec with git `extra_code` roots pointing at their fetched checkouts.
    spec: PackageSpec,
    fetched: crate::sources::Fetched,
    metal_root: PathBuf,
    facts: MetalFacts,
    torch_pin: Option<String>,
    out_root: PathBuf,
    dev_pin: String,
    runtime_pin: String,
    base_images: BTreeMap<String, String>,
}

/// Resolve: fetch and pin every source, read the tt-metal tree's facts, pin both base images.
async fn resolve(spec: &PackageSpec, run: &mut Run<'_, '_>) -> Result<Resolved, PackageError> {
    let out_root = check_out_root(&run.options.out_root)?;
    fs::create_dir_all(&out_root).map_err(PackageError::io("Creating", &out_root))?;
    // Git sources, local plugin/vLLM trees and wheels: fetched or listed on the host, every
    // git ref pinned to its commit (crate::sources).
    let (spec_owned, out_owned) = (spec.clone(), out_root.clone());
    let scratch = format!("{}sources-", crate::partials::partial_prefix(&spec.name));
    let fetched = tokio::task::spawn_blocking(move || {
        crate::sources::fetch_sources(&spec_owned, &out_owned, &scratch)
    })
    .await
    .map_err(|e| PackageError::Spec(format!("fetching sources failed: {e}")))??;
    let mut spec = spec.clone();
    spec.extra_code = fetched.extra_code.clone();
    let metal_root = match (&spec.metal, &fetched.metal) {
        (MetalSource::Local { path }, _) => path.clone(),
        (MetalSource::Git { .. }, Some((_, checkout))) => checkout.clone(),
        (MetalSource::Git { .. }, None) => unreachable!("fetch_sources fetches a git tt-metal"),
    };
    check_metal_tree(&metal_root)?;
    let mut facts = metal_facts(&metal_root);
    if let Some((pin, _)) = &fetched.metal {
        facts.sha = Some(pin.sha.clone());
        facts.mode = "git".into();
        facts.remote = Some(pin.repo.clone());
        facts.branch =
            (!pin.git_ref.chars().all(|c| c.is_ascii_hexdigit())).then(|| pin.git_ref.clone());
        facts.dirty = false;
        facts.pushed = true;
    }
    for (pin, what) in fetched
        .metal
        .iter()
        .map(|(p, _)| (p, "tt-metal"))
        .chain(fetched.extra_pins.iter().map(|p| (p, "extra_code")))
    {
        run.phases.event(Event::Note(format!(
            "{what} {} @ {} → {}",
            pin.repo,
            pin.git_ref,
            &pin.sha[..12]
        )));
    }
    let torch_pin = read_torch_pin(&metal_root);
    let (dev_ref, runtime_ref) = match &run.options.base_image {
        Some(b) => (b.clone(), b.clone()),
        None => (
            default_dev_image(&spec.ubuntu),
            format!("ubuntu:{}", spec.ubuntu),
        ),
    };
    let dev_pin = pin_image(run.client, &dev_ref).await?;
    let runtime_pin = pin_image(run.client, &runtime_ref).await?;
    let mut base_images = BTreeMap::new();
    base_images.insert("builder".to_string(), format!("{dev_ref}@{dev_pin}"));
    base_images.insert(
        "runtime".to_string(),
        format!("{runtime_ref}@{runtime_pin}"),
    );
    run.phases.event(Event::Note(format!(
        "base image {dev_ref} pinned to {dev_pin}"
    )));
    match &facts.sha {
        Some(sha) => run.phases.event(Event::Note(format!(
            "tt-metal {} ({}{})",
            facts.describe.as_deref().unwrap_or(sha),
            &sha[..sha.len().min(12)],
            if facts.dirty { ", dirty" } else { "" }
        ))),
        None => run.phases.event(Event::Warning(format!(
            "{} is not a git checkout: no commit is recorded for tt-metal",
            metal_root.display()
        ))),
    }
    Ok(Resolved {
        spec,
        fetched,
        metal_root,
        facts,
        torch_pin,
        out_root,
        dev_pin,
        runtime_pin,
        base_images,
    })
}

/// Stage's result: the build context, and what the later phases keep of the staging.
struct Staged {
    context: ContextBuilder,
    rendered: crate::templates::RenderedFiles,
    files: StagedFiles,
}

/// The staging directory and what was staged into it, for Export.
struct StagedFiles {
    tmp: tempfile::TempDir,
    out_dir: PathBuf,
    code: crate::stage::CodeStage,
    lock_bytes: Option<Vec<u8>>,
    cargo: Option<crate::cargo_bin::CargoOutput>,
}

/// Stage: copy `code/` into a staging directory beside the output, build the `runtime.cargo`
/// binary, render the templates and lay out the build context.
async fn stage(r: &Resolved, run: &mut Run<'_, '_>) -> Result<Staged, PackageError> {
    let spec = &r.spec;
    let out_dir = r.out_root.join(&spec.name);
    // A killed run (SIGKILL, power loss) cannot clean up after itself; its owner pid in the
    // folder name tells us it is gone.
    for stale in crate::partials::sweep_stale(&r.out_root) {
        run.phases.event(Event::Note(format!(
            "removed {}, left by a run that was killed",
            stale.display()
        )));
    }
    let tmp = tempfile::Builder::new()
        .prefix(&crate::partials::partial_prefix(&spec.name))
        .tempdir_in(&r.out_root)
        .map_err(PackageError::io(
            "Creating a staging directory in",
            &r.out_root,
        ))?;
    let code_dir = tmp.path().join("code");
    let (spec_owned, metal_owned, code_owned) =
        (spec.clone(), r.metal_root.clone(), code_dir.clone());
    let code =
        tokio::task::spawn_blocking(move || stage_code(&spec_owned, &metal_owned, &code_owned))
            .await
            .map_err(|e| PackageError::Spec(format!("staging task failed: {e}")))??;
    for path in &code.ignored {
        run.phases
            .event(Event::Note(format!("code/: ignored {path}")));
    }
    run.phases.event(Event::Note(format!(
        "code/ {} files, {}",
        code.files.len(),
        code.digest
    )));
    let lock_bytes = match &spec.runtime.lock {
        Some(lock) => Some(fs::read(lock).map_err(|_| PackageError::MissingLock(lock.clone()))?),
        None => None,
    };
    let cargo = match spec.runtime.cargo.clone() {
        Some(cargo_spec) => Some(build_cargo_binary(cargo_spec, run).await?),
        None => None,
    };
    let metal_root = r.metal_root.clone();
    let metal_files = tokio::task::spawn_blocking(move || walk_metal(&metal_root))
        .await
        .map_err(|e| PackageError::Spec(format!("staging task failed: {e}")))??;
    let rendered = render(
        spec,
        &RenderOptions {
            tool_version: run.options.tool_version.clone(),
            torch_pin: r.torch_pin.clone(),
            install_apt: run.options.base_image.is_none(),
            has_lock: lock_bytes.is_some(),
        },
    )?;
    let mut ctx = ContextBuilder::new();
    // The engine stage copies these four folders whether or not they hold anything.
    for dir in ["plugin-src", "vllm-src", "wheels", "wheels/extra"] {
        ctx.with_dir(dir);
    }
    if let Some((files, _)) = &r.fetched.plugin {
        ctx.with_tree("plugin-src", files);
    }
    if let Some((files, _)) = &r.fetched.vllm {
        ctx.with_tree("vllm-src", files);
    }
    for (prefix, wheels) in [
        ("wheels", &r.fetched.vllm_wheels),
        ("wheels/extra", &r.fetched.extra_wheels),
    ] {
        for (name, path) in wheels {
            let size = fs::metadata(path)
                .map_err(PackageError::io("Reading", path))?
                .len();
            ctx.with_file(format!("{prefix}/{name}"), path.clone(), size, 0o644);
        }
    }
    for (path, text) in &rendered.files {
        ctx.with_bytes(path.clone(), text.clone(), 0o755);
    }
    ctx.with_tree("metalsrc", &metal_files);
    ctx.with_dir("metalsrc");
    for f in &code.files {
        ctx.with_file(
            format!("code/{}", f.path),
            code_dir.join(&f.path),
            f.size,
            f.mode,
        );
    }
    ctx.with_dir("code");
    ctx.with_bytes(
        "requirements.lock",
        lock_bytes.clone().unwrap_or_default(),
        0o644,
    );
    if let Some(out) = &cargo {
        ctx.with_file(
            format!("bin/{}", out.facts.bin),
            out.binary.clone(),
            out.facts.bytes,
            0o755,
        );
        // The provenance travels in the image too, so the server can report what it is
        // (`/info`) without the wire manifest; it holds no time stamp, so a no-op re-package
        // stays a layer-cache hit.
        let facts = serde_json::to_string_pretty(&out.facts).expect("plain data serializes");
        ctx.with_bytes("tt-model/cargo-build.json", facts, 0o644);
    }
    run.phases.event(Event::Context {
        files: ctx.file_count(),
        bytes: ctx.payload_bytes(),
    });
    Ok(Staged {
        context: ctx,
        rendered,
        files: StagedFiles {
            tmp,
            out_dir,
            code,
            lock_bytes,
            cargo,
        },
    })
}

/// `runtime.cargo`: the static binary built on the host, its compiler output in the log.
async fn build_cargo_binary(
    cargo_spec: crate::spec::CargoSpec,
    run: &mut Run<'_, '_>,
) -> Result<crate::cargo_bin::CargoOutput, PackageError> {
    let (out, lines) = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        let out = crate::cargo_bin::build(&cargo_spec, &mut |l| lines.push(l.to_owned()));
        (out, lines)
    })
    .await
    .map_err(|e| PackageError::Spec(format!("cargo build task failed: {e}")))?;
    for line in &lines {
        run.log.line(line);
    }
    let out = out?;
    let f = &out.facts;
    run.phases.event(Event::Note(format!(
        "{} {} → {} ({:.1} MB, static, {}{}, sha256 {})",
        f.bin,
        f.version,
        f.path,
        f.bytes as f64 / 1e6,
        f.rustc,
        if f.workspace_dirty {
            ", dirty workspace"
        } else {
            ""
        },
        &f.sha256[..12]
    )));
    Ok(out)
}

/// Build's result: the image under its provisional tag, and the context it was built from.
struct ImageBuilt {
    id: String,
    repository: String,
    provisional: String,
    final_tag: String,
    context_sha256: String,
}

/// The labels every packaged image carries (what `list` and `rm` find it by).
fn image_labels(r: &Resolved, code_digest: &str) -> BTreeMap<String, String> {
    let spec = &r.spec;
    let mut image_labels = BTreeMap::new();
    image_labels.insert(labels::NAME.to_string(), spec.name.clone());
    image_labels.insert(labels::REPO.to_string(), spec.repo.clone());
    image_labels.insert(labels::WEIGHTS.to_string(), spec.weights.clone());
    image_labels.insert(labels::ARCH.to_string(), spec.arch.clone());
    image_labels.insert(labels::KIND.to_string(), spec.kind.as_str().to_string());
    image_labels.insert(
        labels::PROFILES.to_string(),
        spec.profiles
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(","),
    );
    image_labels.insert(labels::CODE_SHA256.to_string(), code_digest.to_string());
    if let Some(sha) = &r.facts.sha {
        image_labels.insert(labels::TT_METAL_SHA.to_string(), sha.clone());
    }
    image_labels
}

/// Build: stream the context to the engine and build the image under a provisional tag.
async fn build(
    r: &Resolved,
    files: &StagedFiles,
    ctx: ContextBuilder,
    run: &mut Run<'_, '_>,
) -> Result<ImageBuilt, PackageError> {
    let spec = &r.spec;
    let repository = format!("{IMAGE_REPOSITORY_PREFIX}/{}", spec.name);
    let provisional = format!("{repository}:build");
    let mut build_args = BTreeMap::new();
    build_args.insert("BASE_IMAGE".to_string(), r.dev_pin.clone());
    build_args.insert("RUNTIME_IMAGE".to_string(), r.runtime_pin.clone());
    build_args.insert(
        "METAL_DESCRIBE".to_string(),
        r.facts.describe.clone().unwrap_or_else(|| "v0.0.0".into()),
    );
    build_args.insert("SCM_VERSION".to_string(), r.facts.scm_version.clone());
    build_args.insert("TT_MODEL_KIND".to_string(), spec.kind.as_str().to_string());
    if let Some(dir) = &spec.runtime.extra_models_dir {
        build_args.insert(
            "EXTRA_MODELS_DIR".to_string(),
            format!("/opt/tt-metal/{dir}"),
        );
    }
    let request = BuildRequest {
        tag: provisional.clone(),
        dockerfile: DOCKERFILE.to_string(),
        build_args,
        labels: image_labels(r, &files.code.digest),
        network_mode: run.options.build_network.clone(),
        target: None,
        no_cache: run.options.no_cache,
    };
    let (stream, summary) = ctx.into_stream();
    let Run {
        client,
        phases,
        log,
        ..
    } = run;
    let built = client
        .build_image(&request, stream, |event| match &event {
            BuildEvent::Step {
                index,
                total,
                instruction,
            } => {
                log.line(&format!("Step {index}/{total} : {instruction}"));
                phases.event(Event::BuildStep {
                    index: *index,
                    total: *total,
                    instruction: instruction.clone(),
                });
            }
            BuildEvent::Cached => {
                log.line(" ---> Using cache");
                phases.event(Event::BuildCached);
            }
            BuildEvent::Line(l) => {
                log.line(l);
                phases.event(Event::BuildLine(l.clone()));
            }
        })
        .await;
    let id = match built {
        Ok(id) => id,
        Err(e) => {
            if let tt_model_engine::EngineError::Build { message, .. } = &e {
                log.line(&format!("error: {message}"));
            }
            return Err(e.into());
        }
    };
    let context = summary
        .await
        .map_err(|e| PackageError::Spec(format!("context task failed: {e}")))?
        .map_err(PackageError::io(
            "Streaming the build context from",
            &r.metal_root,
        ))?;
    log.line(&format!("image {id} (context {})", context.sha256));
    let short = id.trim_start_matches("sha256:");
    let final_tag = format!("{repository}:{}", &short[..short.len().min(12)]);
    Ok(ImageBuilt {
        id,
        repository,
        provisional,
        final_tag,
        context_sha256: context.sha256,
    })
}

/// Verify's result: how many checks passed, and whether this exact image passed before (the
/// previous output's verified layout is then reused).
struct Verified {
    checks: usize,
    reuse: bool,
}

/// Verify: run the manifest's checks inside the image (isolated, as the runtime user), unless
/// the previous output holds this very image.
async fn verify(
    r: &Resolved,
    rendered: &crate::templates::RenderedFiles,
    image: &ImageBuilt,
    out_dir: &Path,
    run: &mut Run<'_, '_>,
) -> Result<Verified, PackageError> {
    let checks = rendered.checks.len();
    if previous_output(out_dir).is_some_and(|prev| prev == image.id) {
        run.phases.event(Event::Verified {
            checks,
            reused: true,
        });
        return Ok(Verified {
            checks,
            reuse: true,
        });
    }
    let outcome = run
        .client
        .run_to_completion(&verify_run(&image.id, &r.spec.name))
        .await?;
    for line in outcome.output.lines() {
        run.log.line(line);
    }
    // On failure the image keeps only its provisional tag; the next package reuses its cached
    // layers.
    let checks = crate::verify::interpret(&rendered.checks, outcome.exit_code, &outcome.output)?;
    run.phases.event(Event::Verified {
        checks,
        reused: false,
    });
    Ok(Verified {
        checks,
        reuse: false,
    })
}

/// Export: tag the image, write (or reuse) its OCI layout, freeze the lock, write the card and
/// the wire manifest, and swap the staging directory into place.
async fn export(
    r: Resolved,
    files: StagedFiles,
    image: ImageBuilt,
    verified: Verified,
    wire: &WireFn<'_>,
    run: &mut Run<'_, '_>,
) -> Result<Packaged, PackageError> {
    let spec = &r.spec;
    let short = image
        .final_tag
        .rsplit_once(':')
        .map_or("", |(_, tag)| tag)
        .to_string();
    run.client
        .tag_image(&image.id, &image.repository, &short)
        .await?;
    if image.provisional != image.final_tag {
        run.client.remove_image(&image.provisional).await?;
    }
    let tmp = files.tmp;
    let out_dir = files.out_dir;
    let image_dir = tmp.path().join("image");
    let reused_export = if verified.reuse {
        fs::rename(out_dir.join("image"), &image_dir)
            .map_err(PackageError::io("Reusing", out_dir.join("image")))?;
        run.phases.event(Event::Exported {
            bytes: 0,
            reused: true,
        });
        true
    } else {
        let export = run
            .client
            .export_oci_layout(&image.id, &image_dir, &image.final_tag)
            .await?;
        if export.config_digest != image.id {
            run.phases.event(Event::Warning(format!(
                "the exported config digest {} differs from the image id {}",
                export.config_digest, image.id
            )));
        }
        run.phases.event(Event::Exported {
            bytes: export.bytes,
            reused: false,
        });
        false
    };
    // The layout (new or reused) names its manifest: a registry push stores it as is.
    let manifest_digest = tt_model_engine::oci_load::OciLayout::open(&image_dir)
        .map_err(|e| PackageError::Spec(format!("the exported image layout is unreadable: {e}")))?
        .manifest_digest;
    let lock_text = match files.lock_bytes {
        Some(bytes) => bytes,
        None => freeze_lock(run.client, spec, &image.id).await?.into_bytes(),
    };
    write(&tmp.path().join("requirements.lock"), &lock_text)?;
    let built = Built {
        image: image.final_tag,
        image_digest: image.id,
        manifest_digest,
        repo: spec.repo.clone(),
        tt_model_version: run.options.tool_version.clone(),
        created_at: utc_now(),
        tt_metal: r.facts.clone(),
        code_sha256: files.code.digest.clone(),
        base_images: r.base_images.clone(),
        context_sha256: image.context_sha256,
        cargo: files.cargo.map(|c| c.facts),
        vllm: r.fetched.vllm.as_ref().map(|(_, b)| b.clone()),
        plugin: r.fetched.plugin.as_ref().map(|(_, b)| b.clone()),
        extra_code: r.fetched.extra_pins.clone(),
    };
    let card = render_card(
        spec,
        &CardFacts {
            tool_version: run.options.tool_version.clone(),
            created_at: built.created_at.clone(),
            code_sha256: built.code_sha256.clone(),
            metal_sha: r.facts.sha.clone(),
            metal_remote: r.facts.remote.clone(),
            metal_dirty: r.facts.dirty,
            cargo: built.cargo.clone(),
            base_images: built.base_images.clone(),
        },
    )?;
    write(&tmp.path().join("README.md"), card.as_bytes())?;
    let wire_json = wire(&built)?;
    write(
        &tmp.path().join("tt_kernel_manifest.json"),
        wire_json.as_bytes(),
    )?;
    swap_into_place(tmp, &out_dir)?;
    Ok(Packaged {
        out_dir,
        built,
        verify_checks: verified.checks,
        reused_export,
        ignored: files.code.ignored,
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), PackageError> {
    fs::write(path, bytes).map_err(PackageError::io("Writing", path))
}

/// Replaces `out_dir` with the finished staging directory: the old output is moved aside
/// first and deleted only once the new one is in place.
fn swap_into_place(tmp: tempfile::TempDir, out_dir: &Path) -> Result<(), PackageError> {
    let staged = tmp.keep();
    let aside = out_dir.with_file_name(format!(
        ".{}.old-{}",
        out_dir
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let had_old = out_dir.exists();
    if had_old {
        fs::rename(out_dir, &aside).map_err(PackageError::io("Moving aside", out_dir))?;
    }
    if let Err(e) = fs::rename(&staged, out_dir) {
        if had_old {
            let _ = fs::rename(&aside, out_dir);
        }
        let _ = fs::remove_dir_all(&staged);
        return Err(PackageError::Io {
            action: "Moving the package into",
            path: out_dir.to_path_buf(),
            source: e,
        });
    }
    if had_old {
        let _ = fs::remove_dir_all(&aside);
    }
    Ok(())
}

/// The Python that prints `name==version<TAB>local|index` for every distribution.
const FREEZE_SCRIPT: &str = r#"
import importlib.metadata as md, json
for d in md.distributions():
    name = d.metadata["Name"]
    direct = d.read_text("direct_url.json")
    local = False
    if direct:
        try:
            local = json.loads(direct).get("url", "").startswith("file:")
        except Exception:
            local = True
    print(f"{name}=={d.version}\t{'local' if local else 'index'}")
"#;

/// The runtime user of every packaged image (`tt`); the one-shot checks run as it too.
pub const RUNTIME_USER: &str = "1000:1000";

/// The one-shot verify container: `verify.sh` as the runtime user, no network, no devices,
/// no mounts. Isolation is stated here, not inherited from the Dockerfile's `USER` line,
/// which a base image or a template change could lose.
pub fn verify_run(image: &str, name: &str) -> OneShot {
    OneShot {
        image: image.to_string(),
        entrypoint: Some(vec![]),
        cmd: vec!["sh".into(), "/usr/local/share/tt-model/verify.sh".into()],
        user: Some(RUNTIME_USER.into()),
        env: vec![],
        network_mode: Some("none".into()),
        label: Some((labels::NAME.to_string(), format!("{name}-verify"))),
    }
}

/// The one-shot freeze container (the venv's distributions), isolated as [`verify_run`].
pub fn freeze_run(image: &str) -> OneShot {
    OneShot {
        image: image.to_string(),
        entrypoint: Some(vec!["/opt/tt-venv/bin/python".into()]),
        cmd: vec!["-c".into(), FREEZE_SCRIPT.into()],
        user: Some(RUNTIME_USER.into()),
        network_mode: Some("none".into()),
        ..Default::default()
    }
}

/// Freezes the image's venv into a lock (index-origin distributions, minus the kind's
/// excludes), or notes that the image has no Python environment.
async fn freeze_lock(
    client: &Client,
    spec: &PackageSpec,
    image: &str,
) -> Result<String, PackageError> {
    if !spec.needs_python() {
        return Ok(format!(
            "# {}: this http-server image has no Python environment; nothing to pin.\n",
            spec.name
        ));
    }
    let run = client.run_to_completion(&freeze_run(image)).await?;
    if run.exit_code != 0 {
        return Err(PackageError::Spec(format!(
            "freezing the image's Python environment failed (exit {}): {}",
            run.exit_code,
            run.output.trim()
        )));
    }
    Ok(crate::lock::lock_from_freeze(
        &run.output,
        crate::launcher::lock_excludes(spec.kind),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the engine is asked for, not what the image's Dockerfile happens to say: the
    /// verify and freeze containers run as 1000:1000, without network, devices or mounts.
    #[test]
    fn verify_and_freeze_containers_are_isolated_by_their_spec() {
        for (what, run) in [
            ("verify", verify_run("sha256:abc", "demo")),
            ("freeze", freeze_run("sha256:abc")),
        ] {
            let body = run.create_body();
            assert_eq!(body.image.as_deref(), Some("sha256:abc"), "{what}");
            assert_eq!(body.user.as_deref(), Some("1000:1000"), "{what}");
            assert_eq!(body.network_disabled, Some(true), "{what}");
            let host = body.host_config.expect("host config");
            assert_eq!(host.network_mode.as_deref(), Some("none"), "{what}");
            assert!(host.devices.unwrap_or_default().is_empty(), "{what}");
            assert!(
                host.device_requests.unwrap_or_default().is_empty(),
                "{what}"
            );
            assert!(host.binds.unwrap_or_default().is_empty(), "{what}");
            assert!(host.mounts.unwrap_or_default().is_empty(), "{what}");
            assert_ne!(host.privileged, Some(true), "{what}");
            assert!(host.cap_add.unwrap_or_default().is_empty(), "{what}");
        }
    }
}
