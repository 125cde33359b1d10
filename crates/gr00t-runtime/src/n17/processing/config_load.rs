//! Reading the three processor files of a checkpoint into an [`EmbodimentConfig`]: N1.6's
//! `processor_kwargs` shape with N1.7's action configs and `Gr00tN1d7Processor.__init__`'s
//! defaults, the statistics lookups, and every decision the reference makes from them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::processor::{KwargsDefaults, ProcessorClass, ProcessorFile};

use super::config::{
    ActionFormat, ActionGroup, ActionKind, ActionNorm, ActionRep, ConfigError, EmbodimentConfig,
    ImageTransform, Relative, StateEncoding, StateGroup, read_json,
};

fn field_err(path: &Path, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        path: path.into(),
        field: field.into(),
        message: message.into(),
    }
}

/// `Gr00tN1d7Processor`: its `__init__` defaults for keys an older checkpoint did not write.
struct N17Processor;

impl ProcessorClass for N17Processor {
    const DEFAULTS: KwargsDefaults = KwargsDefaults {
        formalize_language: true,
        use_albumentations: false,
        max_dim: Some(29),
        max_action_horizon: Some(40),
    };
}

/// An action config as N1.7 writes it (with a format).
#[derive(Deserialize)]
struct RawActionConfig {
    rep: String,
    #[serde(rename = "type")]
    kind: String,
    format: String,
    #[serde(default)]
    state_key: Option<String>,
}

/// Picks one of `min`/`max`/`mean`/`std`/`q01`/`q99` of a statistics entry as `[rows][dim]`.
fn stat(
    entry: &Value,
    which: &str,
    path: &Path,
    field: &str,
) -> Result<Vec<Vec<f64>>, ConfigError> {
    let field = format!("{field}.{which}");
    let v = entry
        .get(which)
        .ok_or_else(|| field_err(path, &field, "missing"))?;
    let row = |v: &Value| -> Option<Vec<f64>> { v.as_array()?.iter().map(Value::as_f64).collect() };
    let rows = match v.as_array() {
        Some(a) if a.iter().all(Value::is_number) => row(v).map(|r| vec![r]),
        Some(a) => a.iter().map(row).collect(),
        None => None,
    };
    match rows {
        Some(r) if !r.is_empty() && r.iter().all(|x| !x.is_empty() && x.len() == r[0].len()) => {
            Ok(r)
        }
        _ => Err(field_err(
            path,
            field,
            "must be a non-empty list of numbers or a list of equal-length lists",
        )),
    }
}

/// `stat` that must be one row of `dim` values (state and absolute action statistics).
fn stat_1d(
    entry: &Value,
    which: &str,
    dim: Option<usize>,
    path: &Path,
    field: &str,
) -> Result<Vec<f64>, ConfigError> {
    let mut r = stat(entry, which, path, field)?;
    let f = format!("{field}.{which}");
    if r.len() != 1 {
        return Err(field_err(path, f, "must be a 1-D list"));
    }
    let r = r.remove(0);
    if let Some(d) = dim
        && r.len() != d
    {
        return Err(field_err(
            path,
            f,
            format!("has {} values, expected {d}", r.len()),
        ));
    }
    Ok(r)
}

fn parse_enum<T: Copy>(
    s: &str,
    options: &[(&str, T)],
    path: &Path,
    field: String,
) -> Result<T, ConfigError> {
    options
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            field_err(
                path,
                field,
                format!("`{s}` is not one of {}", names.join(", ")),
            )
        })
}

