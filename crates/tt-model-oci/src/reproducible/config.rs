//! The image config normalised: what the classic builder stamps with the build's time or its
//! throwaway containers, set to what the inputs alone decide.
//!
//! Two `--no-cache` builds of the same Dockerfile and context differ, besides the layers'
//! digests, in: `created` and every `history[].created` (wall-clock times), `container` and
//! `container_config` (the id and config of the container the last step committed from, its
//! hostname being the id), and `config.Image` (the id of the parent build step's image, itself
//! time-stamped). Those are set to the epoch or removed. Under BuildKit a `--no-cache` package
//! sets [`REBUILD_ARG`] to a fresh value, which every `RUN`'s `history[].created_by` records
//! (`|1 TT_MODEL_REBUILD=… /bin/sh -c …`): its value is emptied. Nothing else is touched, so
//! the config keeps its key order (the engine hashes the bytes as given).

use serde_json::Value;
use tt_model_manifest::timefmt::{parse_rfc3339, rfc3339};

/// The build argument a BuildKit `--no-cache` package changes to rerun every `RUN` (the
/// classic builder's `nocache` would empty the build-cache mount): a cache key, not an input.
pub const REBUILD_ARG: &str = "TT_MODEL_REBUILD";

/// `created_by` with the value of [`REBUILD_ARG`] emptied (`TT_MODEL_REBUILD=123 …` becomes
/// `TT_MODEL_REBUILD= …`).
fn without_rebuild_value(created_by: &str) -> String {
    let key = format!("{REBUILD_ARG}=");
    let Some(at) = created_by.find(&key) else {
        return created_by.to_string();
    };
    let value_start = at + key.len();
    let value_end = created_by[value_start..]
        .find(' ')
        .map_or(created_by.len(), |n| value_start + n);
    format!("{}{}", &created_by[..value_start], &created_by[value_end..])
}

/// Rewrites `raw` (an image config as the engine saves it) for `epoch` with `diff_ids` as its
/// layers' new uncompressed digests, base first. Times later than the epoch become the epoch;
/// earlier ones (the base image's own history) stay.
pub fn normalize_config(raw: &[u8], epoch: u64, diff_ids: &[String]) -> Result<Vec<u8>, String> {
    let mut config: Value =
        serde_json::from_slice(raw).map_err(|e| format!("the image config is not JSON: {e}"))?;
    let obj = config
        .as_object_mut()
        .ok_or("the image config is not a JSON object")?;
    let stamp = rfc3339(epoch, false);
    let clamp = |v: &mut Value| {
        let later = v
            .as_str()
            .and_then(parse_rfc3339)
            .is_none_or(|t| t < 0 || t as u64 > epoch);
        if later {
            *v = Value::String(stamp.clone());
        }
    };
    if let Some(created) = obj.get_mut("created") {
        clamp(created);
    }
    if let Some(history) = obj.get_mut("history").and_then(Value::as_array_mut) {
        for entry in history {
            if let Some(created) = entry.get_mut("created") {
                clamp(created);
            }
            if let Some(by) = entry.get_mut("created_by")
                && let Some(text) = by.as_str()
            {
                *by = Value::String(without_rebuild_value(text));
            }
        }
    }
    obj.shift_remove("container");
    obj.shift_remove("container_config");
    if let Some(inner) = obj.get_mut("config").and_then(Value::as_object_mut) {
        inner.shift_remove("Image");
        if inner.get("Hostname").is_some() {
            inner.insert("Hostname".into(), Value::String(String::new()));
        }
    }
    let rootfs = obj
        .get_mut("rootfs")
        .and_then(Value::as_object_mut)
        .ok_or("the image config has no rootfs")?;
    let old = rootfs
        .get("diff_ids")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if old != diff_ids.len() {
        return Err(format!(
            "the image config lists {old} layers, the image has {}",
            diff_ids.len()
        ));
    }
    rootfs.insert(
        "diff_ids".into(),
        Value::Array(diff_ids.iter().cloned().map(Value::String).collect()),
    );
    Ok(serde_json::to_vec(&config).expect("a JSON value serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved(build: &str, container: &str) -> Vec<u8> {
        format!(
            r#"{{"architecture":"amd64","config":{{"Hostname":"","User":"1000:1000","Image":"sha256:{container}{container}","Labels":{{"x":"y"}}}},"container":"{container}","container_config":{{"Hostname":"{container}"}},"created":"2026-12-03T04:07:{build}.38Z","docker_version":"20.10.24+dfsg1","history":[{{"created":"1980-01-01T00:00:00Z","created_by":"base"}},{{"created":"2026-12-03T04:07:{build}.1Z","created_by":"RUN x"}}],"os":"linux","rootfs":{{"type":"layers","diff_ids":["sha256:base","sha256:{container}"]}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn two_builds_normalise_to_one_config() {
        let epoch = 1_000_000_000; // 2001
        let ids = ["sha256:base".to_string(), "sha256:new".to_string()];
        let a = normalize_config(&saved("34", "1ae10ce6"), epoch, &ids).unwrap();
        let b = normalize_config(&saved("43", "821333ce"), epoch, &ids).unwrap();
        assert_eq!(a, b);
        let v: Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(v["created"], "2001-09-09T01:46:40Z");
        assert_eq!(
            v["history"][0]["created"], "1980-01-01T00:00:00Z",
            "older stays"
        );
        assert_eq!(v["history"][1]["created"], "2001-09-09T01:46:40Z");
        assert!(v.get("container").is_none() && v.get("container_config").is_none());
        assert!(v["config"].get("Image").is_none());
        assert_eq!(v["config"]["Labels"]["x"], "y");
        assert_eq!(v["rootfs"]["diff_ids"][1], "sha256:new");
        // Key order is kept: architecture first, as the engine wrote it.
        assert!(
            String::from_utf8(a)
                .unwrap()
                .starts_with(r#"{"architecture":"amd64","config""#)
        );
    }

    #[test]
    fn the_rebuild_arguments_value_is_emptied_and_nothing_else() {
        assert_eq!(
            without_rebuild_value(
                "RUN |1 TT_MODEL_REBUILD=1796299430489887258 /bin/sh -c sh x # buildkit"
            ),
            "RUN |1 TT_MODEL_REBUILD= /bin/sh -c sh x # buildkit"
        );
        assert_eq!(
            without_rebuild_value("RUN |1 TT_MODEL_REBUILD= /bin/sh -c x"),
            "RUN |1 TT_MODEL_REBUILD= /bin/sh -c x"
        );
        assert_eq!(
            without_rebuild_value("RUN |1 SOURCE_DATE_EPOCH=5 /bin/sh -c x"),
            "RUN |1 SOURCE_DATE_EPOCH=5 /bin/sh -c x"
        );
        let config = br#"{"history":[{"created_by":"RUN |1 TT_MODEL_REBUILD=9 /bin/sh -c x"}],"rootfs":{"diff_ids":[]}}"#;
        let v: Value = serde_json::from_slice(&normalize_config(config, 0, &[]).unwrap()).unwrap();
        assert_eq!(
            v["history"][0]["created_by"],
            "RUN |1 TT_MODEL_REBUILD= /bin/sh -c x"
        );
    }

    #[test]
    fn a_layer_count_mismatch_is_refused() {
        let err = normalize_config(&saved("1", "c"), 0, &["sha256:x".into()]).unwrap_err();
        assert!(err.contains("lists 2 layers"), "{err}");
    }
}
