//! `tt-model pull`: not implemented yet (declared so the CLI surface is complete).

use crate::ExitStatus;
use crate::args::PullArgs;
use crate::printer::Printer;

/// Runs `tt-model pull`.
pub fn run(_args: &PullArgs, _printer: &Printer) -> anyhow::Result<ExitStatus> {
    super::not_implemented("pull")
}
