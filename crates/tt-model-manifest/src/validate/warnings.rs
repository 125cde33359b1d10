//! Warnings: the manifest works, but something is probably wrong or a later step will refuse
//! it.

use super::Checker;
use super::hardware::parse_mesh;
use super::runtime::DEFAULT_MESH_SHAPE_ENV;
use crate::profile::merge_settings;
use crate::types::{Kind, KindRuntime, RuntimeSpec, TtDitServerRuntime, WeightsSource};

/// A full 40-hex commit sha.
pub(crate) fn is_commit(rev: &str) -> bool {
    rev.len() == 40
        && rev
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

/// Env names that restate the weights revision.
const REVISION_ENVS: &[&str] = &[
    "TT_WEIGHTS_REVISION",
    "TT_MODEL_WEIGHTS_REVISION",
    "HF_REVISION",
];

pub(super) fn check(c: &mut Checker<'_>) {
    revisions(c);
    env_contradictions(c);
    card_gaps(c);
}

fn revisions(c: &mut Checker<'_>) {
    let mut all = vec![("weights".to_owned(), c.m.weights.clone())];
    all.extend(
        c.m.auxiliary_weights
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("auxiliary_weights[{i}]"), w.clone())),
    );
    for (path, w) in all {
        match &w {
            WeightsSource::Id(id) => {
                c.warning(
                    "unpinned-weights",
                    &path,
                    format!("{path} '{id}' follows the default branch; the files served can change under you"),
                )
                .help = Some("pin it: {repo: ..., revision: <40-hex commit>}".to_owned());
            }
            WeightsSource::Spec(spec) => match spec.revision.as_deref() {
                None => {
                    c.warning(
                        "unpinned-weights",
                        &format!("{path}.repo"),
                        format!("{path} has no revision; the files served can change under you"),
                    )
                    .help = Some("add `revision: <40-hex commit>`".to_owned());
                }
                Some(rev) if is_placeholder(rev) => {
                    c.warning(
                        "unpinned-weights",
                        &format!("{path}.revision"),
                        format!("{path}.revision '{rev}' is a placeholder, not a revision; the Hub will not resolve it until it is filled in"),
                    )
                    .help = Some("replace it with the 40-hex commit sha the model was validated with".to_owned());
                }
                Some(rev) if !is_commit(rev) => {
                    c.warning(
                        "unpinned-weights",
                        &format!("{path}.revision"),
                        format!("{path}.revision '{rev}' is not a 40-hex commit; a branch or tag can move"),
                    )
                    .help = Some("pin the commit sha the model was validated with".to_owned());
                }
                Some(_) => {}
            },
        }
    }
}

/// A template's stand-in left unfilled (`<sha>`, `{commit}`, `${REV}`, `TODO`, `xxxx`):
/// no branch or tag name looks like this.
pub(crate) fn is_placeholder(rev: &str) -> bool {
    let r = rev.trim();
    r.is_empty()
        || r.contains(['<', '>', '{', '}', '$'])
        || r.contains("...")
        || ["todo", "fixme", "tbd"].contains(&r.to_ascii_lowercase().as_str())
        || r.chars().all(|ch| ch == 'x' || ch == 'X')
}

fn env_contradictions(c: &mut Checker<'_>) {
    let weights_rev = c.m.weights.revision().map(str::to_owned);
    let weights_repo = c.m.weights.repo().to_owned();
    let mut places = vec![("serve".to_owned(), c.m.serve.clone())];
    for (i, p) in c.m.serve_profiles.iter().enumerate() {
        places.push((
            format!("serve_profiles[{i}]"),
            merge_settings(&c.m.serve, &p.settings),
        ));
    }
    let kind = c.m.kind;
    let shape_env = match c.m.runtime_spec() {
        Ok(RuntimeSpec {
            kind:
                KindRuntime::TtDitServer(TtDitServerRuntime {
                    mesh_shape_env: Some(env),
                    ..
                }),
            ..
        }) => env,
        _ => DEFAULT_MESH_SHAPE_ENV.to_owned(),
    };
    let mut seen = std::collections::BTreeSet::new();
    for (base, settings) in places {
        for (key, value) in &settings.env {
            // A profile inherits serve.env: report each authored line once.
            let own = format!("{base}.env.{key}");
            let path = if c.root.locate(&own).pos == c.root.locate(&format!("{base}.env")).pos
                && base != "serve"
            {
                format!("serve.env.{key}")
            } else {
                own
            };
            let problem = if REVISION_ENVS.contains(&key.as_str()) {
                match &weights_rev {
                    Some(rev) if rev != value => Some(format!(
                        "serve.env {key}='{value}' contradicts weights.revision '{rev}'"
                    )),
                    None => Some(format!(
                        "serve.env {key}='{value}' pins a revision but weights has none"
                    )),
                    _ => None,
                }
            } else if key == "HF_MODEL" && value != &weights_repo {
                Some(format!(
                    "serve.env HF_MODEL='{value}' contradicts weights '{weights_repo}'"
                ))
            } else if key == "MESH_DEVICE"
                && settings.mesh_device.as_deref().is_some_and(|m| m != value)
            {
                Some(format!(
                    "serve.env MESH_DEVICE='{value}' contradicts mesh_device '{}'",
                    settings.mesh_device.as_deref().unwrap_or_default()
                ))
            } else if kind == Kind::TtDitServer && *key == shape_env {
                let declared = settings.mesh_device.as_deref().and_then(parse_mesh);
                let given = parse_shape(value);
                match (declared, given) {
                    (Some(d), Some(g)) if d != g => Some(format!(
                        "serve.env {key}='{value}' is a {}x{} mesh but mesh_device '{}' is {}x{}",
                        g.0,
                        g.1,
                        settings.mesh_device.as_deref().unwrap_or_default(),
                        d.0,
                        d.1
                    )),
                    _ => None,
                }
            } else {
                None
            };
            if let Some(message) = problem
                && seen.insert((path.clone(), message.clone()))
            {
                c.warning("env-contradiction", &path, message).help =
                    Some("tt-model sets this from the manifest; drop the env entry or make the two agree".to_owned());
            }
        }
    }
}

/// `2x2`, `(2, 2)` or `2,2`.
fn parse_shape(text: &str) -> Option<(u32, u32)> {
    let t = text.trim();
    if let Some((r, c)) = t.split_once(['x', 'X']) {
        return Some((r.trim().parse().ok()?, c.trim().parse().ok()?));
    }
    parse_mesh(t)
}

fn card_gaps(c: &mut Checker<'_>) {
    let Some(card) = &c.m.card else { return };
    let gaps = card.publish_gaps();
    if !gaps.is_empty() {
        c.warning(
            "card-gaps",
            "card",
            format!(
                "card has no {} section; a publish would be refused",
                gaps.join(" or ")
            ),
        )
        .help = Some(format!(
            "add card.{} (whitespace counts as missing)",
            gaps.join(" and card.")
        ));
    }
}
