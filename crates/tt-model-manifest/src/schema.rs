//! The JSON Schema (draft-07) of `tt-model.yaml`, generated from the authoring types, for
//! editors (`# yaml-language-server: $schema=…`) and CI. `schemas/tt-model-5.1.schema.json` is
//! this output, checked in; a test keeps it fresh.

use schemars::generate::SchemaSettings;

use crate::types::Manifest;

/// Where the checked-in schema lives, relative to the workspace root.
pub const SCHEMA_FILE: &str = "schemas/tt-model-5.1.schema.json";

/// The schema as JSON.
pub fn json_schema() -> serde_json::Value {
    let generator = SchemaSettings::draft07().into_generator();
    let schema = generator.into_root_schema_for::<Manifest>();
    schema.to_value()
}

/// The schema as pretty JSON with a trailing newline (the checked-in file's exact bytes).
pub fn json_schema_string() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::*;

    fn properties<'a>(schema: &'a serde_json::Value, def: Option<&str>) -> Vec<&'a str> {
        let object = match def {
            None => schema,
            Some(name) => &schema["definitions"][name],
        };
        object["properties"]
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The hand-written decoders accept exactly the keys the schema documents.
    #[test]
    fn decoder_key_lists_match_the_schema() {
        let schema = json_schema();
        fn sorted(mut v: Vec<&str>) -> Vec<&str> {
            v.sort_unstable();
            v
        }
        assert_eq!(
            sorted(properties(&schema, None)),
            sorted(MANIFEST_KEYS.to_vec())
        );
        for (def, keys) in [
            ("WeightsSpec", WEIGHTS_KEYS),
            ("Source", SOURCE_KEYS),
            ("GitSource", GIT_KEYS),
            ("ExtraCode", EXTRA_CODE_KEYS),
            ("ImageSettings", IMAGE_KEYS),
            ("ServeSettings", SERVE_KEYS),
            ("ServeProfile", PROFILE_KEYS),
            ("Capabilities", CAPABILITY_KEYS),
            ("CardSettings", CARD_KEYS),
            ("License", LICENSE_KEYS),
            ("CargoBinary", CARGO_KEYS),
            ("ShellStep", SHELL_STEP_KEYS),
        ] {
            assert_eq!(
                sorted(properties(&schema, Some(def))),
                sorted(keys.to_vec()),
                "{def}"
            );
            assert_eq!(
                schema["definitions"][def]["additionalProperties"], false,
                "{def}"
            );
        }
    }

    #[test]
    fn is_draft_07() {
        assert_eq!(
            json_schema()["$schema"],
            "http://json-schema.org/draft-07/schema#"
        );
    }
}
