//! The request `tt-model curl` sends, chosen by the task the served model performs.
//!
//! Task names are Hugging Face `pipeline_tag`s, the vocabulary a model card already uses, so a
//! caller that knows a model from elsewhere (tt's catalog) can name it with `--task`. The four
//! request tasks, their prompts, routes, timeouts and body shapes, the tool-calling probe and
//! the health-only tasks are the original's (`tt_kernel/probe.py`); `robotics` (the tag GR00T
//! checkpoints carry) is ours: GR00T's `/predict` fed the server's own demo observation.

use std::time::Duration;

use serde_json::{Value, json};

use crate::openai::{self, DEFAULT_MAX_TOKENS, DEFAULT_PROMPT};

/// What `curl` does for the served model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// `POST /v1/chat/completions` with a text message.
    TextGeneration,
    /// `POST /v1/chat/completions` with a text part and the sample PNG as a data URL.
    ImageTextToText,
    /// `POST /v1/images/generations`.
    TextToImage,
    /// `POST /v1/embeddings`.
    FeatureExtraction,
    /// GR00T: `POST /predict` with the observation `GET /demo` ships.
    Robotics,
    /// A task `curl` has no request for: it only asks the health route.
    HealthOnly(&'static str),
}

/// The tasks `curl` sends a real request for, in the original's order.
pub const REQUEST_TASKS: [&str; 4] = [
    "text-generation",
    "image-text-to-text",
    "text-to-image",
    "feature-extraction",
];
/// Tasks a served model can have that `curl` cannot exercise: a health check only.
pub const HEALTH_ONLY_TASKS: [&str; 4] = [
    "automatic-speech-recognition",
    "text-to-speech",
    "text-to-video",
    "image-classification",
];
/// GR00T's pipeline tag: `/predict` with the server's demo observation.
pub const ROBOTICS: &str = "robotics";
/// Every task `--task` takes: the request tasks, robotics, the health-only tasks.
pub const TASKS: [&str; 9] = [
    REQUEST_TASKS[0],
    REQUEST_TASKS[1],
    REQUEST_TASKS[2],
    REQUEST_TASKS[3],
    ROBOTICS,
    HEALTH_ONLY_TASKS[0],
    HEALTH_ONLY_TASKS[1],
    HEALTH_ONLY_TASKS[2],
    HEALTH_ONLY_TASKS[3],
];

/// The picture `image-text-to-text` shows the model: the original's 224×224 PNG, 8-bit RGB,
/// red above blue (small, and its colours are easy to check in the answer), as a data URL. A
/// constant, not drawn at run time: it never changes, and the CLI's unit test and the curl
/// test decode it with independent readers.
pub const SAMPLE_IMAGE_URL: &str = concat!(
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAOAAAADgCAIAAACVT/22AAACvklEQVR4nO3SMRHAMA",
    "DEsPAn3SLIr86gOwHw4POdA8/qC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2CwKI/rC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2",
    "DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC2DoC+DqB4szR26VNlEyAAAAAElFTkSuQmCC",
);

/// The prompt of `--tools` (with `text-generation`): one a weather tool answers.
pub const TOOLS_PROMPT: &str = "What is the weather in Paris right now?";

const CHAT_TIMEOUT: Duration = Duration::from_secs(120);
/// A diffusion pipeline takes minutes on a cold server.
const IMAGE_TIMEOUT: Duration = Duration::from_secs(600);

/// The usage error for a task `--task` does not know, listing the valid ones by what they do.
pub fn unknown(name: &str) -> String {
    format!(
        "invalid value '{name}' for '--task'\n  a request: {}\n  GR00T /predict from the server's /demo: {ROBOTICS}\n  a health check only: {}",
        REQUEST_TASKS.join(", "),
        HEALTH_ONLY_TASKS.join(", ")
    )
}

impl Task {
    /// The task a `pipeline_tag` names; `None` for one `curl` does not know.
    pub fn parse(name: &str) -> Option<Task> {
        Some(match name {
            "text-generation" => Task::TextGeneration,
            "image-text-to-text" => Task::ImageTextToText,
            "text-to-image" => Task::TextToImage,
            "feature-extraction" => Task::FeatureExtraction,
            ROBOTICS => Task::Robotics,
            _ => Task::HealthOnly(HEALTH_ONLY_TASKS.iter().find(|t| **t == name)?),
        })
    }

