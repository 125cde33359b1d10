//! `tt-model curl [prompt] [--task T] [--tools] [--print] [--model ID] [--base-url URL]
//! [--key value …]`: one request to the served model, the one its task calls for (see
//! [`task`]), sent by the real `curl` and its answer printed as text; or with `--print` the
//! command itself, for a doc or a bug report.
//!
//! As the original: the model id comes from the server's `GET /v1/models`, else from the one
//! installed package's weights (so `--print` works before the server is up); a pulled package
//! whose kind has no chat API is refused when it is what answers and no task says otherwise.
//! Beyond the original, any server without a chat route is refused too (not only a pulled one),
//! naming the routes it does answer, probed, not guessed; and a GR00T server (it answers
//! `GET /demo` with a request) gets the `robotics` probe instead.

mod gr00t;
mod health;
mod png;
mod reply;
mod send;
mod task;

use serde_json::Value;
use tt_model_local::openai::{self, DEFAULT_BASE_URL};
use tt_model_local::package::Package;
use tt_model_local::{Local, installed};
use tt_model_manifest::types::Kind;

use self::gr00t::Demo;
use self::send::Sent;
use self::task::Task;
use crate::args::CurlArgs;
use crate::printer::Printer;
use crate::{ExitStatus, UsageError, UserError};

/// The options `curl` owns, wherever clap left them (after an unknown `--key`, clap hands the
/// rest of the line over as fields).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Words {
    pub prompt: Option<String>,
    pub print: bool,
    pub tools: bool,
    pub task: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub fields: Vec<String>,
}

/// Sort the prompt and the fields clap could not tell apart: a leading word that is not a
/// `--key` is the prompt; `--print`, `--tools`, `--task`, `--model`, `--base-url` are taken out
/// of the fields.
pub(crate) fn words(prompt: Option<String>, fields: &[String]) -> Words {
    let mut w = Words::default();
    let mut all: Vec<String> = prompt.into_iter().chain(fields.iter().cloned()).collect();
    if all.first().is_some_and(|f| !f.starts_with("--")) {
        w.prompt = Some(all.remove(0));
    }
    let mut i = 0;
    while i < all.len() {
        let t = all[i].as_str();
        let slot = match t.split_once('=').map_or(t, |(k, _)| k) {
            "--task" => Some(&mut w.task),
            "--model" => Some(&mut w.model),
            "--base-url" => Some(&mut w.base_url),
            _ => None,
        };
        match (t, slot) {
            ("--print", _) => w.print = true,
            ("--tools", _) => w.tools = true,
            (_, Some(slot)) => match t.split_once('=') {
                Some((_, v)) => *slot = Some(v.to_owned()),
                None => {
                    *slot = all.get(i + 1).cloned();
                    i += 1;
                }
            },
            _ => w.fields.push(all[i].clone()),
        }
        i += 1;
    }
    w
}

/// A pulled or staged package this machine knows, as the task and the refusal need it.
struct Known {
    id: String,
    name: String,
    kind: Kind,
    weights: Option<String>,
    /// The card's `pipeline_tag`, else the kind's default (`text-generation` for vLLM).
    pipeline_tag: Option<String>,
    health_path: String,
}

fn known_packages(local: &Local) -> Vec<Known> {
    installed::all(local, &mut |_| {})
        .into_iter()
        .filter_map(|e| {
            let pkg = Package::load(&e.manifest).ok()?;
            let c = &pkg.wire().container;
            Some(Known {
                id: e.repo_id.clone(),
                name: pkg.name.clone(),
                kind: c.kind,
                weights: pkg.weights.as_ref().map(|w| w.repo_id.clone()),
                pipeline_tag: c
                    .card
                    .as_ref()
                    .and_then(|card| card.pipeline_tag.clone())
                    .or_else(|| c.kind.default_pipeline_tag().map(str::to_owned)),
                health_path: pkg.health_path(),
            })
        })
        .collect()
}

/// Whether the server lists `k` (its weights id, or an id naming the package).
fn lists(served: &[String], k: &Known) -> bool {
    served
        .iter()
        .any(|s| Some(s) == k.weights.as_ref() || s.contains(&k.name))
}

/// The package that answers: one the server lists; with nothing listed, the only one known.
fn answering<'k>(known: &'k [Known], served: &[String]) -> Option<&'k Known> {
    if served.is_empty() {
        return (known.len() == 1).then(|| &known[0]);
    }
    known.iter().find(|k| lists(served, k))
}

