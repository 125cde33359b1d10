//! `tt-model curl`'s use case: one request to the served model, the one its task calls for
//! (see [`task`]), sent by the real `curl` and its answer read as text; or with `print` the
//! command itself, for a doc or a bug report.
//!
//! As the original: the model id comes from the server's `GET /v1/models`, else from the one
//! installed package's weights (so `print` works before the server is up); a pulled package
//! whose kind has no chat API is refused when it is what answers and no task says otherwise.
//! Beyond the original, any server without a chat route is refused too (not only a pulled one),
//! naming the routes it does answer, probed, not guessed; and a GR00T server (it answers
//! `GET /demo` with a request) gets the `robotics` probe instead.
//!
//! The choices it makes on the caller's behalf (a task from a card, a model id) are reported
//! as [`Event::Skipped`]; every refusal is a [`LocalError::Refused`] that says what to run.

mod gr00t;
mod health;
mod known;
mod reply;
mod send;
pub mod task;

use std::time::Duration;

use serde_json::Value;

use self::gr00t::Demo;
use self::send::Sent;
pub use self::task::Task;
use crate::event::Event;
use crate::openai::{self, DEFAULT_BASE_URL};
use crate::{Local, LocalError, Progress};

/// What the caller asks `curl` for, as given on its command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct CurlRequest<'a> {
    /// The server root [default: [`DEFAULT_BASE_URL`]].
    pub base_url: Option<&'a str>,
    /// The prompt (robotics: the instruction) [default: the task's own].
    pub prompt: Option<&'a str>,
    /// The task the caller names [default: the served package's card, else text-generation].
    pub task: Option<Task>,
    /// The model id to name in the request [default: the server's, else the installed one's].
    pub model: Option<&'a str>,
    /// Offer a chat model the weather tool and ask for a call to it.
    pub tools: bool,
    /// Only say the command ([`Outcome::Command`]); send nothing.
    pub print: bool,
    /// More request fields, `--key value` / `--key=value` / `--flag` as given.
    pub fields: &'a [String],
}

/// How the request ended.
#[derive(Debug)]
pub enum Outcome {
    /// `print`: the command, to paste.
    Command(String),
    /// A health-only task: `url` answered `status` with `body`.
    Healthy {
        /// The health route asked.
        url: String,
        /// Its 2xx status.
        status: u16,
        /// Its body, trimmed.
        body: String,
    },
    /// The model answered.
    Answer(Answer),
    /// A streamed answer went to the terminal as it came.
    Streamed,
    /// curl failed, having said why on stderr: its exit code (128 + the signal that killed it).
    CurlFailed(u8),
    /// No answer within the task's timeout; curl was stopped.
    TimedOut(TimedOut),
}

/// A request that got no answer in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOut {
    /// The route asked.
    pub url: String,
    /// How long it was given.
    pub after: Duration,
}

impl TimedOut {
    /// curl's own exit code for it ("operation timed out"), which `tt-model curl` exits with.
    pub const EXIT_CODE: u8 = send::TIMED_OUT;
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no answer from {} within {} s (is the server still loading? `tt-model logs <target> -f`)",
            self.url,
            self.after.as_secs()
        )
    }
}

/// The model's answer, read the way the task reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What to print (empty for an image alone).
    pub text: String,
    /// A generated image, for the caller to save where the user can open it.
    pub image: Option<Image>,
    /// The request asked for a tool call (`tools`) and the answer has none.
    pub tool_call_missing: bool,
}

/// A generated image's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The image file.
    pub bytes: Vec<u8>,
    /// Its file suffix by its magic: `.jpg`, else `.png`.
    pub suffix: &'static str,
}

impl Answer {
    fn text(text: String) -> Self {
        Answer {
            text,
            image: None,
            tool_call_missing: false,
        }
    }

    /// An answer, but not the one asked for: the refusal to report once it is shown.
    pub fn check(&self) -> Result<(), LocalError> {
        if self.tool_call_missing {
            return Err(LocalError::refused(
                "--tools",
                "asked for a tool call (get_weather) and the answer has none: the server may not enable tool calling (vLLM: --enable-auto-tool-choice --tool-call-parser <parser>)",
            ));
        }
        Ok(())
    }
}

