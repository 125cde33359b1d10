//! `tt-model package`: load the manifest and run the package pipeline with a phase stepper; a
//! failure goes to the one renderer (`report::package`) with the manifest and the build log.
//!
//! The first Ctrl-C only warns (a build can take hours); the second cancels: the pipeline
//! future is dropped, the engine aborts the build when its connection closes, and the staging
//! directory is removed, leaving the previous output untouched.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use indicatif::ProgressBar;
use tt_model_engine::pull::{CredentialSource, RegistryAuth};
use tt_model_local::Progress;
use tt_model_package::{
    Builder, Event, PackageError, PackageOptions, Phase, PullPolicy, package_manifest,
};

use tt_model_local::Local;

use crate::ExitStatus;
use crate::args::{BuilderArg, PackageArgs, PullArg};
use crate::printer::Printer;
use crate::progress::human_bytes;
use crate::report::PackageFailed;

/// The package command's view of the pipeline's events: the stepper and the current build
/// step; the events every use case shares go to the printer as they do everywhere.
struct PackageView<'p> {
    printer: &'p Printer,
    /// The manifest, for showing its findings as `lint` does.
    manifest: PathBuf,
    bar: ProgressBar,
    /// What the stepper counts as events arrive (the pipeline reports through `&self`).
    state: Mutex<Stepper>,
}

/// What the package view remembers between events.
#[derive(Default)]
struct Stepper {
    /// Where the pipeline said its log goes.
    log: Option<PathBuf>,
    /// Dockerfile steps that ran.
    steps: usize,
    /// Of those, the ones the layer cache answered.
    cached: usize,
}

