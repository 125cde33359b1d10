//! Tolerant field readers for the wire manifest. The Python original writes `null` for unset
//! optional lists, maps and settings (pydantic's dump); a hand-written package may leave keys
//! out. Both mean "unset", and reading them as the empty value serves the same package. What
//! this crate writes never needs them.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::types::{ServeProfile, ServeSettings};

/// The registry that means "the image travels in the Hub repo".
pub(super) const HF_REGISTRY: &str = "hf";

/// `null` reads as the type's default (an empty list or map, an empty string).
pub(super) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `image.registry`: `null` or empty reads as `hf` (no registry: the image is loaded locally).
pub(super) fn registry<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| HF_REGISTRY.to_owned()))
}

/// Drops the keys whose value is `null`: for a serve settings object, `null` is "unset", the
/// same as absent (the profile merge treats it so too).
fn without_nulls(mut object: Map<String, Value>) -> Map<String, Value> {
    object.retain(|_, v| !v.is_null());
    object
}

/// `container.serve`, with `null` fields (or a `null` block) read as unset.
pub(super) fn settings<'de, D: Deserializer<'de>>(d: D) -> Result<ServeSettings, D::Error> {
    let object = Option::<Map<String, Value>>::deserialize(d)?.unwrap_or_default();
    serde_json::from_value(Value::Object(without_nulls(object))).map_err(D::Error::custom)
}

/// `container.serve_profiles`, each with `null` fields read as unset.
pub(super) fn profiles<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ServeProfile>, D::Error> {
    Option::<Vec<Map<String, Value>>>::deserialize(d)?
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, object)| {
            serde_json::from_value(Value::Object(without_nulls(object)))
                .map_err(|e| D::Error::custom(format_args!("serve_profiles[{i}]: {e}")))
        })
        .collect()
}
