//! The model card (`README.md`): Hugging Face frontmatter, then the sections in the original's
//! order, then a provenance table. Pure: rendered from the spec and the `built` facts (the
//! tt-model version that packaged it, when, the tt-metal commit and whether its tree was dirty,
//! the `code/` digest, the `runtime.cargo` binary, the pinned base images).

use minijinja::context;
use tt_model_manifest::numfmt::group_thousands;
use tt_model_manifest::wire::Built;

use crate::error::PackageError;
use crate::spec::{CardSettings, PackageSpec};

const CARD_TEMPLATE: &str = include_str!("../../../templates/card.md.j2");

/// The local Python base `scripts/make-python-base.sh` makes (no registry): the card says
/// how an image built on it differs from one built on the original's bases.
pub const LOCAL_PYTHON_BASE: &str = "local/python:tt-model";

/// A YAML scalar: bare when unambiguous, else a double-quoted (JSON-compatible) string.
fn yaml_scalar(s: String) -> String {
    let flat = s.replace(['\n', '\r'], " ");
    let bare = !flat.is_empty()
        && flat
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !flat.starts_with(['-', '.'])
        && !matches!(
            flat.as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && flat.parse::<f64>().is_err();
    if bare {
        flat
    } else {
        serde_json::to_string(&flat).expect("strings serialize")
    }
}

/// A markdown table cell: no pipes or newlines may break the row.
fn cell(value: minijinja::Value) -> String {
    if value.is_none() || value.is_undefined() {
        return "—".into();
    }
    value
        .to_string()
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// A public commit link for an https or ssh remote, else `None`.
pub fn commit_link(remote: &str, sha: &str) -> Option<String> {
    let base = if let Some(rest) = remote.strip_prefix("git@") {
        let (host, path) = rest.split_once(':')?;
        format!("https://{host}/{path}")
    } else if remote.starts_with("https://") {
        remote.to_string()
    } else {
        return None;
    };
    Some(format!("{}/commit/{sha}", base.trim_end_matches(".git")))
}

/// Renders the card.
pub fn render_card(spec: &PackageSpec, built: &Built) -> Result<String, PackageError> {
    let card = spec.card.clone().unwrap_or_default();
    let mut env = crate::templates::base_environment();
    env.add_filter("yaml", yaml_scalar);
    env.add_filter("cell", cell);
    env.add_template("card", CARD_TEMPLATE)
        .map_err(|e| PackageError::Template {
            name: "card.md".into(),
            detail: format!("{e:#}"),
        })?;
    let mut tags = Vec::from([
        "tenstorrent".to_string(),
        spec.arch.clone(),
        spec.kind.as_str().to_string(),
        // The tags `tt` finds and classifies bundles by (as the original's card has them).
        PACKAGE_TAG.to_string(),
        CONTAINER_TAG.to_string(),
    ]);
    tags.extend(hardware_tags(spec));
    tags.sort();
    tags.dedup();
    let base_model = if card.base_model.is_empty() {
        vec![spec.weights.clone()]
    } else {
        card.base_model.clone()
    };
    let pipeline_tag = card
        .pipeline_tag
        .clone()
        .or_else(|| spec.kind.default_pipeline_tag().map(String::from));
    let s = &spec.serve;
    let hardware_sentence = if spec.profiles.len() > 1 {
        let boards: Vec<String> = spec
            .profiles
            .iter()
            .filter_map(|p| p.hardware.clone())
            .map(|h| format!("**{h}**"))
            .fold(Vec::new(), |mut seen: Vec<String>, b| {
                if !seen.contains(&b) {
                    seen.push(b);
                }
                seen
            });
        format!(
            "Runs on {} — see the serve profiles below.",
            boards.join(" or ")
        )
    } else {
        let mut text = match (&s.hardware, &s.mesh_device) {
            (Some(h), Some(m)) => format!("Runs on **{h}** (mesh `{m}`)"),
            (Some(h), None) => format!("Runs on **{h}**"),
            _ => "Runs on a Tenstorrent device".to_string(),
        };
        let mut extras = Vec::new();
        if let Some(n) = s.max_model_len {
            extras.push(format!("{}-token context", group_thousands(n)));
        }
        if let Some(n) = s.max_num_seqs {
            extras.push(format!("up to {n} concurrent sequences"));
        }
        if !extras.is_empty() {
            text.push_str(" — ");
            text.push_str(&extras.join(", "));
        }
        text.push('.');
        text
    };
    // `card.architecture` (how the model is built) when the author wrote it, else the chip's.
    let architecture = clean(&card)
        .architecture
        .unwrap_or_else(|| spec.arch.clone());
    let mut glance: Vec<(String, String)> = vec![("Architecture".into(), architecture)];
    if let Some(h) = &s.hardware {
        glance.push(("Hardware".into(), h.clone()));
    }
    if let Some(n) = spec
        .profiles
        .iter()
        .filter_map(|p| p.max_model_len)
        .max()
        .or(s.max_model_len)
    {
        glance.push(("Context".into(), format!("{} tokens", group_thousands(n))));
    }
    let license = card.license.as_ref();
    let license_id = license.map(|l| l.id.clone());
    let license_name = license.and_then(|l| l.name.clone());
    if let Some(l) = license_name.clone().or(license_id.clone()) {
        glance.push(("License".into(), l));
    }
    if let Some(st) = &card.status {
        glance.push(("Status".into(), st.clone()));
    }
    let metal = &built.tt_metal;
    let metal_provenance = match (&metal.sha, &metal.remote) {
        (Some(sha), Some(remote)) => match commit_link(remote, sha) {
            Some(link) => link,
            None => format!("a local checkout — commit {sha} not published"),
        },
        (Some(sha), None) => format!("a local checkout — commit {sha} not published"),
        _ => "a local tree without git metadata".to_string(),
    } + if metal.dirty {
        " (dirty tree — uncommitted changes were packaged)"
    } else {
        ""
    };
    let code_sha256 = built.code_sha256.as_deref().unwrap_or_default();
    let hex = code_sha256.trim_start_matches("sha256:");
    let ctx = context! {
        name => spec.name.clone(),
        repo => spec.repo.clone(),
        weights => spec.weights.clone(),
        tool_version => built.tt_model_version.clone(),
        created_at => built.created_at.clone(),
        tags => tags,
        license_id => license_id,
        license_name => license_name.as_deref().map(slug),
        license_link => license.and_then(|l| l.link.clone()),
        pipeline_tag => pipeline_tag,
        base_model => base_model,
        card => minijinja::value::Value::from(minijinja::value::Serde(clean(&card))),
        hardware_sentence => hardware_sentence,
        glance => glance,
        profiles => minijinja::value::Value::from(minijinja::value::Serde(&spec.profiles)),
        openai => spec.kind.openai_compatible(),
        ready_line => spec.runtime.ready_line(spec.kind).unwrap_or_else(|| NO_READY_LINE.into()),
        metal_provenance => metal_provenance,
        code_digest_short => &hex[..hex.len().min(16)],
        cargo => minijinja::value::Value::from(minijinja::value::Serde(&built.cargo)),
        base_images => built.base_images.clone(),
        local_python_base => built
            .base_images
            .values()
            .any(|b| b.starts_with(&format!("{LOCAL_PYTHON_BASE}@"))),
    };
    env.get_template("card")
        .and_then(|t| t.render(ctx))
        .map_err(|e| PackageError::Template {
            name: "card.md".into(),
            detail: format!("{e:#}"),
        })
}

/// Every bundle's tag, which `tt model search` and `tt-model search` filter on.
const PACKAGE_TAG: &str = "tt-model-cache";
/// A container bundle's tag (`tt` reads the kind from it).
const CONTAINER_TAG: &str = "tt-model-container";

/// Each profile's board label (else its mesh preset) as a tag, lowercased as `tt` matches it;
/// a literal mesh shape (`(1, 4)`) is no tag.
fn hardware_tags(spec: &PackageSpec) -> Vec<String> {
    let shared = spec
        .serve
        .hardware
        .as_ref()
        .or(spec.serve.mesh_device.as_ref());
    shared
        .into_iter()
        .chain(
            spec.profiles
                .iter()
                .filter_map(|p| p.hardware.as_ref().or(p.mesh.as_ref()).or(shared)),
        )
        .map(|l| l.trim().to_lowercase())
        .filter(|t| {
            !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
        .collect()
}

/// What the card says the server logs when ready if it names no ready line (an
/// `http-server` without `runtime.ready_line`; every other kind has its own).
const NO_READY_LINE: &str = "(its ready line)";

/// Trims folded-scalar trailing newlines; whitespace-only prose counts as absent.
fn clean(card: &CardSettings) -> CardSettings {
    let t = |v: &Option<String>| {
        v.as_ref()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    CardSettings {
        description: t(&card.description),
        quickstart: t(&card.quickstart),
        architecture: t(&card.architecture),
        status: t(&card.status),
        intended_use: t(&card.intended_use),
        out_of_scope_use: t(&card.out_of_scope_use),
        usage: t(&card.usage),
        performance: t(&card.performance),
        limitations: t(&card.limitations),
        risks: t(&card.risks),
        licensing: t(&card.licensing),
        related: t(&card.related),
        ..card.clone()
    }
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.trim().to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(slug("My Own License 2.0"), "my-own-license-2-0");
        assert_eq!(yaml_scalar("apache-2.0".into()), "apache-2.0");
        assert_eq!(yaml_scalar("yes".into()), "\"yes\"");
        assert_eq!(yaml_scalar("a: b\nc".into()), "\"a: b c\"");
        assert_eq!(
            commit_link("git@github.com:tenstorrent/tt-metal.git", "abc").as_deref(),
            Some("https://github.com/tenstorrent/tt-metal/commit/abc")
        );
        assert_eq!(commit_link("/local/path", "abc"), None);
    }
}
