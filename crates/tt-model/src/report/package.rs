//! How a failed `package` is shown: the build's and verify's own cards (with the last lines of
//! their output and the build log), an unreachable engine's card, a manifest field's problem
//! located as `lint` shows a finding, and every other failure by its class.

use std::path::PathBuf;

use tt_model_engine::EngineError;
use tt_model_package::{ErrorClass, PackageError};

use crate::ExitStatus;
use crate::events::DiagnosisCard;
use crate::printer::Printer;

/// A failed `package`, with what its rendering names: the manifest (to locate a field's
/// problem in) and the build log.
#[derive(Debug)]
pub struct PackageFailed {
    /// Why the package failed.
    pub error: PackageError,
    /// The authoring manifest packaged.
    pub manifest: PathBuf,
    /// The build log.
    pub log: PathBuf,
}

impl std::fmt::Display for PackageFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for PackageFailed {
    // The failure's own causes, so the generic rendering shows the chain it always showed.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// Prints a failed package; `None` leaves it to the generic rule (the machine's failures).
pub(super) fn render(p: &PackageFailed, printer: &Printer) -> Option<ExitStatus> {
    match &p.error {
        PackageError::Engine(e) if e.is_unreachable() => {
            let evidence = std::iter::successors(std::error::Error::source(e), |c| c.source())
                .map(|c| c.to_string())
                .collect();
            printer.fail(&DiagnosisCard {
                consequence: Some("nothing was built".into()),
                ..super::engine_unreachable_card(e, evidence)
            });
            Some(ExitStatus::Failure)
        }
        PackageError::Verify {
            index,
            check,
            status,
            output,
        } => {
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
                    format!("full log: {}", p.log.display()),
                ],
            });
            Some(ExitStatus::Failure)
        }
        PackageError::Engine(EngineError::Build {
            tag,
            message,
            last_lines,
        }) => {
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
                actions: vec![format!("full log: {}", p.log.display())],
            });
            Some(ExitStatus::Failure)
        }
        PackageError::CargoBuild {
            package,
            first_error,
        } => {
            printer.fail(&DiagnosisCard {
                cause: format!("`runtime.cargo`: the Rust package `{package}` did not compile"),
                evidence: first_error.lines().map(|l| format!("| {l}")).collect(),
                consequence: Some("nothing was built; the previous output is untouched".into()),
                actions: vec![
                    "fix the error above in the workspace `runtime.cargo.workspace` names".into(),
                    format!("every compiler message: {}", p.log.display()),
                ],
            });
            Some(ExitStatus::Failure)
        }
        _ => by_class(p, printer),
    }
}

/// Every other failure, by its class: a manifest field's problem is located and shown as
/// `lint` shows a finding; other input errors say what to fix; a failure of the build or of
/// our own code is a diagnosis card; the machine's failures go up with their causes.
fn by_class(p: &PackageFailed, printer: &Printer) -> Option<ExitStatus> {
    let e = &p.error;
    match e.class() {
        ErrorClass::Input => {
            match e.field_error() {
                Some(problem) => {
                    let src = std::fs::read_to_string(&p.manifest).unwrap_or_default();
                    let finding = problem.to_diagnostic(&src);
                    super::findings::print_findings_stderr(printer, &p.manifest, &src, &[finding]);
                    printer.error("nothing was built; the previous output is untouched");
                }
                None => printer.error(&e.to_string()),
            }
            Some(ExitStatus::Failure)
        }
        ErrorClass::Failed => {
            let evidence = std::iter::successors(std::error::Error::source(e), |c| c.source())
                .map(|c| c.to_string())
                .collect();
            printer.fail(&DiagnosisCard {
                cause: e.to_string(),
                evidence,
                consequence: Some(
                    "the package was not written; the previous output is untouched".into(),
                ),
                actions: vec![format!("full log: {}", p.log.display())],
            });
            Some(ExitStatus::Failure)
        }
        // The machine's failures: the generic rule (a card for the engine or the Hub, else the
        // cause chain).
        ErrorClass::Environment => None,
        ErrorClass::Cancelled => {
            printer.skipped(
                "cancelled",
                Some("nothing was written; the previous output is untouched"),
            );
            Some(ExitStatus::Interrupted)
        }
    }
}
