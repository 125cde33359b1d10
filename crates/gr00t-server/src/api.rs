//! Wire types of `POST /predict` and their translation to [`Observation`].
//!
//! The request is parsed in one typed pass (fast path). When that fails, the body is re-read as
//! a JSON value only to find and name the offending field, so every 400 says which field is
//! wrong.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine;
use gr00t_runtime::request::{NoiseSource, Observation};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// Default seed, as the deployed Python policy.
pub const DEFAULT_SEED: u64 = 42;

/// `POST /predict` body. Unknown top-level keys are ignored (as pydantic does). The base64
/// images borrow from the body when they hold no JSON escapes (they normally do not), which
/// saves copying ~140 KB per frame.
#[derive(Debug, Deserialize, PartialEq)]
pub struct PredictRequest<'a> {
    /// Camera key -> base64 image (a `data:image/...;base64,` prefix is accepted).
    #[serde(borrow)]
    pub images: BTreeMap<String, BodyStr<'a>>,
    /// State group -> its raw (physical, unnormalised) values.
    pub state: BTreeMap<String, Vec<f64>>,
    /// The language instruction.
    pub instruction: String,
    /// Seed of the initial flow-matching noise; `None`: [`DEFAULT_SEED`], unless `noise` is
    /// given (giving both is a 400).
    #[serde(default)]
    pub seed: Option<u64>,
    /// The initial noise itself, `[H, D]` or `[1, H, D]`, instead of a seed.
    #[serde(default)]
    pub noise: Option<NoiseField>,
    /// Also return the model's normalised actions (`actions_normalized`); `None`: false.
    #[serde(default)]
    pub return_normalized: Option<bool>,
}

/// The `noise` field: the values, where the body scan read them itself (a plain rectangular
/// array of numbers, the usual form), or the JSON value for everything else. Two are equal
/// when they mean the same noise (the same values to the bit, or the same error).
#[derive(Debug, Clone)]
pub enum NoiseField {
    /// Read by the body scan.
    Parsed {
        /// Array dimensions, outermost first.
        shape: Vec<usize>,
        /// The numbers, row-major.
        values: Vec<f64>,
    },
    /// Any other JSON value, checked (and its error worded) when the request is used.
    Value(serde_json::Value),
}

impl<'de> Deserialize<'de> for NoiseField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(NoiseField::Value)
    }
}

impl NoiseField {
    /// The noise this field gives, or the 400 that names what is wrong with it.
    fn into_source(self) -> Result<NoiseSource, ApiError> {
        match self {
            NoiseField::Parsed { shape, values } => Ok(NoiseSource::Given { shape, values }),
            NoiseField::Value(v) => noise_from_value(&v),
        }
    }
}

impl PartialEq for NoiseField {
    fn eq(&self, other: &Self) -> bool {
        match (self.clone().into_source(), other.clone().into_source()) {
            (
                Ok(NoiseSource::Given { shape, values }),
                Ok(NoiseSource::Given {
                    shape: s2,
                    values: v2,
                }),
            ) => {
                shape == s2
                    && values.len() == v2.len()
                    && values
                        .iter()
                        .zip(&v2)
                        .all(|(a, b)| a.to_bits() == b.to_bits())
            }
            (a, b) => a == b,
        }
    }
}

/// A JSON string that borrows from the body unless it had escapes. (`Cow<str>` itself only
/// borrows as a struct field of its own; inside a map serde always copies it.)
#[derive(Debug, Clone, PartialEq)]
pub struct BodyStr<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for BodyStr<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(V).map(BodyStr)
    }
}

/// Per-group arrays in modality order, serialised as a JSON object that keeps that order.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupArrays(pub Vec<(String, Vec<Vec<f32>>)>);

impl Serialize for GroupArrays {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `timing_ms` of the response.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Timing {
    /// Image decode + preprocessing + tokenization (+ noise).
    pub decode: f64,
    /// Vision + LLM forward.
    pub encode: f64,
    /// Action head (flow-matching loop).
    pub device: f64,
    /// Un-normalisation and relative composition.
    pub decode_actions: f64,
    /// From the start of the request (body parse included) to the response.
    pub total: f64,
}

/// `POST /predict` response.
#[derive(Debug, Clone, Serialize)]
pub struct PredictResponse {
    /// Action group -> `[action_horizon][dim]` physical actions (unnormalised, relative
    /// groups composed onto the request's state).
    pub actions: GroupArrays,
    /// The model's normalised actions, only when the request asked (`return_normalized`);
    /// omitted otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions_normalized: Option<GroupArrays>,
    /// Steps per action group.
    pub action_horizon: usize,
    /// The embodiment tag served.
    pub embodiment: String,
    /// Prompt length in tokens (image and text tokens together).
    pub seq_len: usize,
    /// The seed used, or `null` when the request gave `noise`.
    pub seed: Option<u64>,
    /// Where the time went, in milliseconds.
    pub timing_ms: Timing,
    /// N1.7 only: the normalised model-space chunk `[40][132]` before decoding, which a
    /// real-time-chunking client sends back as the next request's `rtc.previous_chunk`;
    /// omitted for N1.6.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<Vec<Vec<f32>>>,
}

impl<'a> PredictRequest<'a> {
    /// Parse a body; on failure, name the field. The usual body takes the scanning fast path
    /// ([`crate::request_scan`]); anything it declines gets serde's full parse.
    pub fn parse(body: &'a [u8]) -> Result<Self, ApiError> {
        if let Some(r) = crate::request_scan::parse(body) {
            return Ok(r);
        }
        match serde_json::from_slice::<Self>(body) {
            Ok(r) => Ok(r),
            Err(e) => Err(diagnose(body, e)),
        }
    }

