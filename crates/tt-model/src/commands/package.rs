//! `tt-model package`: load the manifest, run the package pipeline with a phase stepper, and
//! turn failures into diagnosis cards.
//!
//! The first Ctrl-C only warns (a build can take hours); the second cancels: the pipeline
//! future is dropped, the engine aborts the build when its connection closes, and the staging
//! directory is removed, leaving the previous output untouched.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::ProgressBar;
use tt_model_engine::EngineError;
use tt_model_package::{
    ErrorClass, Event, PackageError, PackageOptions, Phase, Reporter, package_manifest,
};

use crate::ExitStatus;
use crate::args::PackageArgs;
use crate::printer::{DiagnosisCard, Printer};

/// Where build logs go: `build/` under the one state root every command uses
/// (`TT_MODEL_HOME`, else `$XDG_CACHE_HOME/tt-model`, else `~/.cache/tt-model`).
fn log_dir() -> PathBuf {
    crate::local::state_root().join("build")
}

/// Draws the stepper and the current build step.
struct CliReporter<'p> {
    printer: &'p Printer,
    /// The manifest, for showing its findings as `lint` does.
    manifest: PathBuf,
    /// Where the pipeline said its log goes.
    log: Option<PathBuf>,
    bar: ProgressBar,
    phase: Option<Phase>,
    step: String,
    cached: usize,
    steps: usize,
}

