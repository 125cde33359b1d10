//! Text → [`Node`] tree: size and encoding guards, serde-saphyr with strict options (duplicate
//! keys refused, small alias and node budgets), and parse errors turned into located
//! [`Diagnostic`]s.

use serde_saphyr::{Budget, DuplicateKeyPolicy, MessageFormatter};

use crate::diagnostic::Diagnostic;
use crate::node::{Node, Pos, parse_tree};

/// The largest manifest we read (the seed manifest is ~25 KB).
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// Why the text did not become a tree: one located diagnostic.
pub(crate) fn parse(src: &str) -> Result<Node, Box<Diagnostic>> {
    if src.len() > MAX_MANIFEST_BYTES {
        return Err(Box::new(Diagnostic::error(
            "too-large",
            "",
            Pos::START,
            format!(
                "the manifest is {} bytes; the limit is {MAX_MANIFEST_BYTES}",
                src.len()
            ),
        )));
    }
    if src
        .trim()
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Err(Box::new(Diagnostic::error(
            "empty",
            "",
            Pos::START,
            "the manifest is empty; expected a mapping with schema, repo, name, weights, arch and source",
        )));
    }
    let options = options();
    let root = parse_tree(src, options).map_err(|err| Box::new(from_saphyr(&err)))?;
    if root.as_map().is_none() {
        return Err(Box::new(
            Diagnostic::error(
                "not-a-mapping",
                "",
                root.pos,
                format!(
                    "the manifest does not contain a YAML mapping (found {} at the top level)",
                    root.value.describe()
                ),
            )
            .with_help("a tt-model.yaml is a mapping: `schema: \"5.1\"`, `repo: org/name`, …"),
        ));
    }
    Ok(root)
}

fn options() -> serde_saphyr::Options {
    let mut budget = Budget::default();
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    budget.max_nodes = 100_000;
    budget.max_events = 400_000;
    budget.max_depth = 48;
    budget.max_documents = 1;
    budget.max_total_scalar_bytes = MAX_MANIFEST_BYTES * 2;
    budget.max_recorded_anchor_events = 50_000;
    budget.max_recorded_anchor_bytes = 1024 * 1024;
    serde_saphyr::options! {
        duplicate_keys: DuplicateKeyPolicy::Error,
        with_snippet: false,
        // YAML 1.2: only `true`/`false` are booleans (`y`, `on`, `no` stay strings).
        strict_booleans: true,
        budget: Some(budget),
    }
}

/// A serde-saphyr error as a diagnostic at its location (the start of the file when the parser
/// gives none, e.g. for a budget breach).
fn from_saphyr(err: &serde_saphyr::Error) -> Diagnostic {
    let pos = err
        .location()
        .filter(|l| l.line() > 0)
        .map_or(Pos::START, |l| {
            Pos::at(
                u32::try_from(l.line()).unwrap_or(u32::MAX),
                u32::try_from(l.column()).unwrap_or(u32::MAX),
            )
        });
    let message = serde_saphyr::DefaultMessageFormatter
        .format_message(err)
        .into_owned();
    // serde-saphyr's advice names its own API; our users edit YAML, not Options.
    let message = message
        .trim()
        .trim_end_matches(", set DuplicateKeyPolicy in Options if acceptable")
        .to_owned();
    let (code, help) = classify(&message);
    let mut d = Diagnostic::error(code, "", pos, format!("invalid YAML: {message}"));
    if let Some(help) = help {
        d = d.with_help(help);
    }
    d
}

fn classify(message: &str) -> (&'static str, Option<&'static str>) {
    let lower = message.to_ascii_lowercase();
    if lower.contains("duplicate") {
        (
            "duplicate-key",
            Some("each key may appear once per mapping; remove or merge the repeated one"),
        )
    } else if lower.contains("tabs ") || lower.contains("tab character") {
        (
            "yaml-tab",
            Some("YAML indents with spaces only; replace the tab characters"),
        )
    } else if lower.contains("budget") || lower.contains("alias") || lower.contains("limit") {
        (
            "yaml-limit",
            Some(
                "anchors/aliases may not expand into huge documents, and nesting is limited; write the values out",
            ),
        )
    } else {
        ("yaml-syntax", None)
    }
}

/// Where the first invalid UTF-8 byte is, as a diagnostic.
pub(crate) fn utf8_error(bytes: &[u8], err: &std::str::Utf8Error) -> Diagnostic {
    let valid = &bytes[..err.valid_up_to()];
    let text = std::str::from_utf8(valid).unwrap_or_default();
    let line = text.matches('\n').count() + 1;
    let col = text.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
    let pos = Pos {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        col: u32::try_from(col).unwrap_or(u32::MAX),
        offset: Some(err.valid_up_to()),
        len: Some(1),
    };
    Diagnostic::error(
        "encoding",
        "",
        pos,
        format!(
            "the manifest is not valid UTF-8 (byte 0x{:02x} at offset {})",
            bytes[err.valid_up_to()],
            err.valid_up_to()
        ),
    )
    .with_help("save the file as UTF-8")
}