/// The original's rule for "what answers is not a chat server": a known package without a chat
/// API whose weights id or name the server lists; with nothing listed, the only package this
/// machine knows, when it has no chat API.
fn non_chat<'k>(known: &'k [Known], served: &[String]) -> Option<&'k Known> {
    let mut hits = known.iter().filter(|k| !k.kind.openai_compatible());
    if served.is_empty() {
        return hits.next().filter(|_| known.len() == 1);
    }
    hits.find(|k| lists(served, k))
}

fn routes_lines(base: &str, routes: &[String]) -> String {
    if routes.is_empty() {
        return String::new();
    }
    let mut s = format!("\n  It answers: {}", routes.join(", "));
    if let Some(get) = routes.iter().find_map(|r| r.strip_prefix("GET ")) {
        s.push_str(&format!("\n  → try:  curl {base}{get}"));
    }
    s
}

/// Why a chat request would miss, when it would: a known package without a chat API is what
/// answers, or (`ask_server`) the server answers 404 on the chat route.
fn why_not_chat(
    local: &Local,
    known: &[Known],
    served: &[String],
    base: &str,
    ask_server: bool,
) -> Option<String> {
    let rt = crate::runtime().ok()?;
    if let Some(k) = non_chat(known, served) {
        let routes = rt.block_on(openai::routes(base));
        let card = if tt_model_local::target::split_repo(&k.id).is_some() {
            format!(
                "\n  Its own routes are in its model card:  {}/{}",
                local.hub().endpoint.trim_end_matches('/'),
                k.id
            )
        } else {
            String::new()
        };
        let task = if k.kind == Kind::HttpServer {
            "\n  Name its task if it has one (`tt-model curl --help` lists them), e.g. for GR00T:  tt-model curl --task robotics"
        } else {
            ""
        };
        return Some(format!(
            "{} serves {}, not chat completions, so `tt-model curl` cannot talk to it.{}{card}{task}",
            k.id,
            k.kind,
            routes_lines(base, &routes),
        ));
    }
    // A chat server answers a GET of its POST-only chat route with 405; a server without
    // one answers 404 (a 503 while loading is still a chat server).
    if ask_server {
        let chat = rt.block_on(openai::get(base, openai::CHAT_PATH));
        if chat.as_ref().is_some_and(|r| r.status == 404) {
            let routes = rt.block_on(openai::routes(base));
            return Some(format!(
                "{base} has no chat completions route ({} answers 404), so it is not an OpenAI chat server and `tt-model curl` cannot talk to it.{}",
                openai::CHAT_PATH,
                routes_lines(base, &routes)
            ));
        }
    }
    None
}

