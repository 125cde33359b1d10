//! A manifest's findings as `lint` prints them (a snippet with carets per finding, then the
//! per-file verdict): for `lint` itself, and for every other command that meets an invalid
//! manifest, whose errors [`super`] renders the same way.

use std::path::Path;

use tt_model_manifest::Diagnostic;

use crate::printer::Printer;

/// Where the findings of a command other than `lint` go: stderr, as every status line of
/// those commands (their stdout is a result: a path, an argv).
pub(crate) fn print_findings_stderr(
    printer: &Printer,
    path: &Path,
    src: &str,
    diagnostics: &[Diagnostic],
) {
    let file = path.display().to_string();
    for d in diagnostics {
        printer.err_raw(&d.render(&file, src, printer.color_stderr()));
        printer.err_raw("\n");
    }
}

/// Prints a manifest that failed to load as `lint` shows it (snippets with carets, dotted
/// paths, did-you-mean labels, then the verdict), on stderr.
pub(crate) fn print_invalid(printer: &Printer, path: &Path, src: &str, diagnostics: &[Diagnostic]) {
    print_findings_stderr(printer, path, src, diagnostics);
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    verdict(
        printer,
        &path.display().to_string(),
        (errors, diagnostics.len() - errors),
    );
}

/// The per-file verdict on stderr.
pub(crate) fn verdict(printer: &Printer, file: &str, counts: (usize, usize)) {
    match counts {
        (0, 0) => printer.done(file, Some("no problems")),
        (0, w) => printer.warn(&format!("{file}  {w} warning{}", plural(w))),
        (e, w) => printer.error(&format!(
            "{file}  {e} error{}, {w} warning{}",
            plural(e),
            plural(w)
        )),
    }
}

/// `s` for a count other than one.
pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