/// [`EmbodimentConfig::load`].
pub(super) fn load(dir: &Path, tag: &str) -> Result<EmbodimentConfig, ConfigError> {
    let pc_path = dir.join("processor_config.json");
    let st_path = dir.join("statistics.json");
    let id_path = dir.join("embodiment_id.json");
    let pc: ProcessorFile<RawActionConfig, N17Processor> = read_json(&pc_path)?;
    let stats: Value = read_json(&st_path)?;
    let ids: BTreeMap<String, Value> = read_json(&id_path)?;
    let k = pc.processor_kwargs;
    let pc_field = |f: &str| format!("processor_kwargs.{f}");
    let mod_field = |m: &str| format!("processor_kwargs.modality_configs.{tag}.{m}");

    let mods = k.modality_configs.get(tag).ok_or_else(|| {
        let has: Vec<&str> = k.modality_configs.keys().map(String::as_str).collect();
        field_err(
            &pc_path,
            pc_field("modality_configs"),
            format!("no embodiment `{tag}` (has: {})", has.join(", ")),
        )
    })?;
    let get_mod = |m: &str| {
        mods.get(m)
            .ok_or_else(|| field_err(&pc_path, mod_field(m), "missing"))
    };
    let (video, state, action, language) = (
        get_mod("video")?,
        get_mod("state")?,
        get_mod("action")?,
        get_mod("language")?,
    );
    for (m, c) in [("video", video), ("state", state), ("action", action)] {
        if c.modality_keys.is_empty() || c.delta_indices.is_empty() {
            return Err(field_err(
                &pc_path,
                mod_field(m),
                "modality_keys and delta_indices must be non-empty",
            ));
        }
    }
    let language_key = language
        .modality_keys
        .first()
        .cloned()
        .ok_or_else(|| field_err(&pc_path, mod_field("language.modality_keys"), "is empty"))?;

    let embodiment_id = ids
        .get(tag)
        .and_then(Value::as_u64)
        .ok_or_else(|| field_err(&id_path, tag, "missing or not a non-negative integer"))?
        as usize;

    if !k.use_albumentations {
        // The torchvision chain (antialiased bilinear `Resize`) is not implemented.
        return Err(field_err(
            &pc_path,
            pc_field("use_albumentations"),
            "only the albumentations eval transform (true) is supported",
        ));
    }
    let target0 = k
        .image_target_size
        .as_ref()
        .and_then(|v| v.first().copied());
    let max_size = k.shortest_image_edge.or(target0).ok_or_else(|| {
        field_err(
            &pc_path,
            pc_field("image_target_size"),
            "needed when shortest_image_edge is null",
        )
    })?;
    let crop_fraction = match (k.crop_fraction, &k.image_crop_size, target0) {
        (Some(f), _, _) => f,
        (None, Some(c), Some(t)) if !c.is_empty() && t > 0 => c[0] as f64 / t as f64,
        _ => {
            return Err(field_err(
                &pc_path,
                pc_field("image_crop_size"),
                "image_crop_size and image_target_size are needed when crop_fraction is null",
            ));
        }
    };
    if max_size == 0 || !(crop_fraction > 0.0 && crop_fraction <= 1.0) {
        return Err(field_err(
            &pc_path,
            pc_field("crop_fraction"),
            format!("need max size > 0 and 0 < fraction <= 1 (got {max_size}, {crop_fraction})"),
        ));
    }

    let st_emb = stats
        .get(tag)
        .ok_or_else(|| field_err(&st_path, tag, "missing"))?;
    let group_stats = |modality: &str, g: &str| {
        st_emb
            .get(modality)
            .and_then(|m| m.get(g))
            .ok_or_else(|| field_err(&st_path, format!("{tag}.{modality}.{g}"), "missing"))
    };
    let (lo_key, hi_key) = if k.use_percentiles {
        ("q01", "q99")
    } else {
        ("min", "max")
    };

    let sincos = state.sin_cos_embedding_keys.clone().unwrap_or_default();
    let meanstd = state.mean_std_embedding_keys.clone().unwrap_or_default();
    let mut state_groups = Vec::new();
    for g in &state.modality_keys {
        let e = group_stats("state", g)?;
        let f = format!("{tag}.state.{g}");
        let lo = stat_1d(e, lo_key, None, &st_path, &f)?;
        let dim = lo.len();
        let encoding = if k.apply_sincos_state_encoding && sincos.contains(g) {
            StateEncoding::SinCos
        } else if meanstd.contains(g) {
            StateEncoding::MeanStd {
                mean: stat_1d(e, "mean", Some(dim), &st_path, &f)?,
                std: stat_1d(e, "std", Some(dim), &st_path, &f)?,
            }
        } else {
            StateEncoding::MinMax {
                lo,
                hi: stat_1d(e, hi_key, Some(dim), &st_path, &f)?,
                clip: k.clip_outliers,
            }
        };
        state_groups.push(StateGroup {
            name: g.clone(),
            dim,
            encoding,
        });
    }

    let horizon = action.delta_indices.len();
    let configs = action.action_configs.as_deref().unwrap_or(&[]);
    if action.action_configs.is_some() && configs.len() != action.modality_keys.len() {
        return Err(field_err(
            &pc_path,
            mod_field("action.action_configs"),
            format!(
                "{} entries for {} action groups",
                configs.len(),
                action.modality_keys.len()
            ),
        ));
    }
    let action_meanstd = action.mean_std_embedding_keys.clone().unwrap_or_default();
    let mut action_groups = Vec::new();
    for (i, g) in action.modality_keys.iter().enumerate() {
        let f = format!("{tag}.action.{g}");
        let abs = group_stats("action", g)?;
        // The reference takes the width from the absolute statistics, also for relative
        // groups (`norm_params[...]["dim"]` is kept when the relative ones replace them).
        let dim = stat_1d(abs, lo_key, None, &st_path, &f)?.len();
        let cfg_field = |x: &str| mod_field(&format!("action.action_configs[{i}].{x}"));
        let parsed = match configs.get(i) {
            None => None,
            Some(c) => Some((
                parse_enum(
                    &c.rep,
                    &[
                        ("RELATIVE", ActionRep::Relative),
                        ("DELTA", ActionRep::Delta),
                        ("ABSOLUTE", ActionRep::Absolute),
                    ],
                    &pc_path,
                    cfg_field("rep"),
                )?,
                parse_enum(
                    &c.kind,
                    &[("EEF", ActionKind::Eef), ("NON_EEF", ActionKind::NonEef)],
                    &pc_path,
                    cfg_field("type"),
                )?,
                parse_enum(
                    &c.format,
                    &[
                        ("DEFAULT", ActionFormat::Default),
                        ("XYZ_ROT6D", ActionFormat::XyzRot6d),
                        ("XYZ_ROTVEC", ActionFormat::XyzRotvec),
                    ],
                    &pc_path,
                    cfg_field("format"),
                )?,
                c.state_key.clone().unwrap_or_else(|| g.clone()),
            )),
        };
        let relative = match parsed {
            Some((ActionRep::Relative, kind, format, state_key)) if k.use_relative_action => {
                let sg = state_groups
                    .iter()
                    .find(|s| s.name == state_key)
                    .ok_or_else(|| {
                        field_err(
                            &pc_path,
                            cfg_field("state_key"),
                            format!("`{state_key}` is not a state group"),
                        )
                    })?;
                let need = match (kind, format) {
                    (ActionKind::NonEef, ActionFormat::Default) => dim,
                    (ActionKind::Eef, ActionFormat::XyzRot6d) => 9,
                    (ActionKind::Eef, ActionFormat::XyzRotvec) => 6,
                    _ => {
                        return Err(field_err(
                            &pc_path,
                            cfg_field("format"),
                            format!("relative {kind:?} actions in {format:?} are not supported"),
                        ));
                    }
                };
                if dim != need || sg.dim != need {
                    return Err(field_err(
                        &pc_path,
                        cfg_field("state_key"),
                        format!(
                            "action `{g}` has {dim} values and state `{state_key}` {}, \
                             {format:?} needs {need} for both",
                            sg.dim
                        ),
                    ));
                }
                Some(Relative {
                    state_key,
                    kind,
                    format,
                })
            }
            _ => None,
        };
        // Relative groups are un-normalised with their per-step `relative_action`
        // statistics, and by `min`/`max` even with `use_percentiles` (the reference swaps
        // the whole parameter dict).
        let (entry, lo_k, hi_k, ef) = if relative.is_some() {
            let r = group_stats("relative_action", g)?;
            (r, "min", "max", format!("{tag}.relative_action.{g}"))
        } else {
            (abs, lo_key, hi_key, f.clone())
        };
        let check = |rows: Vec<Vec<f64>>, which: &str| {
            if (rows.len() == 1 || rows.len() == horizon) && rows[0].len() == dim {
                Ok(rows)
            } else {
                Err(field_err(
                    &st_path,
                    format!("{ef}.{which}"),
                    format!(
                        "is [{}][{}], expected [1 or {horizon}][{dim}]",
                        rows.len(),
                        rows[0].len()
                    ),
                ))
            }
        };
        let norm = if action_meanstd.contains(g) {
            ActionNorm::MeanStd {
                mean: check(stat(entry, "mean", &st_path, &ef)?, "mean")?,
                std: check(stat(entry, "std", &st_path, &ef)?, "std")?,
            }
        } else {
            ActionNorm::MinMax {
                lo: check(stat(entry, lo_k, &st_path, &ef)?, lo_k)?,
                hi: check(stat(entry, hi_k, &st_path, &ef)?, hi_k)?,
            }
        };
        action_groups.push(ActionGroup {
            name: g.clone(),
            dim,
            norm,
            relative,
        });
    }

    // The class defaults fill absent keys; only an explicit null is left.
    let not_null = |v: Option<usize>, f: &str| {
        v.ok_or_else(|| field_err(&pc_path, pc_field(f), "must be a non-negative integer"))
    };
    let max_state_dim = not_null(k.max_state_dim, "max_state_dim")?;
    let max_action_dim = not_null(k.max_action_dim, "max_action_dim")?;
    let max_action_horizon = not_null(k.max_action_horizon, "max_action_horizon")?;
    let me = EmbodimentConfig {
        tag: tag.into(),
        embodiment_id,
        cameras: video.modality_keys.clone(),
        frames_per_camera: video.delta_indices.len(),
        language_key,
        formalize_language: k.formalize_language,
        image: ImageTransform {
            max_size,
            crop_fraction,
        },
        state_groups,
        state_history: state.delta_indices.len(),
        exclude_state: k.exclude_state,
        action_groups,
        action_horizon: horizon,
        max_state_dim,
        max_action_dim,
        max_action_horizon,
    };
    let checks = [
        (
            "max_state_dim",
            me.encoded_state_dim(),
            me.max_state_dim,
            "encoded state width",
        ),
        (
            "max_action_dim",
            me.action_width(),
            me.max_action_dim,
            "action width",
        ),
        (
            "max_action_horizon",
            horizon,
            me.max_action_horizon,
            "action horizon",
        ),
    ];
    for (f, used, max, what) in checks {
        if used > max {
            return Err(field_err(
                &pc_path,
                pc_field(f),
                format!("{what} of `{tag}` is {used}, more than {max}"),
            ));
        }
    }
    Ok(me)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processor::kwargs::ProcessorKwargs;
    use crate::processor::{ActionConfig, N16Processor};

    // One declaration of the kwargs, each generation's class defaults for the absent keys.
    #[test]
    fn absent_kwargs_take_each_generations_class_defaults() {
        let json = r#"{"modality_configs": {}}"#;
        let n17: ProcessorKwargs<RawActionConfig, N17Processor> =
            serde_json::from_str(json).unwrap();
        assert_eq!(
            (
                n17.formalize_language,
                n17.use_albumentations,
                n17.max_state_dim,
                n17.max_action_dim,
                n17.max_action_horizon,
            ),
            (true, false, Some(29), Some(29), Some(40))
        );
        let n16: ProcessorKwargs<ActionConfig, N16Processor> = serde_json::from_str(json).unwrap();
        assert_eq!(
            (
                n16.formalize_language,
                n16.use_albumentations,
                n16.max_state_dim,
                n16.max_action_dim,
                n16.max_action_horizon,
            ),
            (false, true, None, None, None)
        );
        for k in [&n17.shortest_image_edge, &n16.shortest_image_edge] {
            assert_eq!(*k, Some(256));
        }
        assert_eq!(
            (n17.crop_fraction, n16.crop_fraction),
            (Some(0.95), Some(0.95))
        );
        assert!(n16.clip_outliers && n17.clip_outliers && !n17.exclude_state);
    }
}
