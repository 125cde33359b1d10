//! `tt-model push`: not implemented yet (declared so the CLI surface is complete).

use crate::ExitStatus;
use crate::args::PushArgs;
use crate::printer::Printer;

/// Runs `tt-model push`.
pub fn run(_args: &PushArgs, _printer: &Printer) -> anyhow::Result<ExitStatus> {
    super::not_implemented("push")
}
