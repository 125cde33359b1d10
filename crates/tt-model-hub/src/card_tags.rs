//! The Hub reads a repo's tags from its README's YAML frontmatter (`tags:` as a block list);
//! listing a package in the catalog means adding `tt-model-catalog` there, delisting means
//! removing it. These are pure edits of that one list: every other line of the card, the
//! frontmatter's other keys included, is kept byte for byte (the original mutates
//! `card.data.tags` in place for the same reason).

/// Every bundle carries this tag (the original's `TT_MODEL_TAG`).
pub const PACKAGE_TAG: &str = "tt-model-cache";
/// The catalog opt-in (the original's `TT_MODEL_CATALOG_TAG`).
pub const CATALOG_TAG: &str = "tt-model-catalog";

/// Every container package carries this tag (`tt` reads it as the bundle's kind).
pub const CONTAINER_TAG: &str = "tt-model-container";

/// A board/mesh label (`P150x4`, ` p150 `) as a repo tag: trimmed and lowercased, as the
/// original writes it and `tt` matches it; `None` for what cannot be a tag (a literal mesh
/// shape such as `(1, 4)`).
pub fn hardware_tag(label: &str) -> Option<String> {
    let t = label.trim().to_lowercase();
    let ok = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    ok.then_some(t)
}

/// The hardware tags of a package: each profile's `hardware` (else its `mesh_device`, else the
/// shared `serve`'s), as `tt` derives them from a pulled manifest. Sorted, no repeats.
pub fn hardware_tags(wire: &tt_model_manifest::WireManifest) -> Vec<String> {
    let serve = &wire.container.serve;
    let shared = serve.hardware.as_ref().or(serve.mesh_device.as_ref());
    let mut tags: Vec<String> = shared
        .into_iter()
        .chain(wire.container.serve_profiles.iter().filter_map(|p| {
            let s = &p.settings;
            s.hardware.as_ref().or(s.mesh_device.as_ref()).or(shared)
        }))
        .filter_map(|l| hardware_tag(l))
        .collect();
    tags.sort();
    tags.dedup();
    tags
}

/// The tags `push` makes sure the card carries, as the original's generated card has them:
/// the package tag, the container tag, the arch, the kind and every hardware tag. (`tt`
/// classifies a bundle by them: `tenstorrent/modelhub/bundles.py`.)
pub fn package_tags(wire: &tt_model_manifest::WireManifest) -> Vec<String> {
    let mut tags = vec![PACKAGE_TAG.to_string(), CONTAINER_TAG.to_string()];
    tags.extend(wire.arch.map(|a| a.as_str().to_string()));
    tags.push(wire.container.kind.as_str().to_string());
    tags.extend(hardware_tags(wire));
    tags
}

/// The frontmatter's line range `[open, close]` (the two `---` lines), if the text has one.
fn frontmatter(lines: &[&str]) -> Option<(usize, usize)> {
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return None;
    }
    let close = lines
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, l)| l.trim_end() == "---")?
        .0;
    Some((0, close))
}

/// A block-list item's value, unquoted (`- "a b"` → `a b`).
fn item_value(line: &str) -> Option<String> {
    let v = line.trim_start().strip_prefix('-')?.trim();
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        return serde_json::from_str::<String>(v).ok();
    }
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        return Some(v[1..v.len() - 1].replace("''", "'"));
    }
    Some(v.to_string())
}

/// Where the `tags:` key sits and where its block list ends (exclusive), inside the frontmatter.
fn tags_block(lines: &[&str], open: usize, close: usize) -> Option<(usize, usize)> {
    let key = (open + 1..close).find(|&i| lines[i].trim_end() == "tags:")?;
    let mut end = key + 1;
    while end < close && lines[end].trim_start().starts_with("- ") {
        end += 1;
    }
    Some((key, end))
}

/// The tags the card's frontmatter lists (none without frontmatter or a `tags:` block).
/// An inline list (`tags: [a, b]`) is read too.
pub fn tags(readme: &str) -> Vec<String> {
    let lines: Vec<&str> = readme.lines().collect();
    let Some((open, close)) = frontmatter(&lines) else {
        return vec![];
    };
    if let Some((key, end)) = tags_block(&lines, open, close) {
        return lines[key + 1..end]
            .iter()
            .filter_map(|l| item_value(l))
            .collect();
    }
    for l in &lines[open + 1..close] {
        if let Some(inline) = l.trim_end().strip_prefix("tags:") {
            let inline = inline.trim();
            if let Some(body) = inline.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
                return body
                    .split(',')
                    .map(|t| t.trim().trim_matches(['"', '\'']).to_string())
                    .filter(|t| !t.is_empty())
                    .collect();
            }
        }
    }
    vec![]
}

