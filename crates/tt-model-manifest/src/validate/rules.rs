//! The structural rules of schema 5.1 that the original enforces, with its messages.

use std::collections::BTreeSet;

use super::Checker;
use super::hardware::{
    HardwareError, hardware_expectation, mesh_preset_names, parse_hardware, parse_mesh,
};
use crate::diagnostic::suggest;
use crate::profile::merge_settings;
use crate::types::{CodeRoot, SCHEMA_VERSION, WeightsSource};

pub(super) fn schema(c: &mut Checker<'_>) {
    if c.m.schema != SCHEMA_VERSION {
        let got = c.m.schema.clone();
        c.error(
            "schema",
            "schema",
            format!("unsupported manifest schema '{got}'; this tt-model authors schema '{SCHEMA_VERSION}'"),
        )
        .help = Some("write `schema: \"5.1\"` (quoted, so YAML keeps 5.1 apart from 5.10)".to_owned());
    }
}

/// `org/name` with a non-empty, plain namespace and name.
pub(crate) fn is_namespaced(id: &str) -> bool {
    let ok = |part: &str| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    matches!(id.split_once('/'), Some((ns, name)) if ok(ns) && ok(name))
}

/// The name rule: `[a-z0-9][a-z0-9._-]*`.
pub(crate) fn is_slug(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

pub(super) fn repo_and_name(c: &mut Checker<'_>) {
    if !is_namespaced(&c.m.repo) {
        let repo = c.m.repo.clone();
        c.error(
            "repo",
            "repo",
            format!("repo must be a namespaced HF id (org/name), got '{repo}'"),
        );
    }
    if !is_slug(&c.m.name) {
        let name = c.m.name.clone();
        c.error(
            "name",
            "name",
            format!(
                "name '{name}' is not a safe slug — use lowercase letters, digits and '.'/'_'/'-', starting alphanumeric (it becomes a cache path + container name)."
            ),
        );
    }
}

fn weights_path(base: &str, w: &WeightsSource) -> String {
    match w {
        WeightsSource::Id(_) => base.to_owned(),
        WeightsSource::Spec(_) => format!("{base}.repo"),
    }
}

pub(super) fn weights(c: &mut Checker<'_>) {
    let mut all = vec![("weights".to_owned(), c.m.weights.clone())];
    all.extend(
        c.m.auxiliary_weights
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("auxiliary_weights[{i}]"), w.clone())),
    );
    let mut seen = BTreeSet::new();
    for (path, w) in &all {
        let at = weights_path(path, w);
        if !is_namespaced(w.repo()) {
            c.error(
                "weights",
                &at,
                format!(
                    "{path} must be a namespaced HF id (org/name), got '{}'",
                    w.repo()
                ),
            );
        }
        if !seen.insert(w.repo().to_owned()) {
            c.error(
                "duplicate-weights",
                &at,
                format!(
                    "duplicate weight repositories across weights/auxiliary_weights: ['{}']",
                    w.repo()
                ),
            );
        }
    }
}

