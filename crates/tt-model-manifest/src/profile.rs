//! Serve profiles: the synthesized `default`, the default-profile choice and the deep merge of
//! `serve` with a profile (dicts recurse, scalars override, empty lists and dicts do not erase).

use serde_json::Value;

use crate::types::{Manifest, ServeProfile, ServeSettings};
use crate::validate::hardware::chips_or_one;

/// The name of the profile synthesized when a manifest declares none.
pub const DEFAULT_PROFILE: &str = "default";

/// Deep-merges `over` into `base` (the original's `deep_merge`): objects recurse, `null` and
/// empty arrays/objects in `over` keep `base`, anything else replaces.
pub fn deep_merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (_, Value::Null) => {}
        (_, Value::Array(a)) if a.is_empty() => {}
        (Value::Object(b), Value::Object(o)) => {
            for (key, value) in o {
                match b.get_mut(key) {
                    Some(slot) => deep_merge(slot, value),
                    None => {
                        if !is_empty_collection(value) {
                            b.insert(key.clone(), value.clone());
                        }
                    }
                }
            }
        }
        (_, Value::Object(o)) if o.is_empty() => {}
        (slot, value) => *slot = value.clone(),
    }
}

fn is_empty_collection(v: &Value) -> bool {
    matches!(v, Value::Null)
        || matches!(v, Value::Array(a) if a.is_empty())
        || matches!(v, Value::Object(o) if o.is_empty())
}

/// `serve` with `profile` merged over it.
pub fn merge_settings(serve: &ServeSettings, profile: &ServeSettings) -> ServeSettings {
    let mut base = serde_json::to_value(serve).unwrap_or(Value::Null);
    let over = serde_json::to_value(profile).unwrap_or(Value::Null);
    deep_merge(&mut base, &over);
    // Both sides came from `ServeSettings`, so the merge is one too.
    serde_json::from_value(base).unwrap_or_else(|_| serve.clone())
}

/// The profiles of a manifest: the declared ones, or one synthesized `default`.
pub fn profiles_of(serve_profiles: &[ServeProfile]) -> Vec<ServeProfile> {
    if serve_profiles.is_empty() {
        vec![ServeProfile {
            name: DEFAULT_PROFILE.to_owned(),
            description: None,
            settings: ServeSettings::default(),
        }]
    } else {
        serve_profiles.to_vec()
    }
}

/// The default profile's name: `default_profile`, else the only profile.
pub fn default_name(serve_profiles: &[ServeProfile], default_profile: Option<&str>) -> String {
    default_profile
        .map(str::to_owned)
        .or_else(|| serve_profiles.first().map(|p| p.name.clone()))
        .unwrap_or_else(|| DEFAULT_PROFILE.to_owned())
}

impl Manifest {
    /// The declared profiles, or one synthesized `default`.
    pub fn profiles(&self) -> Vec<ServeProfile> {
        profiles_of(&self.serve_profiles)
    }

    /// The profile `serve` uses without `--profile`.
    pub fn default_profile_name(&self) -> String {
        default_name(&self.serve_profiles, self.default_profile.as_deref())
    }

    /// The effective settings of profile `name` (`None`: the default profile), or `None` when
    /// no such profile exists.
    pub fn effective_serve(&self, name: Option<&str>) -> Option<ServeSettings> {
        let name = name.map_or_else(|| self.default_profile_name(), str::to_owned);
        let profile = self.profiles().into_iter().find(|p| p.name == name)?;
        Some(merge_settings(&self.serve, &profile.settings))
    }

    /// Chips the default profile needs (1 when its hardware is unknown).
    pub fn device_count(&self) -> u32 {
        chips_or_one(
            self.effective_serve(None)
                .and_then(|s| s.hardware)
                .as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Capabilities;
    use serde_json::json;

    #[test]
    fn merge_rules() {
        let mut base = json!({"a": 1, "d": {"x": 1, "y": 2}, "l": [1], "e": {"k": "v"}});
        deep_merge(
            &mut base,
            &json!({"a": 2, "d": {"x": 9}, "l": [], "e": {}, "n": null, "new": [3]}),
        );
        assert_eq!(
            base,
            json!({"a": 2, "d": {"x": 9, "y": 2}, "l": [1], "e": {"k": "v"}, "new": [3]})
        );
    }

    #[test]
    fn profile_overrides_one_capability_and_keeps_the_other() {
        let serve = ServeSettings {
            max_num_seqs: Some(32),
            capabilities: Some(Capabilities {
                tool_parser: Some("hermes".into()),
                reasoning_parser: Some("qwen3".into()),
            }),
            env: [("A".to_owned(), "1".to_owned())].into_iter().collect(),
            ..ServeSettings::default()
        };
        let profile = ServeSettings {
            max_num_seqs: Some(8),
            capabilities: Some(Capabilities {
                tool_parser: Some("llama3_json".into()),
                reasoning_parser: None,
            }),
            ..ServeSettings::default()
        };
        let merged = merge_settings(&serve, &profile);
        assert_eq!(merged.max_num_seqs, Some(8));
        let caps = merged.capabilities.unwrap();
        assert_eq!(caps.tool_parser.as_deref(), Some("llama3_json"));
        assert_eq!(caps.reasoning_parser.as_deref(), Some("qwen3"));
        assert_eq!(merged.env.get("A").map(String::as_str), Some("1"));
    }
}