/// Runs `tt-model curl`.
pub fn run(args: &CurlArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let w = words(args.prompt.clone(), &args.fields);
    let print = args.print || w.print;
    let tools = args.tools || w.tools;
    let task_flag = match w.task.as_deref().or(args.task.as_deref()) {
        Some(name) => Some(Task::parse(name).ok_or_else(|| UsageError(task::unknown(name)))?),
        None => None,
    };
    let params = openai::parse_extra_params(&w.fields)?;
    let model_flag = w.model.or_else(|| args.model.clone());
    let base = w
        .base_url
        .or_else(|| args.base_url.clone())
        .unwrap_or_else(|| DEFAULT_BASE_URL.into());
    let rt = crate::runtime()?;
    // One probe, used twice: it names the model and says whether anything listens.
    let probe = rt.block_on(openai::get(&base, "/v1/models"));
    let served = probe.as_ref().map(openai::model_ids).unwrap_or_default();
    let known = known_packages(local);
    let answers = answering(&known, &served);

    // The task: --task, else the card of the package that answers. A named task is the
    // caller's word for what the server does, so the chat refusals below do not apply.
    let mut chosen = task_flag.map(|t| (t, "--task")).or_else(|| {
        let tag = answers.and_then(|k| k.pipeline_tag.as_deref());
        tag.and_then(Task::parse).map(|t| (t, "the package's card"))
    });
    let mut demo = None;
    if chosen.is_none() && model_flag.is_none() {
        let ask_server = probe.is_some() && !print;
        if let Some(why) = why_not_chat(local, &known, &served, &base, ask_server) {
            // A GR00T server has no chat, and a request of its own: its demo observation.
            let d = match probe {
                Some(_) => rt.block_on(gr00t::demo(&base)),
                None => Demo::Nothing,
            };
            if !matches!(d, Demo::Request(_)) {
                return Err(UserError(why).into());
            }
            demo = Some(d);
            chosen = Some((Task::Robotics, "the server's /demo"));
        }
    }
    let (task, source) = chosen.unwrap_or((Task::TextGeneration, "default"));
    if task != Task::TextGeneration && source != "--task" {
        printer.skipped(&format!("task {} from {source}", task.name()), None);
    }
    if tools && !task.is_chat() {
        printer.skipped(
            &format!(
                "--tools is for chat models; {} sends no chat, so it is left out",
                task.name()
            ),
            None,
        );
    }
    let root = base.trim_end_matches('/').to_owned();
    match task {
        Task::HealthOnly(name) => {
            let paths: Vec<String> = match answers {
                Some(k) => vec![k.health_path.clone()],
                None => health::DEFAULT_PATHS
                    .iter()
                    .map(|p| p.to_string())
                    .collect(),
            };
            if print {
                printer.out(&health::render(&base, &paths));
                return Ok(ExitStatus::Success);
            }
            return health::check(name, &base, &paths, printer);
        }
        Task::Robotics => {
            let overrides = gr00t::overrides(w.prompt.as_deref(), &params);
            if print {
                printer.out(&gr00t::render(&base, &overrides));
                return Ok(ExitStatus::Success);
            }
            let request = match demo.unwrap_or_else(|| rt.block_on(gr00t::demo(&base))) {
                Demo::Request(r) => r,
                Demo::Nothing => return Err(nothing_serving(&base)),
                Demo::Missing(status, words) => {
                    return Err(UserError(format!(
                        "{root}{} answers {status} ({words}): robotics sends the observation a GR00T server ships as its demo, and this server has none.\n  Send your own:  curl {root}{} -H 'Content-Type: application/json' -d @observation.json",
                        gr00t::DEMO_PATH,
                        gr00t::PREDICT_PATH
                    ))
                    .into());
                }
            };
            let argv = gr00t::predict_argv(&base);
            let url = &argv[2];
            return match send::run(
                &argv,
                Some(gr00t::body(request, &overrides)),
                true,
                gr00t::TIMEOUT,
            )? {
                Sent::Answered(raw) => match gr00t::summary(&raw) {
                    Ok(line) => {
                        printer.out(&line);
                        Ok(ExitStatus::Success)
                    }
                    Err(e) => Err(UserError(format!("{url}: {e}")).into()),
                },
                Sent::Failed(code) => Ok(ExitStatus::Child(code)),
                Sent::TimedOut => Ok(timed_out(printer, url, gr00t::TIMEOUT)),
            };
        }
        _ => {}
    }

    let installed_ids: Vec<&Known> = known.iter().filter(|k| k.weights.is_some()).collect();
    let (model, model_source) = match (&model_flag, served.first()) {
        (Some(m), _) => (m.clone(), "--model"),
        (None, Some(s)) => (s.clone(), "the running server"),
        (None, None) if installed_ids.len() == 1 => (
            installed_ids[0].weights.clone().unwrap_or_default(),
            "the installed package",
        ),
        (None, None) => {
            let have = match installed_ids.len() {
                0 => "no package is installed".to_string(),
                n => format!("{n} packages are installed"),
            };
            return Err(UserError(format!(
                "Can't tell which model to ask for: nothing is serving at {base} and {have}. Start it with `tt-model serve <id>`, or pass --model <hf-id>."
            ))
            .into());
        }
    };
    let prompt = w.prompt.as_deref().unwrap_or(task.default_prompt(tools));
    let request = task::build(task, &model, prompt, tools, &params);
    let argv = tt_model_local::openai::curl_argv(
        &root,
        request.path,
        &tt_model_local::openai::python_json(&request.body),
    );
    if print {
        if model_source != "--model" {
            // stderr: stdout stays one pasteable command.
            printer.skipped(&format!("model id from {model_source}: {model}"), None);
        }
        printer.out(&openai::render_curl(&argv));
        return Ok(ExitStatus::Success);
    }
    if let Some(r) = probe.as_ref().filter(|_| served.is_empty()) {
        return Err(UserError(format!(
            "{base} answers {} to GET /v1/models, with no model listed (still loading? `tt-model logs <target> -f`). Re-run once it is ready, or use --print to just see the request.",
            r.status
        ))
        .into());
    }
    if served.is_empty() {
        return Err(nothing_serving(&base));
    }
    // A streamed answer is server-sent events, for the terminal as they come.
    let stream = params
        .iter()
        .any(|(k, v)| k == "stream" && *v == Value::Bool(true));
    let raw = match send::run(&argv, None, !stream, request.timeout)? {
        Sent::Answered(_) if stream => return Ok(ExitStatus::Success),
        Sent::Answered(raw) => raw,
        Sent::Failed(code) => return Ok(ExitStatus::Child(code)),
        Sent::TimedOut => return Ok(timed_out(printer, &argv[2], request.timeout)),
    };
    let answer = reply::read(task, &String::from_utf8_lossy(&raw), tools)
        .map_err(|e| UserError(format!("{}: {e}", argv[2])))?;
    if let Some(image) = &answer.image {
        let path = std::env::temp_dir().join(format!(
            "tt-model-curl-{}-{}{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            reply::image_suffix(image)
        ));
        std::fs::write(&path, image)
            .map_err(|e| anyhow::anyhow!("cannot write the image to {}: {e}", path.display()))?;
        printer.out(&format!(
            "image: {} ({} bytes)",
            path.display(),
            image.len()
        ));
    }
    if !answer.text.is_empty() {
        printer.out(&answer.text);
    }
    if !answer.ok {
        return Err(UserError(
            "asked for a tool call (get_weather) and the answer has none: the server may not enable tool calling (vLLM: --enable-auto-tool-choice --tool-call-parser <parser>)".into(),
        )
        .into());
    }
    Ok(ExitStatus::Success)
}