pub(super) fn profiles(c: &mut Checker<'_>) {
    let names: Vec<String> = c.m.serve_profiles.iter().map(|p| p.name.clone()).collect();
    let mut seen = BTreeSet::new();
    let mut dups = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if !seen.insert(name.clone()) {
            dups.push((i, name.clone()));
        }
        if !is_slug(name) {
            c.error(
                "profile-name",
                &format!("serve_profiles[{i}].name"),
                format!("serve profile name '{name}' is not a safe slug (it becomes part of the container name)"),
            );
        }
    }
    for (i, name) in &dups {
        c.error(
            "duplicate-profile",
            &format!("serve_profiles[{i}].name"),
            format!("duplicate serve profile names: ['{name}']"),
        );
    }
    if names.len() > 1 && c.m.default_profile.is_none() {
        c.error(
            "default-profile",
            "serve_profiles",
            format!(
                "a manifest with multiple serve profiles must name a default_profile — the author decides the default, not the consumer's luck. Profiles: {}",
                quoted_list(&names)
            ),
        );
    }
    if let Some(default) = c.m.default_profile.clone() {
        let available = if names.is_empty() {
            vec!["default".to_owned()]
        } else {
            names.clone()
        };
        if !available.contains(&default) {
            let label = suggest(&default, available.iter().map(String::as_str))
                .map(|s| format!("did you mean `{s}`?"));
            let d = c.error(
                "default-profile",
                "default_profile",
                format!(
                    "default_profile '{default}' names no profile; available: {}",
                    quoted_list(&available)
                ),
            );
            d.label = label;
        }
    }
    let (root, m) = (c.root, c.m);
    for (i, profile) in m.profiles().iter().enumerate() {
        let declared = !m.serve_profiles.is_empty();
        let path = |field: &str| {
            // Point at the profile's own field when it sets it, else at `serve.<field>`.
            let own = format!("serve_profiles[{i}].{field}");
            if declared && root.locate(&own) != root.locate(&format!("serve_profiles[{i}]")) {
                own
            } else if root.get("serve").and_then(|s| s.get(field)).is_some() {
                format!("serve.{field}")
            } else if declared {
                format!("serve_profiles[{i}]")
            } else {
                "serve".to_owned()
            }
        };
        let eff = merge_settings(&c.m.serve, &profile.settings);
        let name = profile.name.clone();
        let mut required = vec!["hardware", "mesh_device"];
        if c.kind_known && c.m.kind.is_vllm() {
            required.extend(["max_num_seqs", "block_size"]);
        }
        for field in required {
            let present = match field {
                "hardware" => eff.hardware.is_some(),
                "mesh_device" => eff.mesh_device.is_some(),
                "max_num_seqs" => eff.max_num_seqs.is_some(),
                _ => eff.block_size.is_some(),
            };
            if !present {
                let hint = if matches!(field, "max_num_seqs" | "block_size") {
                    " The TT backend rejects vLLM's own default."
                } else {
                    ""
                };
                let at = path(field);
                let pos = c.pos(&at);
                // The path names the missing field (the position is its mapping's).
                let field_path = if at.ends_with(field) {
                    at.clone()
                } else {
                    format!("{at}.{field}")
                };
                let mut d = crate::Diagnostic::error(
                    "required-serve-field",
                    field_path,
                    pos,
                    format!(
                        "serve profile '{name}': {field} is required (set it on the profile or under serve:).{hint}"
                    ),
                );
                d.help = Some(format!(
                    "kind {} needs {}",
                    c.m.kind,
                    required_list(c.m.kind.is_vllm())
                ));
                c.out.push(d);
            }
        }
        let mesh = eff.mesh_device.as_deref().map(|m| (m, parse_mesh(m)));
        if let Some((text, None)) = mesh {
            let presets = mesh_preset_names();
            let label =
                suggest(text, presets.iter().copied()).map(|s| format!("did you mean `{s}`?"));
            let at = path("mesh_device");
            let d = c.error(
                "mesh-device",
                &at,
                format!(
                    "invalid mesh_device: '{text}'. Expected one of [{}] or a literal \"(rows, cols)\" tuple",
                    presets.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(", ")
                ),
            );
            d.label = label;
        }
        let hw = eff.hardware.as_deref().map(|h| (h, parse_hardware(h)));
        match hw {
            Some((text, Err(HardwareError::NotALabel { hint }))) => {
                let at = path("hardware");
                let extra = hint.map(|h| format!(" {h}.")).unwrap_or_default();
                c.error(
                    "hardware-label",
                    &at,
                    format!(
                        "serve profile '{name}': hardware '{text}' is not a recognised board label, so device_count and the mesh cross-check cannot be derived.{extra} {}",
                        hardware_expectation()
                    ),
                );
            }
            Some((text, Err(HardwareError::ZeroBoards))) => {
                let at = path("hardware");
                c.error(
                    "hardware-label",
                    &at,
                    format!("serve profile '{name}': hardware '{text}' names zero boards"),
                );
            }
            Some((text, Ok(h))) => {
                if let Some((mesh_text, Some((r, cols)))) = mesh
                    && r * cols != h.chips
                {
                    let at = path("mesh_device");
                    c.error(
                        "mesh-chips",
                        &at,
                        format!(
                            "serve profile '{name}': mesh_device '{mesh_text}' opens a {r}x{cols} mesh ({} chips) but hardware '{text}' implies {}",
                            r * cols,
                            h.chips
                        ),
                    );
                }
            }
            None => {}
        }
    }
}