impl<'p> CliReporter<'p> {
    fn new(printer: &'p Printer, manifest: PathBuf) -> Self {
        let bar = if printer.color_stderr() {
            crate::progress::spinner("{spinner} {prefix} {wide_msg} {elapsed}")
        } else {
            ProgressBar::hidden()
        };
        Self {
            printer,
            manifest,
            log: None,
            bar,
            phase: None,
            step: String::new(),
            cached: 0,
            steps: 0,
        }
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

impl Reporter for CliReporter<'_> {
    fn event(&mut self, event: Event) {
        match event {
            Event::Findings(findings) => {
                // Shown as `lint` shows them: snippet, caret, dotted path, suggestion.
                let src = std::fs::read_to_string(&self.manifest).unwrap_or_default();
                let (printer, path) = (self.printer, &self.manifest);
                self.bar
                    .suspend(|| super::lint::print_findings_stderr(printer, path, &src, &findings));
            }
            Event::Log(path) => self.log = Some(path),
            Event::PhaseStarted(p) => {
                self.phase = Some(p);
                self.bar.set_prefix(Self::stepper(p));
                self.bar.set_message("");
                self.bar.reset_elapsed();
            }
            Event::PhaseFinished(p, took) => {
                let detail = match p {
                    Phase::Build => format!(
                        "{:.1}s, {}/{} steps cached",
                        took.as_secs_f64(),
                        self.cached,
                        self.steps
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
            Event::Context { files, bytes } => {
                self.bar.set_message(format!(
                    "context: {files} files, {:.1} MB",
                    bytes as f64 / 1e6
                ));
            }
            Event::BuildStep {
                index,
                total,
                instruction,
            } => {
                self.steps = total;
                self.step = format!("step {index}/{total}: {instruction}");
                self.bar
                    .set_message(self.step.chars().take(100).collect::<String>());
            }
            Event::BuildCached => self.cached += 1,
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
                    format!("image/ written ({:.1} MB OCI layout)", bytes as f64 / 1e6)
                };
                self.say(|| printer.note(&text));
            }
        }
    }
}

/// Runs `tt-model package`.
pub fn run(args: &PackageArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let started = Instant::now();
    // As the original's package: the sources are checked too (`lint --check-sources`), so a
    // missing path is a located finding before anything is staged. Relative paths resolve
    // against the working directory, as in `lint`.
    let options = PackageOptions {
        out_root: args.out.clone(),
        base_image: args.base_image.clone(),
        log_dir: log_dir(),
        sources_base: std::env::current_dir()?,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        build_network: args.build_network.clone(),
        no_cache: args.no_cache,
    };
    let mut reporter = CliReporter::new(printer, args.container.clone());
    // The bar is shared (cheap clone) so the Ctrl-C handler can print above it while the
    // pipeline holds the reporter.
    let bar = reporter.bar.clone();
    let outcome = crate::block_on(async {
        let fut = package_manifest(&args.container, &options, &mut reporter);
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
    let log = reporter
        .log
        .take()
        .unwrap_or_else(|| log_dir().join("<name>.log"));
    match outcome {
        Err(PackageError::Manifest(e)) => Err(super::lint::manifest_error(*e)),
        Err(PackageError::Engine(e)) if e.is_unreachable() => {
            let evidence = std::iter::successors(std::error::Error::source(&e), |c| c.source())
                .map(|c| c.to_string())
                .collect();
            printer.fail(&DiagnosisCard {
                consequence: Some("nothing was built".into()),
                ..crate::engine_unreachable_card(&e, evidence)
            });
            Ok(ExitStatus::Failure)
        }
        Ok(done) => {
            printer.done(
                &format!("Packaged {}", done.built.image),
                Some(&format!("{:.1}s", started.elapsed().as_secs_f64())),
            );
            printer.note(&format!("code/ {}", done.built.code_sha256));
            printer.note(&format!("full log: {}", log.display()));
            // Installed = listed by `tt-model list`; serve uses the entry to judge the image.
            let manifest = done.out_dir.join(crate::local::package::WIRE_MANIFEST);
            if let Err(e) = crate::local::installed::record_staged(&manifest) {
                printer.warn(&format!(
                    "{} is not recorded as installed: {e:#}",
                    manifest.display()
                ));
            }
            printer.out(&done.out_dir.display().to_string());
            printer.next(&format!(
                "tt-model serve {}",
                done.out_dir.join("tt_kernel_manifest.json").display()
            ));
            Ok(ExitStatus::Success)
        }
        Err(PackageError::Verify {
            index,
            check,
            status,
            output,
        }) => {
            let mut evidence = vec![
                format!("check {index}: {check}"),
                format!("exit status {status}"),
            ];
            evidence.extend(
                output
                    .lines()
                    .rev()
                    .take(20)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .map(|l| format!("| {l}")),
            );
            printer.fail(&DiagnosisCard {
                cause: "A verify assertion failed inside the finished image".into(),
                evidence,
                consequence: Some(
                    "the package was not written; the previous output is untouched".into(),
                ),
                actions: vec![
                    "fix the image contents or the assertion in `verify:`".into(),
                    format!("full log: {}", log.display()),
                ],
            });
            Ok(ExitStatus::Failure)
        }
        Err(PackageError::Engine(EngineError::Build {
            tag,
            message,
            last_lines,
        })) => {
            let mut evidence: Vec<String> = last_lines
                .iter()
                .rev()
                .take(15)
                .rev()
                .map(|l| format!("| {l}"))
                .collect();
            evidence.push(message.clone());
            printer.fail(&DiagnosisCard {
                cause: format!("Building `{tag}` failed"),
                evidence,
                consequence: Some(
                    "the package was not written; the previous output is untouched".into(),
                ),
                actions: vec![format!("full log: {}", log.display())],
            });
            Ok(ExitStatus::Failure)
        }
        Err(PackageError::CargoBuild {
            package,
            first_error,
        }) => {
            printer.fail(&DiagnosisCard {
                cause: format!("`runtime.cargo`: the Rust package `{package}` did not compile"),
                evidence: first_error.lines().map(|l| format!("| {l}")).collect(),
                consequence: Some("nothing was built; the previous output is untouched".into()),
                actions: vec![
                    "fix the error above in the workspace `runtime.cargo.workspace` names".into(),
                    format!("every compiler message: {}", log.display()),
                ],
            });
            Ok(ExitStatus::Failure)
        }
        Err(e @ PackageError::GitSource { .. }) => {
            // Shown as `lint` shows a finding: where the source is named in the manifest.
            let PackageError::GitSource { field, .. } = &e else {
                unreachable!()
            };
            let src = std::fs::read_to_string(&args.container).unwrap_or_default();
            let at = format!("{field}.ref");
            let pos = tt_model_manifest::locate(&src, &at).unwrap_or(tt_model_manifest::Pos::START);
            let mut finding =
                tt_model_manifest::Diagnostic::error("git-source", at, pos, e.to_string());
            finding.help = Some(
                "check the repository URL and that the branch, tag or commit exists there (git ls-remote <repo> <ref>)"
                    .into(),
            );
            super::lint::print_findings_stderr(printer, &args.container, &src, &[finding]);
            printer.error("nothing was built; the previous output is untouched");
            Ok(ExitStatus::Failure)
        }
        Err(PackageError::Cancelled) => {
            printer.skipped(
                "cancelled",
                Some("nothing was written; the previous output is untouched"),
            );
            Ok(ExitStatus::Interrupted)
        }
        // The input is wrong: its message says what to fix, without a cause chain.
        Err(e) if e.class() == ErrorClass::Input => {
            printer.error(&e.to_string());
            Ok(ExitStatus::Failure)
        }
        Err(e) => Err(e.into()),
    }
}
