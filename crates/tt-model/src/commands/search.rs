//! `tt-model search [query] [--catalog] [--arch A] [--limit N] [--json]`: packages on the Hub by
//! tag (`tt-model-cache`, or `tt-model-catalog` with `--catalog`, ANDed with the arch tag),
//! newest first.
//!
//! `--json` is a contract with Tenstorrent's `tt` (`tt model search` parses it): a list of
//! rows `{id, private, downloads, last_modified}` exactly as the original writes them, with
//! `last_modified` in the form Python prints a `datetime` (`2026-05-01 12:00:00+00:00`).

use serde::Serialize;
use tt_model_hub::card_tags::{CATALOG_TAG, PACKAGE_TAG};
use tt_model_hub::hub::ModelRow;
use tt_model_local::{Local, catalog};

use crate::ExitStatus;
use crate::args::SearchArgs;
use crate::printer::Printer;

/// One `--json` row, in the original's field order.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Row {
    /// The repo id.
    pub id: String,
    /// Whether the repo is private.
    pub private: bool,
    /// The Hub's download count.
    pub downloads: u64,
    /// When the repo last changed (`""` when the Hub did not say).
    pub last_modified: String,
}

impl From<&ModelRow> for Row {
    fn from(r: &ModelRow) -> Row {
        Row {
            id: r.id.clone(),
            private: r.private,
            downloads: r.downloads,
            last_modified: r
                .last_modified
                .as_deref()
                .map(python_datetime)
                .unwrap_or_default(),
        }
    }
}

/// The Hub's `2026-05-01T12:00:00.000Z` as Python's `str(datetime)` writes the parsed value
/// (`2026-05-01 12:00:00+00:00`; microseconds only when not zero). Anything else is kept as is.
pub fn python_datetime(iso: &str) -> String {
    let Some(rest) = iso.strip_suffix('Z') else {
        return iso.to_string();
    };
    let Some((date, time)) = rest.split_once('T') else {
        return iso.to_string();
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    if date.len() != 10 || hms.len() != 8 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return iso.to_string();
    }
    let micros: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
    if micros.bytes().all(|b| b == b'0') {
        format!("{date} {hms}+00:00")
    } else {
        format!("{date} {hms}.{micros}+00:00")
    }
}

/// Runs `tt-model search`.
pub fn run(args: &SearchArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let base = if args.catalog {
        CATALOG_TAG
    } else {
        PACKAGE_TAG
    };
    let mut tags = vec![base];
    if let Some(arch) = args.arch.as_deref().filter(|a| !a.is_empty()) {
        tags.push(arch);
    }
    // `tt` passes the query positionally even when it has none (`search "" --json`).
    let query = args.query.as_deref().filter(|q| !q.is_empty());
    let rows =
        crate::block_on(async { Ok(catalog::search(local, &tags, query, args.limit).await?) })?;
    if args.json {
        let rows: Vec<Row> = rows.iter().map(Row::from).collect();
        printer.out(&serde_json::to_string_pretty(&rows)?);
        return Ok(ExitStatus::Success);
    }
    if rows.is_empty() {
        printer.skipped(
            "no packages found",
            Some(&format!("tags {}", tags.join(" + "))),
        );
    }
    for r in &rows {
        let vis = if r.private { "private" } else { "public" };
        printer.out(&format!("{}  [{vis}]  downloads={}", r.id, r.downloads));
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_python_prints_them() {
        assert_eq!(
            python_datetime("2026-05-01T12:00:00.000Z"),
            "2026-05-01 12:00:00+00:00"
        );
        assert_eq!(
            python_datetime("2026-05-01T12:00:00.25Z"),
            "2026-05-01 12:00:00.250000+00:00"
        );
        assert_eq!(
            python_datetime("2026-05-01T12:00:00Z"),
            "2026-05-01 12:00:00+00:00"
        );
        assert_eq!(python_datetime("yesterday"), "yesterday");
    }
}
