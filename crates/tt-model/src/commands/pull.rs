//! `tt-model pull <org/name[@rev]> [--with-weights]`: install a container package from the Hub
//! (reference §5.3; the use case is `tt_model_local::pull`).

use tt_model_local::Local;
use tt_model_local::pull::{self, PullRequest};

use crate::ExitStatus;
use crate::args::PullArgs;
use crate::printer::Printer;

/// Runs `tt-model pull`.
pub fn run(args: &PullArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    crate::block_on(async {
        let req = PullRequest {
            target: &args.id,
            with_weights: args.with_weights,
            force: args.force,
        };
        pull::pull(local, &req, printer, async |_| anyhow::Ok(())).await?;
        printer.next(&format!("tt-model serve {}", args.id));
        Ok(ExitStatus::Success)
    })
}
