//! `--task robotics`: GR00T's `/predict`, fed the observation the served bundle ships as its
//! demo (`GET /demo` answers `{"request": …, "expected": …}`; see `gr00t-server::routes`), so
//! the probe needs no camera frame or robot state from the caller. A prompt replaces the demo's
//! instruction and any `--key value` is a request field (`--seed 3`, `--return-normalized`).
//!
//! The body (about 140 KB with its camera frame) goes to curl on stdin: one argument that
//! large is over Linux's per-argument limit.

use std::time::Duration;

use serde_json::{Map, Value};

use super::send::{self, Sent};
use super::{Answer, Outcome, TimedOut};
use crate::{LocalError, openai};

/// The route that answers the demo observation.
pub(super) const DEMO_PATH: &str = "/demo";
/// The route that predicts.
pub(super) const PREDICT_PATH: &str = "/predict";
/// A prediction on a warm server takes well under a second; a device recovering takes longer.
pub(super) const TIMEOUT: Duration = Duration::from_secs(120);

/// What `GET /demo` said.
pub(super) enum Demo {
    /// The observation to send.
    Request(Map<String, Value>),
    /// Nothing answered.
    Nothing,
    /// The server answered without a demo request (the status and its words).
    Missing(u16, String),
}

/// Asks the server for its demo observation.
pub(super) async fn demo(base: &str) -> Demo {
    let Some(reply) = openai::get(base, DEMO_PATH).await else {
        return Demo::Nothing;
    };
    let doc: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    match doc.get("request") {
        Some(Value::Object(r)) if (200..300).contains(&reply.status) => Demo::Request(r.clone()),
        _ => {
            let words = super::reply::error_message(&doc)
                .unwrap_or_else(|| String::from_utf8_lossy(&reply.body).trim().to_owned());
            Demo::Missing(reply.status, words)
        }
    }
}

/// The request fields the caller changes: the instruction (a prompt), then `params`.
pub(super) fn overrides(prompt: Option<&str>, params: &[(String, Value)]) -> Vec<(String, Value)> {
    let mut all: Vec<(String, Value)> = prompt
        .map(|p| ("instruction".to_owned(), Value::from(p)))
        .into_iter()
        .collect();
    for (k, v) in params {
        match all.iter_mut().find(|(a, _)| a == k) {
            Some(slot) => slot.1 = v.clone(),
            None => all.push((k.clone(), v.clone())),
        }
    }
    all
}

/// The demo observation with the caller's fields set.
pub(super) fn body(mut request: Map<String, Value>, overrides: &[(String, Value)]) -> Vec<u8> {
    for (k, v) in overrides {
        request.insert(k.clone(), v.clone());
    }
    serde_json::to_vec(&Value::Object(request)).unwrap_or_default()
}