fn required_list(vllm: bool) -> &'static str {
    if vllm {
        "hardware, mesh_device, max_num_seqs and block_size after the merge of serve: and the profile"
    } else {
        "hardware and mesh_device after the merge of serve: and the profile"
    }
}

fn quoted_list(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A path that must stay inside its root: relative, no `..`, not empty.
pub(crate) fn is_contained(path: &str) -> bool {
    let p = std::path::Path::new(path);
    !path.trim().is_empty()
        && !p.is_absolute()
        && !path.starts_with('~')
        && p.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

pub(super) fn source_shape(c: &mut Checker<'_>) {
    let src = &c.m.source;
    if src.code.is_empty() {
        c.error(
            "source-code",
            "source.code",
            "source.code must list at least one path (it is an allowlist of what enters the image)",
        );
    }
    let bad: Vec<(usize, String)> = src
        .code
        .iter()
        .enumerate()
        .filter(|(_, p)| !is_contained(p))
        .map(|(i, p)| (i, p.clone()))
        .collect();
    for (i, p) in bad {
        c.error(
            "source-path",
            &format!("source.code[{i}]"),
            format!("source.code paths must be relative to the tt-metal tree: '{p}'"),
        );
    }
    for (e, extra) in src.extra_code.clone().iter().enumerate() {
        if extra.paths.is_empty() {
            c.error(
                "source-code",
                &format!("source.extra_code[{e}].paths"),
                "source.extra_code paths must list at least one path",
            );
        }
        for (i, p) in extra.paths.iter().enumerate() {
            if !is_contained(p) {
                c.error(
                    "source-path",
                    &format!("source.extra_code[{e}].paths[{i}]"),
                    format!("source.extra_code paths must be relative to their root: '{p}'"),
                );
            }
        }
        if let CodeRoot::Path(root) = &extra.root
            && root.trim().is_empty()
        {
            c.error(
                "source-path",
                &format!("source.extra_code[{e}].root"),
                "source.extra_code root is empty",
            );
        }
    }
    if let CodeRoot::Path(root) = &src.tt_metal
        && root.trim().is_empty()
    {
        c.error("source-path", "source.tt_metal", "source.tt_metal is empty");
    }
    let python = src.python.clone();
    if !is_version(&python, 2) || !python.starts_with("3.") {
        c.error(
            "source-python",
            "source.python",
            format!("source.python '{python}' must be a Python version like \"3.12\""),
        );
    }
    let ubuntu = src.ubuntu.clone();
    if !is_version(&ubuntu, 2) {
        c.error(
            "source-ubuntu",
            "source.ubuntu",
            format!("source.ubuntu '{ubuntu}' must be an Ubuntu release like \"22.04\""),
        );
    }
}

/// `N.N` (with `parts` numeric parts).
fn is_version(text: &str, parts: usize) -> bool {
    let split: Vec<&str> = text.split('.').collect();
    split.len() == parts
        && split
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

pub(super) fn verify(c: &mut Checker<'_>) {
    let empty: Vec<usize> =
        c.m.verify
            .iter()
            .enumerate()
            .filter(|(_, v)| v.text().trim().is_empty())
            .map(|(i, _)| i)
            .collect();
    for i in empty {
        c.error(
            "verify",
            &format!("verify[{i}]"),
            "a verify entry is empty; write a Python statement or {sh: \"command\"}",
        );
    }
}

pub(super) fn card(c: &mut Checker<'_>) {
    let Some(license) = c.m.card.as_ref().and_then(|card| card.license.clone()) else {
        return;
    };
    let id_ok = license
        .id
        .chars()
        .next()
        .is_some_and(|ch| ch.is_ascii_alphanumeric())
        && license.id.chars().all(|ch| {
            ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '-' | '.' | '+')
        });
    if !id_ok {
        c.error(
            "card-license",
            "card.license.id",
            format!("card.license.id '{}' does not look like a Hub licence identifier", license.id),
        )
        .help = Some("use an identifier from https://hf.co/docs/hub/repositories-licenses (e.g. apache-2.0, mit, other)".to_owned());
    }
    if license.id == "other" && license.name.as_deref().is_none_or(|n| n.trim().is_empty()) {
        c.error(
            "card-license",
            "card.license",
            "card.license.id 'other' needs a card.license.name (and preferably a link)",
        );
    }
}
