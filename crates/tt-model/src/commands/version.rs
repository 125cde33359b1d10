//! `tt-model version`: the bare version (`0.1.0`), as `--version` prints it; scripts scrape it.

use crate::ExitStatus;
use crate::printer::Printer;

/// Runs `tt-model version`.
pub fn run(printer: &Printer) -> anyhow::Result<ExitStatus> {
    printer.out(env!("CARGO_PKG_VERSION"));
    Ok(ExitStatus::Success)
}