/// The curl that sends a body read from stdin to `/predict`.
pub(super) fn predict_argv(base: &str) -> Vec<String> {
    [
        "curl",
        "-sS",
        &format!("{}{PREDICT_PATH}", base.trim_end_matches('/')),
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        "@-",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `--print`: the demo fetched, its request taken out (and changed) with `jq`, piped to
/// `/predict`.
pub(super) fn render(base: &str, overrides: &[(String, Value)]) -> String {
    let root = base.trim_end_matches('/');
    let filter = if overrides.is_empty() {
        ".request".to_owned()
    } else {
        format!(".request + {}", openai::python_json(overrides))
    };
    format!(
        "curl -sS {} \\\n  | jq -c {} \\\n  | {}",
        openai::shell_quote(&format!("{root}{DEMO_PATH}")),
        openai::shell_quote(&filter),
        openai::render_curl(&predict_argv(base)).replace(" \\\n  ", " ")
    )
}

/// Sends the demo observation (`demo`, when the task choice already fetched it) with the
/// caller's fields to `/predict`, and reads the answer as one line.
pub(super) async fn predict(
    base: &str,
    demo: Option<Demo>,
    overrides: &[(String, Value)],
) -> Result<Outcome, LocalError> {
    let demo = match demo {
        Some(d) => d,
        None => self::demo(base).await,
    };
    let request = match demo {
        Demo::Request(r) => r,
        Demo::Nothing => return Err(super::nothing_serving(base)),
        Demo::Missing(status, words) => {
            let root = base.trim_end_matches('/');
            return Err(LocalError::refused(
                "--base-url",
                format!(
                    "{root}{DEMO_PATH} answers {status} ({words}): robotics sends the observation a GR00T server ships as its demo, and this server has none.\n  Send your own:  curl {root}{PREDICT_PATH} -H 'Content-Type: application/json' -d @observation.json"
                ),
            ));
        }
    };
    let argv = predict_argv(base);
    let url = &argv[2];
    Ok(
        match send::run(&argv, Some(body(request, overrides)), true, TIMEOUT).await? {
            Sent::Answered(raw) => match summary(&raw) {
                Ok(line) => Outcome::Answer(Answer::text(line)),
                Err(e) => return Err(LocalError::refused("--base-url", format!("{url}: {e}"))),
            },
            Sent::Failed(code) => Outcome::CurlFailed(code),
            Sent::TimedOut => Outcome::TimedOut(TimedOut {
                url: url.clone(),
                after: TIMEOUT,
            }),
        },
    )
}

/// The `/predict` answer in one line: steps, embodiment, each group's width, server time.
pub(super) fn summary(raw: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(raw);
    let doc: Value = serde_json::from_str(&text).map_err(|_| {
        let t = text.trim();
        if t.is_empty() {
            "empty reply".to_owned()
        } else {
            t.to_owned()
        }
    })?;
    if let Some(e) = super::reply::error_message(&doc) {
        let field = doc["field"]
            .as_str()
            .map(|f| format!(" (field `{f}`)"))
            .unwrap_or_default();
        return Err(format!("{e}{field}"));
    }
    let unexpected = || {
        let head: String = text.trim().chars().take(500).collect();
        format!("unexpected robotics reply: {head}")
    };
    let groups = doc["actions"].as_object().ok_or_else(unexpected)?;
    let mut widths = Vec::new();
    let mut steps = None;
    for (name, rows) in groups {
        let rows = rows.as_array().ok_or_else(unexpected)?;
        let width = rows.first().and_then(Value::as_array).map_or(0, Vec::len);
        steps.get_or_insert(rows.len());
        widths.push(format!("{name} ×{width}"));
    }
    let steps = doc["action_horizon"]
        .as_u64()
        .map(|h| h as usize)
        .or(steps)
        .unwrap_or(0);
    let embodiment = doc["embodiment"]
        .as_str()
        .map(|e| format!(" ({e})"))
        .unwrap_or_default();
    let time = doc["timing_ms"]["total"]
        .as_f64()
        .map(|t| format!(" in {t:.0} ms"))
        .unwrap_or_default();
    Ok(format!(
        "{steps}-step action chunk{embodiment}{time}: {}",
        widths.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn print_pipes_the_demo_into_predict() {
        assert_eq!(
            render("http://h:1/", &[]),
            "curl -sS http://h:1/demo \\\n  | jq -c .request \\\n  | curl -sS http://h:1/predict -H 'Content-Type: application/json' --data-binary @-"
        );
        let o = overrides(Some("pick it"), &[("seed".into(), json!(3))]);
        assert!(
            render("http://h:1", &o)
                .contains(r#"jq -c '.request + {"instruction": "pick it", "seed": 3}'"#)
        );
    }

    #[test]
    fn the_answer_in_one_line() {
        let reply = json!({
            "actions": {"action.left_arm": vec![[0.0; 7]; 16], "action.waist": vec![[0.0; 3]; 16]},
            "action_horizon": 16, "embodiment": "gr1", "seq_len": 9, "seed": 0,
            "timing_ms": {"total": 12.4}
        });
        assert_eq!(
            summary(reply.to_string().as_bytes()).unwrap(),
            "16-step action chunk (gr1) in 12 ms: action.left_arm ×7, action.waist ×3"
        );
        let bad = json!({"error": "state.left_arm has 6 values, expected 7", "field": "state"});
        assert_eq!(
            summary(bad.to_string().as_bytes()).unwrap_err(),
            "state.left_arm has 6 values, expected 7 (field `state`)"
        );
        assert!(
            summary(b"{}")
                .unwrap_err()
                .starts_with("unexpected robotics reply")
        );
    }
}
