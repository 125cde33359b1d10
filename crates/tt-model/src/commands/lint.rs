//! `tt-model lint`: check manifests, print every finding with its location, exit 1 on errors.
//!
//! Findings go to stdout (they are the command's output); the per-file verdicts go to stderr.

use std::path::Path;

use serde_json::json;
use tt_model_manifest::{CheckOptions, Report, check_bytes};

use crate::ExitStatus;
use crate::args::{LintArgs, LintFormat};
use crate::printer::Printer;
use crate::report::findings::{plural, verdict};

/// Runs `tt-model lint`.
pub fn run(args: &LintArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let options = CheckOptions {
        sources_base: if args.check_sources {
            Some(std::env::current_dir()?)
        } else {
            None
        },
    };
    let (mut errors, mut warnings, mut unreadable) = (0usize, 0usize, 0usize);
    let mut json_files = Vec::new();
    for path in &args.files {
        let file = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(err) => {
                unreadable += 1;
                match args.format {
                    LintFormat::Human => printer.error(&format!("{file}: cannot read: {err}")),
                    LintFormat::Github => {
                        printer.out(&format!("::error file={file}::cannot read: {err}"))
                    }
                    LintFormat::Json => {
                        json_files.push(json!({"path": file, "error": err.to_string()}))
                    }
                }
                continue;
            }
        };
        let report = check_bytes(&bytes, &options);
        let (e, w) = report.counts();
        errors += e;
        warnings += w;
        match args.format {
            LintFormat::Human => human(printer, path, &bytes, &report),
            LintFormat::Github => {
                for d in &report.diagnostics {
                    printer.out(&d.github(&file));
                }
            }
            LintFormat::Json => {
                json_files.push(json!({"path": file, "diagnostics": report.diagnostics}))
            }
        }
    }
    match args.format {
        LintFormat::Json => printer.out(&serde_json::to_string_pretty(&json!({
            "files": json_files,
            "errors": errors,
            "warnings": warnings,
        }))?),
        LintFormat::Human if args.files.len() > 1 => {
            let line = format!(
                "checked {} manifests: {} error{}, {} warning{}",
                args.files.len(),
                errors,
                plural(errors),
                warnings,
                plural(warnings)
            );
            if errors > 0 {
                printer.error(&line);
            } else {
                printer.done(&line, None);
            }
        }
        _ => {}
    }
    Ok(if unreadable > 0 {
        ExitStatus::Error
    } else if errors > 0 || (args.deny_warnings && warnings > 0) {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

fn human(printer: &Printer, path: &Path, bytes: &[u8], report: &Report) {
    let file = path.display().to_string();
    let src = String::from_utf8_lossy(bytes);
    for d in &report.diagnostics {
        printer.out_raw(&d.render(&file, &src, printer.color_stdout()));
        printer.out("");
    }
    verdict(printer, &file, report.counts());
}