/// Runs `tt-model curl`: probes the server, chooses the task and the model, and sends the
/// request (or, with `print`, says it).
pub async fn curl(
    local: &Local,
    req: &CurlRequest<'_>,
    progress: &dyn Progress,
) -> Result<Outcome, LocalError> {
    let params = openai::parse_extra_params(req.fields)?;
    let base = req.base_url.unwrap_or(DEFAULT_BASE_URL);
    // One probe, used twice: it names the model and says whether anything listens.
    let probe = openai::get(base, "/v1/models").await;
    let served = probe.as_ref().map(openai::model_ids).unwrap_or_default();
    let known = known::packages(local);
    let answers = known::answering(&known, &served);

    // The task: the caller's, else the card of the package that answers. A named task is the
    // caller's word for what the server does, so the chat refusals below do not apply.
    let mut chosen = req.task.map(|t| (t, "--task")).or_else(|| {
        let tag = answers.and_then(|k| k.pipeline_tag.as_deref());
        tag.and_then(Task::parse).map(|t| (t, "the package's card"))
    });
    let mut demo = None;
    if chosen.is_none() && req.model.is_none() {
        let ask_server = probe.is_some() && !req.print;
        if let Some(why) = known::why_not_chat(local, &known, &served, base, ask_server).await {
            // A GR00T server has no chat, and a request of its own: its demo observation.
            let d = match probe {
                Some(_) => gr00t::demo(base).await,
                None => Demo::Nothing,
            };
            if !matches!(d, Demo::Request(_)) {
                return Err(LocalError::refused("--base-url", why));
            }
            demo = Some(d);
            chosen = Some((Task::Robotics, "the server's /demo"));
        }
    }
    let (task, source) = chosen.unwrap_or((Task::TextGeneration, "default"));
    if task != Task::TextGeneration && source != "--task" {
        progress.emit(Event::skipped(
            format!("task {} from {source}", task.name()),
            None,
        ));
    }
    if req.tools && !task.is_chat() {
        progress.emit(Event::skipped(
            format!(
                "--tools is for chat models; {} sends no chat, so it is left out",
                task.name()
            ),
            None,
        ));
    }
    match task {
        Task::HealthOnly(name) => {
            let paths: Vec<String> = match answers {
                Some(k) => vec![k.health_path.clone()],
                None => health::DEFAULT_PATHS
                    .iter()
                    .map(|p| p.to_string())
                    .collect(),
            };
            if req.print {
                return Ok(Outcome::Command(health::render(base, &paths)));
            }
            return health::check(name, base, &paths, progress).await;
        }
        Task::Robotics => {
            let overrides = gr00t::overrides(req.prompt, &params);
            if req.print {
                return Ok(Outcome::Command(gr00t::render(base, &overrides)));
            }
            return gr00t::predict(base, demo, &overrides).await;
        }
        _ => {}
    }

    let installed: Vec<&known::Known> = known.iter().filter(|k| k.weights.is_some()).collect();
    let (model, model_source) = match (req.model, served.first()) {
        (Some(m), _) => (m.to_owned(), "--model"),
        (None, Some(s)) => (s.clone(), "the running server"),
        (None, None) if installed.len() == 1 => (
            installed[0].weights.clone().unwrap_or_default(),
            "the installed package",
        ),
        (None, None) => {
            let have = match installed.len() {
                0 => "no package is installed".to_string(),
                n => format!("{n} packages are installed"),
            };
            return Err(LocalError::refused(
                "--model",
                format!(
                    "Can't tell which model to ask for: nothing is serving at {base} and {have}. Start it with `tt-model serve <id>`, or pass --model <hf-id>."
                ),
            ));
        }
    };
    let prompt = req.prompt.unwrap_or(task.default_prompt(req.tools));
    let request = task::build(task, &model, prompt, req.tools, &params);
    let argv = openai::curl_argv(
        base.trim_end_matches('/'),
        request.path,
        &openai::python_json(&request.body),
    );
    if req.print {
        if model_source != "--model" {
            progress.emit(Event::skipped(
                format!("model id from {model_source}: {model}"),
                None,
            ));
        }
        return Ok(Outcome::Command(openai::render_curl(&argv)));
    }
    if let Some(r) = probe.as_ref().filter(|_| served.is_empty()) {
        return Err(LocalError::refused(
            "--base-url",
            format!(
                "{base} answers {} to GET /v1/models, with no model listed (still loading? `tt-model logs <target> -f`). Re-run once it is ready, or use --print to just see the request.",
                r.status
            ),
        ));
    }
    if served.is_empty() {
        return Err(nothing_serving(base));
    }
    // A streamed answer is server-sent events, for the terminal as they come.
    let stream = params
        .iter()
        .any(|(k, v)| k == "stream" && *v == Value::Bool(true));
    let raw = match send::run(&argv, None, !stream, request.timeout).await? {
        Sent::Answered(_) if stream => return Ok(Outcome::Streamed),
        Sent::Answered(raw) => raw,
        Sent::Failed(code) => return Ok(Outcome::CurlFailed(code)),
        Sent::TimedOut => {
            return Ok(Outcome::TimedOut(TimedOut {
                url: argv[2].clone(),
                after: request.timeout,
            }));
        }
    };
    let reply = reply::read(task, &String::from_utf8_lossy(&raw), req.tools)
        .map_err(|e| LocalError::refused("--base-url", format!("{}: {e}", argv[2])))?;
    Ok(Outcome::Answer(Answer {
        text: reply.text,
        image: reply.image.map(|bytes| Image {
            suffix: reply::image_suffix(&bytes),
            bytes,
        }),
        tool_call_missing: !reply.ok,
    }))
}

/// Nothing answers at `base`: start it, or just print the request.
fn nothing_serving(base: &str) -> LocalError {
    LocalError::refused(
        "--base-url",
        format!(
            "Nothing is serving at {base}. Start it with `tt-model serve <id>`, or use --print to just see the request."
        ),
    )
}
