//! `tt-model publish <id>` / `unpublish <id>` (reference §5.6): the library's catalog use
//! cases (`tt_model_local::catalog`), their steps drawn as they are reported.

use tt_model_local::{Local, catalog};

use crate::ExitStatus;
use crate::args::{PublishArgs, UnpublishArgs};
use crate::printer::Printer;

/// Runs `tt-model publish`.
pub fn publish(args: &PublishArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    crate::block_on(async { Ok(catalog::list(local, &args.id, printer).await?) })?;
    Ok(ExitStatus::Success)
}

/// Runs `tt-model unpublish`.
pub fn unpublish(
    args: &UnpublishArgs,
    printer: &Printer,
    local: &Local,
) -> anyhow::Result<ExitStatus> {
    crate::block_on(async { Ok(catalog::delist(local, &args.id, printer).await?) })?;
    Ok(ExitStatus::Success)
}
