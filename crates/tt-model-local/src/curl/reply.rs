//! The server's answer as text for the terminal (plus the image bytes, for an image), read the
//! way the original reads it: an error reply gives the server's own words, a reply of another
//! shape than the task produces is named with its first 500 characters, and a tool-calling
//! probe answered without a tool call is an answer, but not the one asked for.

use serde_json::Value;

use super::task::Task;

/// One answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// What to print.
    pub text: String,
    /// False when the model answered, but not the way the request asked (no tool call).
    pub ok: bool,
    /// A generated image.
    pub image: Option<Vec<u8>>,
}

impl Reply {
    fn text(text: String) -> Self {
        Reply {
            text,
            ok: true,
            image: None,
        }
    }
}

/// `raw` as the `task`'s answer; `Err` holds the server's words or what was unexpected.
pub fn read(task: Task, raw: &str, tools: bool) -> Result<Reply, String> {
    let trimmed = raw.trim();
    let doc: Value = serde_json::from_str(raw).map_err(|_| {
        if trimmed.is_empty() {
            "empty reply".to_owned()
        } else {
            trimmed.to_owned()
        }
    })?;
    if !doc.is_object() {
        return Err(trimmed.to_owned());
    }
    if let Some(e) = error_message(&doc) {
        return Err(e);
    }
    let unexpected = || {
        let head: String = trimmed.chars().take(500).collect();
        format!("unexpected {} reply: {head}", task.name())
    };
    match task {
        Task::TextToImage => image(&doc).ok_or_else(unexpected)?,
        Task::FeatureExtraction => {
            let vector = doc["data"][0]["embedding"]
                .as_array()
                .ok_or_else(unexpected)?;
            let head = vector
                .iter()
                .take(4)
                .map(|v| v.as_f64().map(|f| format!("{f:.4}")))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(unexpected)?;
            Ok(Reply::text(format!(
                "{}-dimensional embedding: [{}, ...]",
                vector.len(),
                head.join(", ")
            )))
        }
        _ => chat(&doc, tools).ok_or_else(unexpected),
    }
}

/// vLLM's `{"error": {…}}` / `{"object": "error"}`, FastAPI's `{"detail": …}`, GR00T's
/// `{"error": "…", "field": …}`.
pub fn error_message(doc: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match &doc["error"] {
        Value::Object(e) => {
            return Some(text(
                e.get("message")
                    .filter(|m| is_truthy(m))
                    .unwrap_or(&doc["error"]),
            ));
        }
        e if is_truthy(e) => return Some(text(e)),
        _ => {}
    }
    if doc["object"] == "error" {
        return Some(text(
            doc.get("message").filter(|m| is_truthy(m)).unwrap_or(doc),
        ));
    }
    doc.get("detail").map(text)
}

/// Python's truth value of a JSON value (what `x or y` tests).
fn is_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn chat(doc: &Value, tools: bool) -> Option<Reply> {
    let message = doc["choices"][0]["message"].as_object()?;
    let none = Vec::new();
    let calls = match message.get("tool_calls") {
        Some(Value::Array(calls)) => calls,
        Some(Value::Null) | None => &none,
        Some(_) => return None,
    };
    let mut lines = Vec::new();
    for call in calls {
        let name = call["function"]["name"].as_str()?;
        let args = match &call["function"]["arguments"] {
            Value::String(s) => s.clone(),
            Value::Null => return None,
            other => other.to_string(),
        };
        lines.push(format!("tool call: {name}({args})"));
    }
    // A reasoning model may answer in its reasoning field alone.
    let content = ["content", "reasoning_content", "reasoning"]
        .iter()
        .filter_map(|k| message.get(*k))
        .find(|v| is_truthy(v));
    match content {
        Some(Value::String(s)) => lines.push(s.trim().to_owned()),
        Some(_) => return None,
        None => {}
    }
    Some(Reply {
        text: lines.join("\n"),
        ok: !calls.is_empty() || !tools,
        image: None,
    })
}

fn image(doc: &Value) -> Option<Result<Reply, String>> {
    // tt-inference-server's media server answers {"images": [b64]}; OpenAI answers
    // {"data": [{"b64_json": …} | {"url": …}]}.
    let b64 = match doc.get("images").filter(|v| is_truthy(v)) {
        Some(images) => images[0].as_str()?,
        None => {
            let item = &doc["data"][0];
            match item.get("b64_json").filter(|v| is_truthy(v)) {
                Some(b) => b.as_str()?,
                None => {
                    let url = item["url"].as_str()?;
                    return Some(Ok(Reply::text(format!("image url: {url}"))));
                }
            }
        }
    };
    Some(match decode_base64(b64) {
        Some(bytes) => Ok(Reply {
            text: String::new(),
            ok: true,
            image: Some(bytes),
        }),
        None => Err("the image in the reply is not base64".to_owned()),
    })
}