    /// The `pipeline_tag`.
    pub fn name(self) -> &'static str {
        match self {
            Task::TextGeneration => REQUEST_TASKS[0],
            Task::ImageTextToText => REQUEST_TASKS[1],
            Task::TextToImage => REQUEST_TASKS[2],
            Task::FeatureExtraction => REQUEST_TASKS[3],
            Task::Robotics => ROBOTICS,
            Task::HealthOnly(name) => name,
        }
    }

    /// Whether the request is a chat completion (the only requests `--tools` changes).
    pub fn is_chat(self) -> bool {
        matches!(self, Task::TextGeneration | Task::ImageTextToText)
    }

    /// The prompt sent when none is given.
    pub fn default_prompt(self, tools: bool) -> &'static str {
        match self {
            Task::TextGeneration if tools => TOOLS_PROMPT,
            Task::ImageTextToText => "Which colours are in this image, and where?",
            Task::TextToImage => "A photo of an astronaut riding a horse on the moon",
            Task::FeatureExtraction => "Tenstorrent builds hardware for AI.",
            _ => DEFAULT_PROMPT,
        }
    }
}

/// One request: the route under the server root, the body's fields in order, how long to wait.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `/v1/…`.
    pub path: &'static str,
    /// The body's top-level fields, in order.
    pub body: Vec<(String, Value)>,
    /// How long the answer may take.
    pub timeout: Duration,
}

/// The function `--tools` offers the model.
pub fn weather_tool() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name."}},
                "required": ["city"],
            },
        },
    })
}

/// The request for one of the [`REQUEST_TASKS`]: `model` first, the task's fields, then
/// `params`, which override a field in place or add one at the end.
pub fn build(
    task: Task,
    model: &str,
    prompt: &str,
    tools: bool,
    params: &[(String, Value)],
) -> Request {
    let mut body = vec![("model".to_owned(), Value::from(model))];
    let (path, timeout) = match task {
        Task::TextToImage => {
            body.push(("prompt".into(), Value::from(prompt)));
            ("/v1/images/generations", IMAGE_TIMEOUT)
        }
        Task::FeatureExtraction => {
            body.push(("input".into(), Value::from(prompt)));
            ("/v1/embeddings", CHAT_TIMEOUT)
        }
        _ => {
            let content = if task == Task::ImageTextToText {
                json!([
                    {"type": "text", "text": prompt},
                    {"type": "image_url", "image_url": {"url": SAMPLE_IMAGE_URL}},
                ])
            } else {
                Value::from(prompt)
            };
            body.push((
                "messages".into(),
                json!([{"role": "user", "content": content}]),
            ));
            body.push(("max_tokens".into(), Value::from(DEFAULT_MAX_TOKENS)));
            if tools {
                body.push(("tools".into(), json!([weather_tool()])));
            }
            (openai::CHAT_PATH, CHAT_TIMEOUT)
        }
    };
    openai::apply_params(&mut body, params);
    Request {
        path,
        body,
        timeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::python_json as dumps;

    #[test]
    fn every_name_parses_back_to_itself() {
        for name in TASKS {
            assert_eq!(Task::parse(name).map(Task::name), Some(name));
        }
        assert_eq!(Task::parse("chat"), None);

        let e = unknown("chat");
        for name in TASKS {
            assert!(e.contains(name), "{name}: {e}");
        }
    }

    #[test]
    fn bodies_have_the_originals_shapes() {
        let r = build(Task::TextGeneration, "m", "hi", false, &[]);
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(
            dumps(&r.body),
            r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}"#
        );
        let p = vec![
            ("max_tokens".to_string(), json!(8)),
            ("seed".into(), json!(1)),
        ];
        let r = build(Task::TextGeneration, "m", TOOLS_PROMPT, true, &p);
        assert_eq!(
            dumps(&r.body),
            r#"{"model": "m", "messages": [{"role": "user", "content": "What is the weather in Paris right now?"}], "max_tokens": 8, "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name."}}, "required": ["city"]}}}], "seed": 1}"#
        );
        let r = build(Task::TextToImage, "m", "a cat", true, &[]);
        assert_eq!(
            (r.path, dumps(&r.body), r.timeout.as_secs()),
            (
                "/v1/images/generations",
                r#"{"model": "m", "prompt": "a cat"}"#.into(),
                600
            )
        );
        let r = build(Task::FeatureExtraction, "m", "x", false, &[]);
        assert_eq!(
            (r.path, dumps(&r.body), r.timeout.as_secs()),
            (
                "/v1/embeddings",
                r#"{"model": "m", "input": "x"}"#.into(),
                120
            )
        );
        let r = build(Task::ImageTextToText, "m", "what?", false, &[]);
        let j = dumps(&r.body);
        assert!(
            j.starts_with(r#"{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "what?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"#),
            "{j}"
        );
        assert!(j.ends_with(r#""}}]}], "max_tokens": 64}"#), "{j}");
    }
}