impl<'p> PackageView<'p> {
    fn new(printer: &'p Printer, manifest: PathBuf) -> Self {
        let bar = if printer.color_stderr() {
            crate::progress::spinner("{spinner} {prefix} {wide_msg} {elapsed}")
        } else {
            ProgressBar::hidden()
        };
        Self {
            printer,
            manifest,
            bar,
            state: Mutex::new(Stepper::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, Stepper> {
        // A panic while drawing leaves whole counters: keep drawing.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stepper(current: Phase) -> String {
        Phase::ALL
            .iter()
            .map(|p| {
                if *p == current {
                    format!("[{}]", p.name())
                } else {
                    p.name().to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ── ")
    }

    fn say(&self, f: impl FnOnce()) {
        self.bar.suspend(f);
    }
}

impl Progress for PackageView<'_> {
    fn emit(&self, event: Event) {
        match event {
            Event::Findings(findings) => {
                // Shown as `lint` shows them: snippet, caret, dotted path, suggestion.
                let src = std::fs::read_to_string(&self.manifest).unwrap_or_default();
                let (printer, path) = (self.printer, &self.manifest);
                self.bar.suspend(|| {
                    crate::report::findings::print_findings_stderr(printer, path, &src, &findings)
                });
            }
            Event::Log(path) => self.state().log = Some(path),
            Event::PhaseStarted(p) => {
                self.bar.set_prefix(Self::stepper(p));
                self.bar.set_message("");
                self.bar.reset_elapsed();
            }
            Event::PhaseFinished(p, took) => {
                let state = self.state();
                let detail = match p {
                    Phase::Build => format!(
                        "{:.1}s, {}/{} steps cached",
                        took.as_secs_f64(),
                        state.cached,
                        state.steps
                    ),
                    _ => format!("{:.1}s", took.as_secs_f64()),
                };
                let printer = self.printer;
                self.say(|| printer.done(p.name(), Some(&detail)));
            }
            Event::Note(n) => {
                if self.printer.verbose() {
                    let printer = self.printer;
                    self.say(|| printer.note(&n));
                }
            }
            Event::Warning(w) => {
                let printer = self.printer;
                self.say(|| printer.warn(&w));
            }
            Event::Pulling { image, done, total } => {
                self.bar.set_message(format!(
                    "pulling {image}: {} / {}",
                    human_bytes(done),
                    human_bytes(total)
                ));
            }
            Event::Pulled {
                image,
                bytes,
                layers,
                took,
            } => {
                let printer = self.printer;
                let detail = format!(
                    "{} in {layers} layer{}, {:.1}s",
                    human_bytes(bytes),
                    if layers == 1 { "" } else { "s" },
                    took.as_secs_f64()
                );
                self.say(|| printer.done(&format!("pulled {image}"), Some(&detail)));
            }
            Event::Skipped { what, detail } => {
                let printer = self.printer;
                self.say(|| printer.skipped(&what, detail.as_deref()));
            }
            Event::Context { files, bytes } => {
                self.bar
                    .set_message(format!("context: {files} files, {}", human_bytes(bytes)));
            }
            Event::BuildStep {
                index,
                total,
                instruction,
            } => {
                // Steps that ran, not the last step's total: BuildKit numbers steps per stage
                // and skips the stages no other stage needs.
                self.state().steps += 1;
                let step = format!("step {index}/{total}: {instruction}");
                self.bar
                    .set_message(step.chars().take(100).collect::<String>());
            }
            Event::BuildCached => self.state().cached += 1,
            Event::BuildLine(line) => {
                if self.printer.verbose() {
                    let printer = self.printer;
                    self.bar
                        .suspend(|| printer.err_raw(&format!("    {line}\n")));
                }
            }
            Event::Verified { checks, reused } => {
                let printer = self.printer;
                let text = if reused {
                    format!("{checks} checks passed (same image as the previous package)")
                } else {
                    format!("{checks} checks passed inside the image")
                };
                self.say(|| printer.note(&text));
            }
            Event::Exported { bytes, reused } => {
                let printer = self.printer;
                let text = if reused {
                    "image/ reused: the image id is unchanged".to_string()
                } else {
                    format!("image/ written ({} OCI layout)", human_bytes(bytes))
                };
                self.say(|| printer.note(&text));
            }
            // The pipeline emits none of these; were it to, they read as anywhere else.
            other @ (Event::StepStart { .. }
            | Event::StepDone { .. }
            | Event::StepEnd { .. }
            | Event::Done { .. }
            | Event::Next(_)
            | Event::Detail(_)
            | Event::Container { .. }) => {
                let printer = self.printer;
                self.say(|| printer.show(&other));
            }
        }
    }
}

/// Base-image pulls send what `docker login` stored for the registry (the Docker config
/// convention `push` uses too), read when a pull needs it.
fn docker_config_credentials() -> CredentialSource {
    CredentialSource::new(|host| {
        tt_model_hub::registry::credentials::for_host(host)
            .map(|found| {
                found.map(|c| RegistryAuth {
                    username: c.username,
                    password: c.secret,
                })
            })
            .map_err(|e| e.to_string())
    })
}

/// Runs `tt-model package`.
pub fn run(args: &PackageArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let started = Instant::now();
    // As the original's package: the sources are checked too (`lint --check-sources`), so a
    // missing path is a located finding before anything is staged. Relative paths resolve
    // against the working directory, as in `lint`.
    let options = PackageOptions {
        out_root: args.out.clone(),
        base_image: args.base_image.clone(),
        log_dir: local.build_log_dir(),
        sources_base: std::env::current_dir()?,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        build_network: args.build_network.clone(),
        no_cache: args.no_cache,
        pull: match args.pull {
            PullArg::Never => PullPolicy::Never,
            PullArg::Missing => PullPolicy::Missing,
            PullArg::Always => PullPolicy::Always,
        },
        credentials: docker_config_credentials(),
        builder: match args.builder {
            BuilderArg::Auto => Builder::Auto,
            BuilderArg::Classic => Builder::Classic,
            BuilderArg::Buildkit => Builder::BuildKit,
        },
    };
    let view = PackageView::new(printer, args.container.clone());
    // The bar is shared (cheap clone) so the Ctrl-C handler can print above it while the
    // pipeline holds the view.
    let bar = view.bar.clone();
    let outcome = crate::block_on(async {
        let fut = package_manifest(&args.container, &options, &view);
        tokio::pin!(fut);
        let mut warned = false;
        let outcome = loop {
            tokio::select! {
                r = &mut fut => break r,
                _ = tokio::signal::ctrl_c() => {
                    if warned {
                        break Err(PackageError::Cancelled);
                    }
                    warned = true;
                    bar.suspend(|| printer.warn("Ctrl-C: press it again to cancel the package (the previous output stays intact)"));
                }
            }
        };
        Ok(outcome)
    })?;
    bar.finish_and_clear();
    let log = view
        .state()
        .log
        .take()
        .unwrap_or_else(|| local.build_log_dir().join("<name>.log"));
    match outcome {
        Err(PackageError::Manifest(e)) => Err(anyhow::Error::new(*e)),
        Ok(done) => {
            printer.done(
                &format!("Packaged {}", done.built.image),
                Some(&format!("{:.1}s", started.elapsed().as_secs_f64())),
            );
            if let Some(code) = &done.built.code_sha256 {
                printer.note(&format!("code/ {code}"));
            }
            printer.note(&format!("full log: {}", log.display()));
            // Installed = listed by `tt-model list`; serve uses the entry to judge the image.
            let manifest = done.out_dir.join(tt_model_local::state::WIRE_MANIFEST);
            if let Err(e) = tt_model_local::installed::record_staged(local, &manifest) {
                printer.warn(&format!(
                    "{} is not recorded as installed: {e:#}",
                    manifest.display()
                ));
            }
            printer.out(&done.out_dir.display().to_string());
            printer.next(&format!(
                "tt-model serve {}",
                done.out_dir
                    .join(tt_model_local::state::WIRE_MANIFEST)
                    .display()
            ));
            Ok(ExitStatus::Success)
        }
        Err(error) => Err(PackageFailed {
            error,
            manifest: args.container.clone(),
            log,
        }
        .into()),
    }
}
