//! A Tenstorrent review recorded on a reviewed copy's card (`whitelist`): four frontmatter keys
//! that `tt` reads (it hides a community package from its listing once a `Tenstorrent/` copy
//! names it as the source, so the key names are a contract), and an attribution block that
//! opens the card body, crediting the community author first. Re-recording replaces the block
//! instead of stacking a second one. Pure text in, text out.

/// The community package the copy was made from (`org/name`).
pub const SOURCE_KEY: &str = "tt_whitelist_source";
/// The source's commit that was reviewed.
pub const REVISION_KEY: &str = "tt_whitelist_revision";
/// Who reviewed it (the Hub account).
pub const REVIEWER_KEY: &str = "tt_reviewed_by";
/// When (ISO-8601 UTC).
pub const DATE_KEY: &str = "tt_reviewed_at";
/// The organisation reviewed copies live in.
pub const ORG: &str = "Tenstorrent";
/// The HTML comment bracketing the attribution block (renders as nothing on the Hub).
pub const ATTRIBUTION_MARKER: &str = "tt-whitelist-attribution";

/// What a review records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// The community package, `org/name`.
    pub source: String,
    /// Its reviewed commit (`None`: the Hub reported none).
    pub revision: Option<String>,
    /// The reviewer's Hub account.
    pub reviewer: String,
    /// When, ISO-8601 UTC.
    pub reviewed_at: String,
}

/// `(first line after the opening ---, index of the closing ---)` of a frontmatter block.
fn frontmatter(lines: &[&str]) -> Option<(usize, usize)> {
    if lines.first()?.trim_end() != "---" {
        return None;
    }
    let close = (1..lines.len()).find(|&i| lines[i].trim_end() == "---")?;
    Some((1, close))
}

/// The value of a top-level frontmatter `key` (quotes removed; `null` and `~` are none).
pub fn frontmatter_value(readme: &str, key: &str) -> Option<String> {
    let lines: Vec<&str> = readme.lines().collect();
    let (start, close) = frontmatter(&lines)?;
    let prefix = format!("{key}:");
    let raw = lines[start..close]
        .iter()
        .find_map(|l| l.strip_prefix(&prefix))?
        .trim();
    match raw {
        "" | "null" | "~" => None,
        v if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') => {
            serde_json::from_str::<String>(v).ok()
        }
        v if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') => {
            Some(v[1..v.len() - 1].replace("''", "'"))
        }
        v => Some(v.to_owned()),
    }
}

/// The review a copy's card records (`None`: no source recorded).
pub fn read(readme: &str) -> Option<Review> {
    Some(Review {
        source: frontmatter_value(readme, SOURCE_KEY)?,
        revision: frontmatter_value(readme, REVISION_KEY),
        reviewer: frontmatter_value(readme, REVIEWER_KEY).unwrap_or_default(),
        reviewed_at: frontmatter_value(readme, DATE_KEY).unwrap_or_default(),
    })
}

/// The credit that opens the copy's card: the community author, then the review.
pub fn attribution(r: &Review) -> String {
    let owner = r.source.split('/').next().unwrap_or(&r.source);
    let (at, snapshot) = match &r.revision {
        Some(rev) => (
            format!(" at `{}`", &rev[..rev.len().min(9)]),
            "a snapshot of that revision",
        ),
        None => (String::new(), "a point-in-time snapshot"),
    };
    let day = &r.reviewed_at[..r.reviewed_at.len().min(10)];
    format!(
        "<!-- {m} -->\n> **Published by [{owner}](https://huggingface.co/{owner})** as [`{src}`](https://huggingface.co/{src}).\n> Tenstorrent reviewed it{at} ({who}, {day}) and copied it here. This is {snapshot} — later commits to the original are not covered by this review.\n<!-- /{m} -->\n\n",
        m = ATTRIBUTION_MARKER,
        src = r.source,
        who = r.reviewer,
    )
}

