//! `tt-model search [query] [--catalog] [--limit N] [--json]`: packages on the Hub by tag
//! (`tt-model-cache`, or `tt-model-catalog` with `--catalog`), newest first.

use tt_model_hub::card_tags::{CATALOG_TAG, PACKAGE_TAG};
use tt_model_local::Local;

use super::hub;
use crate::ExitStatus;
use crate::args::SearchArgs;
use crate::printer::Printer;

/// Runs `tt-model search`.
pub fn run(args: &SearchArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let client = hub::client(local, false)?;
    let tag = if args.catalog {
        CATALOG_TAG
    } else {
        PACKAGE_TAG
    };
    let rt = crate::runtime()?;
    let rows = rt
        .block_on(client.list_models(&[tag], args.query.as_deref(), args.limit))
        .map_err(hub::consequence("nothing was searched"))?;
    if args.json {
        printer.out(&serde_json::to_string_pretty(&rows)?);
        return Ok(ExitStatus::Success);
    }
    if rows.is_empty() {
        printer.skipped("no packages found", Some(&format!("tag {tag}")));
    }
    for r in &rows {
        let vis = if r.private { "private" } else { "public" };
        printer.out(&format!("{}  [{vis}]  downloads={}", r.id, r.downloads));
    }
    Ok(ExitStatus::Success)
}