/// Standard base64 with its canonical `=` padding, as the image servers send it; `None` for
/// anything else (no line breaks, no missing padding, no stray bits in the last digit).
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// The file suffix for a generated image: JPEG by its magic, else PNG.
pub fn image_suffix(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(&[0xff, 0xd8]) {
        ".jpg"
    } else {
        ".png"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base64_decodes_with_its_padding_and_nothing_else() {
        assert_eq!(decode_base64("").unwrap(), b"");
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64("aA==").unwrap(), b"h");
        assert_eq!(decode_base64("aGV5").unwrap(), b"hey");
        assert_eq!(decode_base64("+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        for bad in ["aGk", "aG=k", "a===", "aB==", "aA==aGV5", "aGk!", "aGk=\n"] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
        }
    }

    fn read_json(task: Task, v: Value, tools: bool) -> Result<Reply, String> {
        read(task, &v.to_string(), tools)
    }

    #[test]
    fn chat_answers_and_tool_calls() {
        let r = read_json(
            Task::TextGeneration,
            json!({"choices": [{"message": {"content": "  Hello!\n"}}]}),
            false,
        )
        .unwrap();
        assert_eq!((r.text.as_str(), r.ok), ("Hello!", true));
        let asked = json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}}]});
        let r = read_json(Task::TextGeneration, asked, true).unwrap();
        assert_eq!(
            (r.text.as_str(), r.ok),
            ("tool call: get_weather({\"city\": \"Paris\"})", true)
        );
        let prose = json!({"choices": [{"message": {"content": "It is sunny."}}]});
        let r = read_json(Task::TextGeneration, prose, true).unwrap();
        assert_eq!((r.text.as_str(), r.ok), ("It is sunny.", false));
        let reasoning =
            json!({"choices": [{"message": {"content": "", "reasoning_content": "hm"}}]});
        assert_eq!(
            read_json(Task::ImageTextToText, reasoning, false)
                .unwrap()
                .text,
            "hm"
        );
    }

    #[test]
    fn errors_are_the_servers_words() {
        let cases = [
            (json!({"error": {"message": "bad model"}}), "bad model"),
            (
                json!({"object": "error", "message": "too long"}),
                "too long",
            ),
            (json!({"detail": "Not Found"}), "Not Found"),
            (
                json!({"error": "missing field", "field": "state"}),
                "missing field",
            ),
        ];
        for (doc, want) in cases {
            assert_eq!(
                read_json(Task::TextGeneration, doc, false),
                Err(want.into())
            );
        }
        assert_eq!(
            read(Task::TextGeneration, " \n", false),
            Err("empty reply".into())
        );
        assert_eq!(
            read(Task::TextGeneration, "Internal Server Error", false),
            Err("Internal Server Error".into())
        );
        let e = read_json(Task::FeatureExtraction, json!({"choices": []}), false).unwrap_err();
        assert!(
            e.starts_with("unexpected feature-extraction reply: {"),
            "{e}"
        );
    }

    #[test]
    fn embeddings_and_images() {
        let r = read_json(
            Task::FeatureExtraction,
            json!({"data": [{"embedding": [0.1, -0.25, 1, 2, 3]}]}),
            false,
        )
        .unwrap();
        assert_eq!(
            r.text,
            "5-dimensional embedding: [0.1000, -0.2500, 1.0000, 2.0000, ...]"
        );
        // A 2×1 PNG and its base64, as an image server sends it.
        let b64 = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAAEElEQVR4nGP4z8DAwMDAAAAJ/QH/Dp5lKAAAAABJRU5ErkJggg==";
        let png = decode_base64(b64).unwrap();
        assert_eq!(png.len(), 73);
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.ends_with(b"IEND\xaeB`\x82"));
        for doc in [
            json!({"images": [b64]}),
            json!({"data": [{"b64_json": b64}]}),
        ] {
            let r = read_json(Task::TextToImage, doc, false).unwrap();
            assert_eq!(r.image.as_deref(), Some(png.as_slice()));
        }
        let r = read_json(
            Task::TextToImage,
            json!({"data": [{"url": "http://x/1.png"}]}),
            false,
        )
        .unwrap();
        assert_eq!(r.text, "image url: http://x/1.png");
        assert_eq!(image_suffix(&png), ".png");
        assert_eq!(
            read_json(Task::TextToImage, json!({"images": ["not base64!"]}), false),
            Err("the image in the reply is not base64".into())
        );
        assert_eq!(image_suffix(&[0xff, 0xd8, 0xff]), ".jpg");
    }
}