/// The card with `tag` present (`on`) or absent. Other lines are untouched; a card without
/// frontmatter gets one holding only the tags; a missing `tags:` block is added as the
/// frontmatter's first key.
pub fn with_tag(readme: &str, tag: &str, on: bool) -> String {
    let mut current = tags(readme);
    let has = current.iter().any(|t| t == tag);
    if has == on {
        return readme.to_string();
    }
    if on {
        current.push(tag.to_string());
        current.sort();
    } else {
        current.retain(|t| t != tag);
    }
    let block: Vec<String> = if current.is_empty() {
        vec![]
    } else {
        std::iter::once("tags:".to_string())
            .chain(current.iter().map(|t| format!("- {t}")))
            .collect()
    };
    let trailing_newline = readme.ends_with('\n');
    let lines: Vec<&str> = readme.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + 2);
    match frontmatter(&lines) {
        None => {
            out.push("---".into());
            out.extend(block);
            out.push("---".into());
            out.extend(lines.iter().map(|l| l.to_string()));
        }
        Some((open, close)) => {
            let (start, end) = match tags_block(&lines, open, close) {
                Some(range) => range,
                None => {
                    // An inline `tags: [...]` line is replaced; otherwise insert after `---`.
                    match (open + 1..close).find(|&i| lines[i].starts_with("tags:")) {
                        Some(i) => (i, i + 1),
                        None => (open + 1, open + 1),
                    }
                }
            };
            out.extend(lines[..start].iter().map(|l| l.to_string()));
            out.extend(block);
            out.extend(lines[end..].iter().map(|l| l.to_string()));
        }
    }
    let mut text = out.join("\n");
    if trailing_newline {
        text.push('\n');
    }
    text
}

/// Points the card's Quickstart command lines (`tt-model pull <id>`, `tt-model serve <id>`, and
/// the `tt` CLI's `tt model pull` / `tt serve`) at `repo`: a package pushed with `--repo` must
/// not tell its readers to pull the repo it was built for.
pub fn repoint_quickstart(readme: &str, repo: &str) -> String {
    const COMMANDS: &[&str] = &[
        "tt model pull ",
        "tt serve ",
        "tt-model pull ",
        "tt-model serve ",
    ];
    let trailing_newline = readme.ends_with('\n');
    let mut out: Vec<String> = Vec::new();
    for line in readme.lines() {
        let mut line = line.to_string();
        for cmd in COMMANDS {
            if let Some(at) = line.find(cmd) {
                let start = at + cmd.len();
                let rest = &line[start..];
                let lead = rest.len() - rest.trim_start().len();
                let id_start = start + lead;
                let id_len = line[id_start..]
                    .find(|c: char| c.is_whitespace() || c == '`')
                    .unwrap_or(line.len() - id_start);
                let id = &line[id_start..id_start + id_len];
                if id.contains('/') && !id.starts_with('-') {
                    line.replace_range(id_start..id_start + id_len, repo);
                }
            }
        }
        out.push(line);
    }
    let mut text = out.join("\n");
    if trailing_newline {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARD: &str = "---\ntags:\n- http-server\n- \"p150\"\nlicense: apache-2.0\n---\n\n# x\n\ntt-model pull acme/x --with-weights\n";

    #[test]
    fn reads_block_and_inline_tags() {
        assert_eq!(tags(CARD), ["http-server", "p150"]);
        assert_eq!(tags("---\ntags: [a, \"b\"]\n---\n"), ["a", "b"]);
        assert!(tags("# no frontmatter\n").is_empty());
    }

    #[test]
    fn adds_and_removes_one_tag_keeping_everything_else() {
        let listed = with_tag(CARD, CATALOG_TAG, true);
        assert_eq!(tags(&listed), ["http-server", "p150", CATALOG_TAG]);
        assert!(listed.contains("license: apache-2.0\n---\n\n# x\n"));
        assert_eq!(with_tag(&listed, CATALOG_TAG, true), listed);
        let delisted = with_tag(&listed, CATALOG_TAG, false);
        assert_eq!(tags(&delisted), ["http-server", "p150"]);
        assert!(delisted.ends_with("tt-model pull acme/x --with-weights\n"));
        let bare = with_tag("# x\n", CATALOG_TAG, true);
        assert_eq!(bare, "---\ntags:\n- tt-model-catalog\n---\n# x\n");
        let only = with_tag(
            "---\ntags:\n- tt-model-catalog\nlicense: mit\n---\n",
            CATALOG_TAG,
            false,
        );
        assert_eq!(only, "---\nlicense: mit\n---\n");
        let no_tags = with_tag("---\nlicense: mit\n---\nbody\n", CATALOG_TAG, true);
        assert_eq!(tags(&no_tags), [CATALOG_TAG]);
        assert!(no_tags.contains("license: mit"));
    }

    #[test]
    fn hardware_tags_come_from_every_profile_lowercased() {
        let doc = serde_json::json!({"schema_version": "5.1", "name": "m", "arch": "blackhole",
            "container": {"kind": "vllm-plugin",
                "image": {"registry": "hf", "repository": "m"},
                "serve": {"hardware": "P150x4"},
                "serve_profiles": [
                    {"name": "a"},
                    {"name": "b", "hardware": "p150"},
                    {"name": "c", "mesh_device": "P300x2"},
                    {"name": "d", "hardware": "(1, 4)"}]}});
        let wire = tt_model_manifest::WireManifest::from_json(&doc.to_string()).unwrap();
        assert_eq!(hardware_tags(&wire), ["p150", "p150x4", "p300x2"]);
        assert_eq!(
            package_tags(&wire),
            [
                PACKAGE_TAG,
                CONTAINER_TAG,
                "blackhole",
                "vllm-plugin",
                "p150",
                "p150x4",
                "p300x2"
            ]
        );
    }

    #[test]
    fn quickstart_points_at_the_pushed_repo() {
        let text = "```\ntt-model pull acme/x --with-weights\ntt-model serve acme/x\n```\n`tt serve acme/x`\nnot tt-model serve --help\n";
        let out = repoint_quickstart(text, "me/y");
        assert_eq!(
            out,
            "```\ntt-model pull me/y --with-weights\ntt-model serve me/y\n```\n`tt serve me/y`\nnot tt-model serve --help\n"
        );
    }
}
