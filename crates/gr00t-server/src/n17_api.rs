//! The N1.7 `POST /predict` body and its translation to the runtime's [`Observation`], noise
//! and [`Rtc`] options, every shape checked against the embodiment's modality config with a
//! 400 naming the field.
//!
//! ```json
//! {
//!   "images": {"<camera>": "<base64 PNG/JPEG>" | ["<oldest>", ..., "<newest>"]},
//!   "state": {"<group>": [v, ...] | [[v, ...] (oldest), ..., [v, ...] (newest)]},
//!   "instruction": "...",
//!   "seed": 42 | "noise": [1, 40, 132] (or [40, 132]),
//!   "rtc": {"previous_chunk": [40, 132] (or [1, 40, 132]), "overlap_steps": o,
//!           "frozen_steps": f (default 0), "ramp_rate": r (default 6.0)},
//!   "action_horizon": h (RTC's horizon; default the embodiment's decoded horizon),
//!   "return_normalized": false
//! }
//! ```
//! As for N1.6, unknown top-level keys are ignored and `seed` and `noise` exclude each other.
//! One image (or one row) is accepted only where the embodiment takes exactly one frame (row).

use std::collections::BTreeMap;

use base64::Engine;
use gr00t_runtime::n17::head::Rtc;
use gr00t_runtime::n17::head::rtc::DEFAULT_RAMP_RATE;
use gr00t_runtime::n17::processing::{EmbodimentConfig, Observation};
use gr00t_runtime::preprocess::{RgbImage, decode_image};
use serde_json::{Map, Value};

use crate::api::DEFAULT_SEED;
use crate::error::ApiError;

/// One parsed N1.7 request.
#[derive(Debug, Clone)]
pub struct N17Request {
    /// Frames and state rows, oldest first, and the raw instruction.
    pub obs: Observation,
    /// x0 `[rows, cols]` row-major.
    pub noise: Vec<f32>,
    /// The seed the noise came from; `None` when the request gave `noise`.
    pub seed: Option<u64>,
    /// Real-time-chunking options, validated.
    pub rtc: Option<Rtc>,
    /// Also return the normalised actions per group.
    pub return_normalized: bool,
}

/// What the request is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Shapes<'a> {
    /// The embodiment's modality config.
    pub embodiment: &'a EmbodimentConfig,
    /// Rows of the model-space chunk (the model's action horizon, 40).
    pub rows: usize,
    /// Columns of the model-space chunk (`max_action_dim`, 132).
    pub cols: usize,
}

impl N17Request {
    /// Parses and checks a body.
    pub fn parse(body: &[u8], shapes: Shapes<'_>) -> Result<Self, ApiError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad("body", format!("not valid JSON: {e}")))?;
        let Value::Object(obj) = v else {
            return Err(ApiError::bad("body", "expected a JSON object"));
        };
        let cfg = shapes.embodiment;
        let instruction = match obj.get("instruction") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(ApiError::bad("instruction", "expected a string")),
            None => return Err(ApiError::bad("instruction", "missing")),
        };
        let images = object(&obj, "images", "an object {camera: image or [frames]}")?;
        let mut video = BTreeMap::new();
        for cam in &cfg.cameras {
            let field = format!("images.{cam}");
            let v = images
                .get(cam)
                .ok_or_else(|| ApiError::bad(&field, "missing"))?;
            video.insert(cam.clone(), frames(v, &field, cfg.frames_per_camera)?);
        }
        let state_obj = object(&obj, "state", "an object {group: row or [rows]}")?;
        let mut state = BTreeMap::new();
        for g in &cfg.state_groups {
            let field = format!("state.{}", g.name);
            let v = state_obj
                .get(&g.name)
                .ok_or_else(|| ApiError::bad(&field, "missing"))?;
            state.insert(g.name.clone(), rows(v, &field, cfg.state_history, g.dim)?);
        }
        let (noise, seed) = noise(&obj, shapes)?;
        let action_horizon = match obj.get("action_horizon") {
            None | Some(Value::Null) => cfg.action_horizon,
            Some(v) => count(v, "action_horizon")?,
        };
        let rtc = match obj.get("rtc") {
            None | Some(Value::Null) => None,
            Some(v) => Some(rtc(v, action_horizon, shapes)?),
        };
        if rtc.is_none() && (action_horizon == 0 || action_horizon > shapes.rows) {
            return Err(ApiError::bad(
                "action_horizon",
                format!("{action_horizon} is outside 1..={}", shapes.rows),
            ));
        }
        let return_normalized = match obj.get("return_normalized") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ApiError::bad("return_normalized", "expected true or false")),
        };
        Ok(Self {
            obs: Observation {
                video,
                state,
                instruction,
            },
            noise,
            seed,
            rtc,
            return_normalized,
        })
    }
}

fn object<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    what: &str,
) -> Result<&'a Map<String, Value>, ApiError> {
    match obj.get(key) {
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(ApiError::bad(key, format!("expected {what}"))),
        None => Err(ApiError::bad(key, "missing")),
    }
}