/// `readme` with the review recorded: the four keys set in the frontmatter (added after the
/// other keys, replaced where present; a card without frontmatter gets one), and the
/// attribution block first in the body, replacing an earlier one.
pub fn annotate(readme: &str, r: &Review) -> String {
    let lines: Vec<&str> = readme.lines().collect();
    let (mut front, body): (Vec<String>, Vec<&str>) = match frontmatter(&lines) {
        Some((start, close)) => (
            lines[start..close].iter().map(|l| l.to_string()).collect(),
            lines[close + 1..].to_vec(),
        ),
        None => (Vec::new(), lines.clone()),
    };
    let quote = |v: &str| serde_json::to_string(v).unwrap_or_default();
    let values = [
        (SOURCE_KEY, quote(&r.source)),
        (
            REVISION_KEY,
            r.revision.as_deref().map_or("null".to_owned(), quote),
        ),
        (REVIEWER_KEY, quote(&r.reviewer)),
        (DATE_KEY, quote(&r.reviewed_at)),
    ];
    for (key, value) in values {
        let line = format!("{key}: {value}");
        match front.iter_mut().find(|l| l.starts_with(&format!("{key}:"))) {
            Some(slot) => *slot = line,
            None => front.push(line),
        }
    }
    let body = strip_attribution(&body.join("\n"));
    let mut out = String::from("---\n");
    for l in &front {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str("---\n");
    out.push_str(&attribution(r));
    out.push_str(body.trim_start());
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The body without an earlier attribution block (and the blank lines after it).
fn strip_attribution(body: &str) -> String {
    let open = format!("<!-- {ATTRIBUTION_MARKER} -->");
    let close = format!("<!-- /{ATTRIBUTION_MARKER} -->");
    match (body.find(&open), body.find(&close)) {
        (Some(a), Some(b)) if b > a => {
            let after = body[b + close.len()..].trim_start();
            format!("{}{after}", &body[..a])
        }
        _ => body.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(rev: Option<&str>) -> Review {
        Review {
            source: "alice/gr00t".into(),
            revision: rev.map(str::to_owned),
            reviewer: "bob".into(),
            reviewed_at: "2026-12-03T04:05:06Z".into(),
        }
    }

    #[test]
    fn a_review_is_recorded_once_and_read_back() {
        let card = "---\nlicense: apache-2.0\ntags:\n- tt-model-cache\n---\n# GR00T\n\nText.\n";
        let once = annotate(card, &review(Some("0123456789abcdef")));
        assert!(once.starts_with("---\nlicense: apache-2.0\ntags:\n- tt-model-cache\ntt_whitelist_source: \"alice/gr00t\"\ntt_whitelist_revision: \"0123456789abcdef\"\ntt_reviewed_by: \"bob\"\ntt_reviewed_at: \"2026-12-03T04:05:06Z\"\n---\n<!-- tt-whitelist-attribution -->\n> **Published by [alice]"), "{once}");
        assert!(
            once.contains("reviewed it at `012345678` (bob, 2026-12-03)"),
            "{once}"
        );
        assert!(
            once.ends_with("<!-- /tt-whitelist-attribution -->\n\n# GR00T\n\nText.\n"),
            "{once}"
        );
        let twice = annotate(&once, &review(None));
        assert_eq!(
            twice.matches(ATTRIBUTION_MARKER).count(),
            2,
            "one block: {twice}"
        );
        assert!(twice.contains("tt_whitelist_revision: null"), "{twice}");
        assert!(twice.contains("a point-in-time snapshot"), "{twice}");
        assert_eq!(read(&twice), Some(review(None)));
        assert_eq!(read(card), None);
        let bare = annotate("# no frontmatter\n", &review(None));
        assert_eq!(
            frontmatter_value(&bare, SOURCE_KEY).as_deref(),
            Some("alice/gr00t")
        );
    }
}