    /// Decode the base64 images and the noise.
    pub fn into_observation(self) -> Result<(Observation, Option<u64>, bool), ApiError> {
        let mut images = BTreeMap::new();
        for (k, v) in self.images {
            let bytes = decode_b64(&v.0)
                .map_err(|e| ApiError::bad(format!("images.{k}"), e.to_string()))?;
            images.insert(k, bytes);
        }
        // `"noise": null` is `None` here (serde's `Option`, and the body scan's).
        let (noise, seed) = match (self.noise, self.seed) {
            (Some(n), None) => (n.into_source()?, None),
            (Some(_), Some(_)) => {
                return Err(ApiError::bad(
                    "noise",
                    "give either `seed` or `noise`, not both",
                ));
            }
            (_, seed) => {
                let s = seed.unwrap_or(DEFAULT_SEED);
                (NoiseSource::Seed(s), Some(s))
            }
        };
        Ok((
            Observation {
                images,
                state: self.state,
                instruction: self.instruction,
                noise,
            },
            seed,
            self.return_normalized.unwrap_or(false),
        ))
    }
}

/// Why an image field is not base64 (the 400 response's message).
#[derive(Debug, thiserror::Error)]
enum Base64Error {
    /// A `data:` URL with another encoding.
    #[error("a data: URL must be base64")]
    DataUrlNotBase64,
    /// The payload does not decode.
    #[error("invalid base64: {0}")]
    Invalid(#[from] base64::DecodeError),
}

/// Standard base64, tolerating a `data:image/...;base64,` prefix and line breaks.
fn decode_b64(s: &str) -> Result<Vec<u8>, Base64Error> {
    let s = match s.strip_prefix("data:") {
        Some(rest) => rest
            .split_once(";base64,")
            .map(|(_, d)| d)
            .ok_or(Base64Error::DataUrlNotBase64)?,
        None => s,
    };
    // Canonical base64 (the usual payload) through the vectorised decoder; anything it
    // declines goes through the general one, which words the error or drops whitespace.
    if let Some(b) = gr00t_runtime::preprocess::base64::decode_standard(s.as_bytes()) {
        return Ok(b);
    }
    let engine = &base64::engine::general_purpose::STANDARD;
    match engine.decode(s) {
        Ok(b) => Ok(b),
        Err(_) if s.contains(['\n', '\r', ' ']) => {
            let clean: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            Ok(engine.decode(clean)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// `[H, D]` or `[1, H, D]` nested arrays of numbers -> shape + row-major values.
fn noise_from_value(v: &serde_json::Value) -> Result<NoiseSource, ApiError> {
    fn walk(
        v: &serde_json::Value,
        depth: usize,
        shape: &mut Vec<usize>,
        out: &mut Vec<f64>,
    ) -> Result<(), &'static str> {
        match v {
            serde_json::Value::Array(items) => {
                if depth > 3 {
                    return Err("nested deeper than 3");
                }
                if shape.len() == depth {
                    shape.push(items.len());
                } else if shape[depth] != items.len() {
                    return Err("ragged array");
                }
                for it in items {
                    walk(it, depth + 1, shape, out)?;
                }
                Ok(())
            }
            serde_json::Value::Number(n) => {
                if depth != shape.len() {
                    return Err("mixes numbers and arrays");
                }
                out.push(n.as_f64().ok_or("not a number")?);
                Ok(())
            }
            _ => Err("must contain only numbers"),
        }
    }
    let mut shape = vec![];
    let mut values = vec![];
    walk(v, 0, &mut shape, &mut values).map_err(|m| ApiError::bad("noise", m))?;
    Ok(NoiseSource::Given { shape, values })
}

/// Find the field a failed typed parse tripped on.
fn diagnose(body: &[u8], err: serde_json::Error) -> ApiError {
    let v: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return ApiError::bad("body", format!("not valid JSON: {e}")),
    };
    let Some(obj) = v.as_object() else {
        return ApiError::bad("body", "expected a JSON object");
    };
    for key in ["images", "state", "instruction"] {
        if !obj.contains_key(key) {
            return ApiError::bad(key, "missing");
        }
    }
    match &obj["images"] {
        serde_json::Value::Object(m) => {
            if let Some((k, _)) = m.iter().find(|(_, v)| !v.is_string()) {
                return ApiError::bad(format!("images.{k}"), "expected a base64 string");
            }
        }
        _ => return ApiError::bad("images", "expected an object {camera: base64 image}"),
    }
    match &obj["state"] {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let Some(arr) = v.as_array() else {
                    return ApiError::bad(format!("state.{k}"), "expected an array of numbers");
                };
                if let Some(i) = arr.iter().position(|x| x.as_f64().is_none()) {
                    return ApiError::bad(format!("state.{k}[{i}]"), "expected a finite number");
                }
            }
        }
        _ => return ApiError::bad("state", "expected an object {group: [numbers]}"),
    }
    if !obj["instruction"].is_string() {
        return ApiError::bad("instruction", "expected a string");
    }
    if let Some(s) = obj.get("seed")
        && !s.is_null()
        && s.as_u64().is_none()
    {
        return ApiError::bad("seed", "expected a non-negative integer");
    }
    if let Some(s) = obj.get("return_normalized")
        && !s.is_null()
        && !s.is_boolean()
    {
        return ApiError::bad("return_normalized", "expected true or false");
    }
    ApiError::bad("body", err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 400 messages of the two parsing helpers, which return typed errors.
    #[test]
    fn bad_base64_and_bad_noise_say_why() {
        let e = decode_b64("data:image/png,abcd").unwrap_err();
        assert_eq!(e.to_string(), "a data: URL must be base64");
        let e = decode_b64("@@@@").unwrap_err();
        assert!(e.to_string().starts_with("invalid base64: "), "{e}");
        assert_eq!(decode_b64("aGVs\nbG8=").unwrap(), b"hello");
        assert_eq!(
            decode_b64("data:image/png;base64,aGVsbG8=").unwrap(),
            b"hello"
        );
        let ragged = serde_json::json!([[1.0, 2.0], [3.0]]);
        let ApiError::BadRequest { field, message } = noise_from_value(&ragged).unwrap_err() else {
            panic!("a 400")
        };
        assert_eq!(
            (field.as_str(), message.as_str()),
            ("noise", "ragged array")
        );
    }

    /// `"noise": null` means "no noise" on both parse paths: the seed (given or default) is
    /// used, and only real noise beside a seed is refused.
    #[test]
    fn null_noise_is_no_noise_on_both_paths() {
        let body = |rest: &str| {
            format!(r#"{{"images":{{"c":"AA=="}},"state":{{}},"instruction":"x"{rest}}}"#)
        };
        let seed_of = |b: &str| {
            PredictRequest::parse(b.as_bytes())
                .unwrap()
                .into_observation()
        };
        let serde_seed_of = |b: &str| {
            serde_json::from_slice::<PredictRequest>(b.as_bytes())
                .unwrap()
                .into_observation()
        };
        for obs in [
            seed_of(&body(r#","noise":null,"seed":7"#)),
            serde_seed_of(&body(r#","noise":null,"seed":7"#)),
        ] {
            let (o, seed, _) = obs.unwrap();
            assert_eq!((o.noise, seed), (NoiseSource::Seed(7), Some(7)));
        }
        let (o, seed, _) = seed_of(&body(r#","noise":null"#)).unwrap();
        assert_eq!(
            (o.noise, seed),
            (NoiseSource::Seed(DEFAULT_SEED), Some(DEFAULT_SEED))
        );
        for obs in [
            seed_of(&body(r#","noise":[[1,2]],"seed":7"#)),
            serde_seed_of(&body(r#","noise":[[1,2]],"seed":7"#)),
        ] {
            assert!(obs.is_err());
        }
    }

    /// The vectorised fast path and the general decoder agree on what they accept and on the
    /// bytes; whitespace and prefixes still work.
    #[test]
    fn decode_b64_agrees_with_the_base64_crate() {
        let engine = &base64::engine::general_purpose::STANDARD;
        let mut s = 9u64;
        for n in [0usize, 1, 2, 3, 31, 32, 33, 47, 48, 49, 100, 4097, 105_000] {
            let data: Vec<u8> = (0..n)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (s >> 56) as u8
                })
                .collect();
            let text = engine.encode(&data);
            assert_eq!(decode_b64(&text).unwrap(), data, "{n}");
            let wrapped: String = text
                .as_bytes()
                .chunks(76)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join("\n");
            assert_eq!(decode_b64(&wrapped).unwrap(), data, "{n} wrapped");
            let url = format!("data:image/png;base64,{text}");
            assert_eq!(decode_b64(&url).unwrap(), data, "{n} data url");
            if n > 40 {
                let mut bad = text.clone().into_bytes();
                bad[n / 2] = b'%';
                assert!(decode_b64(std::str::from_utf8(&bad).unwrap()).is_err());
            }
        }
    }

    #[test]
    fn images_borrow_from_the_body() {
        let body = br#"{"images":{"cam":"QUJD"},"state":{},"instruction":"x"}"#;
        let req = PredictRequest::parse(body).unwrap();
        assert!(matches!(req.images["cam"].0, Cow::Borrowed("QUJD")));
        let escaped = br#"{"images":{"cam":"QU\/D"},"state":{},"instruction":"x"}"#;
        let req = PredictRequest::parse(escaped).unwrap();
        assert_eq!(req.images["cam"].0, "QU/D");
    }
}