/// One base64 image or a list of them (oldest first), `want` frames in all.
fn frames(v: &Value, field: &str, want: usize) -> Result<Vec<RgbImage>, ApiError> {
    let items: Vec<(String, &str)> = match v {
        Value::String(s) => vec![(field.to_owned(), s.as_str())],
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_str()
                    .map(|s| (format!("{field}[{i}]"), s))
                    .ok_or_else(|| {
                        ApiError::bad(format!("{field}[{i}]"), "expected a base64 image")
                    })
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ApiError::bad(
                field,
                "expected a base64 image or a list of them (oldest first)",
            ));
        }
    };
    if items.len() != want {
        return Err(ApiError::bad(
            field,
            format!(
                "{} frames given, the embodiment takes {want} (one per video delta index, oldest first)",
                items.len()
            ),
        ));
    }
    items
        .into_iter()
        .map(|(f, s)| {
            let bytes = decode_b64(s).map_err(|m| ApiError::bad(&f, m))?;
            decode_image(&bytes).map_err(|e| ApiError::bad(&f, e.to_string()))
        })
        .collect()
}

fn decode_b64(s: &str) -> Result<Vec<u8>, String> {
    let s = match s.strip_prefix("data:") {
        Some(rest) => rest
            .split_once(";base64,")
            .map(|(_, d)| d)
            .ok_or("a data: URL must be base64")?,
        None => s,
    };
    let clean: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(clean)
        .map_err(|e| format!("invalid base64: {e}"))
}

/// One row or a list of rows (oldest first): `want` rows of `dim` finite numbers.
fn rows(v: &Value, field: &str, want: usize, dim: usize) -> Result<Vec<Vec<f32>>, ApiError> {
    let Value::Array(a) = v else {
        return Err(ApiError::bad(
            field,
            "expected a row of numbers or a list of rows (oldest first)",
        ));
    };
    let nested = a.first().is_some_and(Value::is_array);
    let rows: Vec<Vec<f32>> = if nested {
        a.iter()
            .enumerate()
            .map(|(t, r)| numbers(r, &format!("{field}[{t}]")))
            .collect::<Result<_, _>>()?
    } else {
        vec![numbers(v, field)?]
    };
    if rows.len() != want {
        return Err(ApiError::bad(
            field,
            format!(
                "{} rows given, the embodiment takes {want} (one per state delta index, oldest first)",
                rows.len()
            ),
        ));
    }
    for (t, r) in rows.iter().enumerate() {
        if r.len() != dim {
            let f = if nested {
                format!("{field}[{t}]")
            } else {
                field.to_owned()
            };
            return Err(ApiError::bad(
                f,
                format!("{} values, expected {dim}", r.len()),
            ));
        }
    }
    Ok(rows)
}

/// A flat array of finite numbers (as float32).
fn numbers(v: &Value, field: &str) -> Result<Vec<f32>, ApiError> {
    let Value::Array(a) = v else {
        return Err(ApiError::bad(field, "expected an array of numbers"));
    };
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .map(|f| f as f32)
                .filter(|f| f.is_finite())
                .ok_or_else(|| ApiError::bad(format!("{field}[{i}]"), "expected a finite number"))
        })
        .collect()
}

