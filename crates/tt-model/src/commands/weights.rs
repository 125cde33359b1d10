//! `tt-model weights <target> [--check]`: fill (or check) this environment's HF cache with a
//! package's weights at their pinned revisions (the use case is `tt_model_local::fill`).

use tt_model_local::Local;
use tt_model_local::fill;

use crate::ExitStatus;
use crate::args::WeightsArgs;
use crate::printer::Printer;

/// Runs `tt-model weights`.
pub fn run(args: &WeightsArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    crate::block_on(async {
        fill::fill(local, &args.target, args.check, printer).await?;
        Ok(ExitStatus::Success)
    })
}