/// `curl -sS <root><path> -H 'Content-Type: application/json' -d <body>`: the original's
/// command, on the task's route.
fn nothing_serving(base: &str) -> anyhow::Error {
    UserError(format!(
        "Nothing is serving at {base}. Start it with `tt-model serve <id>`, or use --print to just see the request."
    ))
    .into()
}

/// No answer within the task's timeout: said once, and curl's own code for it.
fn timed_out(printer: &Printer, url: &str, timeout: std::time::Duration) -> ExitStatus {
    printer.error(&format!(
        "no answer from {url} within {} s (is the server still loading? `tt-model logs <target> -f`)",
        timeout.as_secs()
    ));
    ExitStatus::Child(send::TIMED_OUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn reserved_options_are_found_wherever_clap_left_them() {
        let w = words(
            None,
            &s(&[
                "--max-tokens",
                "8",
                "--print",
                "--model=m",
                "--base-url",
                "http://h:1",
            ]),
        );
        assert_eq!(
            w,
            Words {
                prompt: None,
                print: true,
                model: Some("m".into()),
                base_url: Some("http://h:1".into()),
                fields: s(&["--max-tokens", "8"]),
                ..Words::default()
            }
        );
        let w = words(
            Some("hi".into()),
            &s(&[
                "--seed",
                "1",
                "--task",
                "text-to-image",
                "--tools",
                "--stop=x",
            ]),
        );
        assert_eq!(
            w,
            Words {
                prompt: Some("hi".into()),
                tools: true,
                task: Some("text-to-image".into()),
                fields: s(&["--seed", "1", "--stop=x"]),
                ..Words::default()
            }
        );
        assert_eq!(
            words(None, &s(&["--task=robotics"])).task.as_deref(),
            Some("robotics")
        );
        let w = words(Some("--temperature".into()), &s(&["0.5"]));
        assert_eq!((w.prompt, w.fields), (None, s(&["--temperature", "0.5"])));
        let w = words(Some("hi".into()), &[]);
        assert_eq!(w.prompt.as_deref(), Some("hi"));
    }

    #[test]
    fn a_known_package_without_chat_is_what_answers() {
        let k = |id: &str, kind, w: &str| Known {
            id: id.into(),
            name: id.split('/').nth(1).unwrap().into(),
            kind,
            weights: Some(w.into()),
            pipeline_tag: None,
            health_path: "/health".into(),
        };
        let known = vec![
            k("acme/gr00t", Kind::HttpServer, "nvidia/gr00t"),
            k("acme/llama", Kind::VllmPlugin, "meta/llama"),
        ];
        let hit = non_chat(&known, &s(&["nvidia/gr00t"])).unwrap();
        assert_eq!(hit.id, "acme/gr00t");
        assert!(non_chat(&known, &s(&["meta/llama"])).is_none());
        assert!(non_chat(&known, &[]).is_none(), "two known: cannot tell");
        assert!(non_chat(&known[..1], &[]).is_some(), "the only one known");
        assert_eq!(
            answering(&known, &s(&["meta/llama"])).unwrap().id,
            "acme/llama"
        );
        assert!(answering(&known, &s(&["other/x"])).is_none());
        assert!(answering(&known, &[]).is_none(), "two known: cannot tell");
    }
}
