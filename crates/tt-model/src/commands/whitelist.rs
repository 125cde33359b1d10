//! `tt-model whitelist <org/name>` / `unwhitelist Tenstorrent/<name>` (reference §5.6): the
//! library's review-copy use cases (`tt_model_local::whitelist`), their steps drawn as they
//! are reported.

use tt_model_local::{Local, whitelist};

use crate::ExitStatus;
use crate::args::{UnwhitelistArgs, WhitelistArgs};
use crate::printer::Printer;

/// Runs `tt-model whitelist`.
pub fn whitelist(
    args: &WhitelistArgs,
    printer: &Printer,
    local: &Local,
) -> anyhow::Result<ExitStatus> {
    crate::block_on(async { Ok(whitelist::whitelist(local, &args.id, printer).await?) })?;
    Ok(ExitStatus::Success)
}

/// Runs `tt-model unwhitelist`.
pub fn unwhitelist(
    args: &UnwhitelistArgs,
    printer: &Printer,
    local: &Local,
) -> anyhow::Result<ExitStatus> {
    crate::block_on(async { Ok(whitelist::unwhitelist(local, &args.id, printer).await?) })?;
    Ok(ExitStatus::Success)
}