/// `[rows, cols]` or `[1, rows, cols]` finite numbers, row-major.
fn matrix(v: &Value, field: &str, rows: usize, cols: usize) -> Result<Vec<f32>, ApiError> {
    let shape_err = || {
        ApiError::bad(
            field,
            format!("expected shape [{rows}, {cols}] or [1, {rows}, {cols}]"),
        )
    };
    let outer = v.as_array().ok_or_else(shape_err)?;
    let body = match outer.as_slice() {
        [Value::Array(inner)] if inner.first().is_some_and(Value::is_array) => inner,
        _ => outer,
    };
    if body.len() != rows {
        return Err(ApiError::bad(
            field,
            format!(
                "{} rows, expected shape [{rows}, {cols}] or [1, {rows}, {cols}]",
                body.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(rows * cols);
    for (r, row) in body.iter().enumerate() {
        let vals = numbers(row, &format!("{field}[{r}]"))?;
        if vals.len() != cols {
            return Err(ApiError::bad(
                format!("{field}[{r}]"),
                format!("{} values, expected {cols}", vals.len()),
            ));
        }
        out.extend(vals);
    }
    Ok(out)
}

fn noise(obj: &Map<String, Value>, s: Shapes<'_>) -> Result<(Vec<f32>, Option<u64>), ApiError> {
    let seed = match obj.get("seed") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| ApiError::bad("seed", "expected a non-negative integer"))?,
        ),
    };
    match (obj.get("noise").filter(|v| !v.is_null()), seed) {
        (Some(_), Some(_)) => Err(ApiError::bad(
            "noise",
            "give either `seed` or `noise`, not both",
        )),
        (Some(v), None) => Ok((matrix(v, "noise", s.rows, s.cols)?, None)),
        (None, seed) => {
            let seed = seed.unwrap_or(DEFAULT_SEED);
            // torch.randn of the seeded generator, as the reference's one randn call.
            Ok((
                gr00t_runtime::randn::randn(seed, s.rows * s.cols),
                Some(seed),
            ))
        }
    }
}

/// A non-negative integer.
fn count(v: &Value, field: &str) -> Result<usize, ApiError> {
    v.as_u64()
        .map(|n| n as usize)
        .ok_or_else(|| ApiError::bad(field, "expected a non-negative integer"))
}

fn rtc(v: &Value, action_horizon: usize, s: Shapes<'_>) -> Result<Rtc, ApiError> {
    let Value::Object(m) = v else {
        return Err(ApiError::bad(
            "rtc",
            "expected an object {previous_chunk, overlap_steps, frozen_steps, ramp_rate}",
        ));
    };
    let previous = m
        .get("previous_chunk")
        .ok_or_else(|| ApiError::bad("rtc.previous_chunk", "missing"))?;
    let previous_chunk = matrix(previous, "rtc.previous_chunk", s.rows, s.cols)?;
    let overlap_steps = match m.get("overlap_steps") {
        Some(v) => count(v, "rtc.overlap_steps")?,
        None => return Err(ApiError::bad("rtc.overlap_steps", "missing")),
    };
    let frozen_steps = match m.get("frozen_steps") {
        None | Some(Value::Null) => 0,
        Some(v) => count(v, "rtc.frozen_steps")?,
    };
    let ramp_rate = match m.get("ramp_rate") {
        None | Some(Value::Null) => DEFAULT_RAMP_RATE,
        Some(v) => v
            .as_f64()
            .map(|f| f as f32)
            .ok_or_else(|| ApiError::bad("rtc.ramp_rate", "expected a number"))?,
    };
    let rtc = Rtc {
        previous_chunk,
        action_horizon,
        overlap_steps,
        frozen_steps,
        ramp_rate,
    };
    rtc.validate(s.rows, s.cols).map_err(|e| {
        let field = match e.field() {
            "action_horizon" => "action_horizon".to_owned(),
            f => format!("rtc.{f}"),
        };
        // The error's text starts with its field's bare name; the 400 names the wire path.
        let msg = e.to_string();
        let msg = msg
            .split_once(": ")
            .map_or(msg.clone(), |(_, m)| m.to_owned());
        ApiError::bad(field, msg)
    })?;
    Ok(rtc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(e: ApiError) -> String {
        match e {
            ApiError::BadRequest { field, .. } => field,
            other => panic!("expected a 400, got {other}"),
        }
    }

    #[test]
    fn a_matrix_is_rows_by_cols_with_or_without_the_batch() {
        let m = json!([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
        assert_eq!(
            matrix(&m, "x", 2, 3).unwrap(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(
            matrix(&json!([m]), "x", 2, 3).unwrap(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(field(matrix(&m, "x", 3, 3).unwrap_err()), "x");
        assert_eq!(field(matrix(&m, "x", 2, 2).unwrap_err()), "x[0]");
        let nan_like = json!([[1.0, "a", 3.0], [4.0, 5.0, 6.0]]);
        assert_eq!(field(matrix(&nan_like, "x", 2, 3).unwrap_err()), "x[0][1]");
        assert_eq!(field(matrix(&json!(7), "x", 2, 3).unwrap_err()), "x");
    }

    #[test]
    fn state_is_one_row_or_a_list_of_rows() {
        assert_eq!(rows(&json!([1.0, 2.0]), "s", 1, 2).unwrap(), [[1.0, 2.0]]);
        assert_eq!(
            rows(&json!([[1.0, 2.0], [3.0, 4.0]]), "s", 2, 2).unwrap(),
            [[1.0, 2.0], [3.0, 4.0]]
        );
        // One row where the embodiment takes two, a short row, a non-number.
        assert_eq!(field(rows(&json!([1.0, 2.0]), "s", 2, 2).unwrap_err()), "s");
        assert_eq!(
            field(rows(&json!([[1.0, 2.0], [3.0]]), "s", 2, 2).unwrap_err()),
            "s[1]"
        );
        assert_eq!(
            field(rows(&json!([[1.0, null]]), "s", 1, 2).unwrap_err()),
            "s[0][1]"
        );
        assert_eq!(field(rows(&json!("x"), "s", 1, 2).unwrap_err()), "s");
    }

    #[test]
    fn frames_are_counted_before_they_are_decoded() {
        // Two undecodable frames where one is taken: the count is refused first.
        assert_eq!(
            field(frames(&json!(["a", "b"]), "images.c", 1).unwrap_err()),
            "images.c"
        );
        assert_eq!(
            field(frames(&json!("@@"), "images.c", 1).unwrap_err()),
            "images.c"
        );
        assert_eq!(
            field(frames(&json!(["AAAA", 3]), "images.c", 2).unwrap_err()),
            "images.c[1]"
        );
        assert_eq!(
            field(frames(&json!(["AAAA"]), "images.c", 1).unwrap_err()),
            "images.c[0]"
        );
    }
}
