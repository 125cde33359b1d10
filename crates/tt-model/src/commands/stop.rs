//! `tt-model stop`: the library's `stop` use case (SIGTERM with a grace period, then the
//! chips' reset after a kill), its steps drawn as they are reported; exit 1 when a reset did
//! not complete.

use std::time::Duration;

use tt_model_local::Local;
use tt_model_local::stop::{self, StopRequest};

use crate::ExitStatus;
use crate::args::StopArgs;
use crate::printer::Printer;

/// Runs `tt-model stop`.
pub fn run(args: &StopArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let req = StopRequest {
        target: &args.target,
        profile: args.profile.as_deref(),
        grace: Duration::from_secs(args.grace),
    };
    let stopped = crate::block_on(async { Ok(stop::stop(local, &req, printer).await?) })?;
    Ok(if stopped.reset_failed() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
