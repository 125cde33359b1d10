//! `tt-model curl [prompt] [--print] [--model ID] [--base-url URL] [--key value …]`: one OpenAI
//! chat completion to the served model, sent by the real `curl` (the command exits with curl's
//! code), or with `--print` the command itself, for a doc or a bug report.
//!
//! As the original: the model id comes from the server's `GET /v1/models`, else from the one
//! installed package's weights (so `--print` works before the server is up); a pulled package
//! whose kind has no chat API is refused when it is what answers. Beyond the original, any
//! server without a chat route is refused too (not only a pulled one), and every refusal names
//! the routes the server does answer (GR00T: `POST /predict`, `GET /health`, `GET /info`),
//! probed, not guessed.

use tt_model_local::openai::{self, DEFAULT_BASE_URL, DEFAULT_PROMPT};
use tt_model_local::package::Package;
use tt_model_local::{Local, installed};
use tt_model_manifest::types::Kind;

use crate::args::CurlArgs;
use crate::printer::Printer;
use crate::{ExitStatus, UserError};

/// The options `curl` owns, wherever clap left them (after an unknown `--key`, clap hands the
/// rest of the line over as fields).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Words {
    pub prompt: Option<String>,
    pub print: bool,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub fields: Vec<String>,
}

/// Sort the prompt and the fields clap could not tell apart: a leading word that is not a
/// `--key` is the prompt; `--print`, `--model`, `--base-url` are taken out of the fields.
pub(crate) fn words(prompt: Option<String>, fields: &[String]) -> Words {
    let mut w = Words::default();
    let mut all: Vec<String> = prompt.into_iter().chain(fields.iter().cloned()).collect();
    if all.first().is_some_and(|f| !f.starts_with("--")) {
        w.prompt = Some(all.remove(0));
    }
    let mut i = 0;
    while i < all.len() {
        let t = all[i].as_str();
        let value = |i: usize| all.get(i + 1).cloned();
        match t {
            "--print" => w.print = true,
            "--model" | "--base-url" => {
                let v = value(i);
                i += 1;
                if t == "--model" {
                    w.model = v;
                } else {
                    w.base_url = v;
                }
            }
            _ if t.starts_with("--model=") => w.model = Some(t["--model=".len()..].into()),
            _ if t.starts_with("--base-url=") => {
                w.base_url = Some(t["--base-url=".len()..].into());
            }
            _ => w.fields.push(all[i].clone()),
        }
        i += 1;
    }
    w
}

/// A pulled or staged package this machine knows, as the refusal needs it.
struct Known {
    id: String,
    name: String,
    kind: Kind,
    weights: Option<String>,
}

fn known_packages(local: &Local) -> Vec<Known> {
    installed::all(local, &mut |_| {})
        .into_iter()
        .filter_map(|e| {
            let pkg = Package::load(&e.manifest).ok()?;
            Some(Known {
                id: e.repo_id.clone(),
                name: pkg.name.clone(),
                kind: pkg.wire().container.kind,
                weights: pkg.weights.as_ref().map(|w| w.repo_id.clone()),
            })
        })
        .collect()
}

/// The original's rule for "what answers is not a chat server": a known package without a chat
/// API whose weights id or name the server lists; with nothing listed, the only package this
/// machine knows, when it has no chat API.
fn non_chat<'k>(known: &'k [Known], served: &[String]) -> Option<&'k Known> {
    let hits: Vec<&Known> = known
        .iter()
        .filter(|k| !k.kind.openai_compatible())
        .collect();
    if served.is_empty() {
        return (hits.len() == 1 && known.len() == 1).then(|| hits[0]);
    }
    hits.into_iter().find(|k| {
        served
            .iter()
            .any(|s| Some(s) == k.weights.as_ref() || s.contains(&k.name))
    })
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

/// Runs `tt-model curl`.
pub fn run(args: &CurlArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let w = words(args.prompt.clone(), &args.fields);
    let params = openai::parse_extra_params(&w.fields)?;
    let prompt = w.prompt.as_deref().unwrap_or(DEFAULT_PROMPT);
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
    if model_flag.is_none() {
        if let Some(k) = non_chat(&known, &served) {
            let routes = rt.block_on(openai::routes(&base));
            let card = if tt_model_local::target::split_repo(&k.id).is_some() {
                format!(
                    "\n  Its own routes are in its model card:  {}/{}",
                    local.hub().endpoint.trim_end_matches('/'),
                    k.id
                )
            } else {
                String::new()
            };
            return Err(UserError(format!(
                "{} serves {}, not chat completions, so `tt-model curl` cannot talk to it.{}{card}",
                k.id,
                k.kind,
                routes_lines(&base, &routes),
            ))
            .into());
        }
        // A chat server answers a GET of its POST-only chat route with 405; a server without
        // one answers 404 (a 503 while loading is still a chat server).
        if probe.is_some() && !(args.print || w.print) {
            let chat = rt.block_on(openai::get(&base, openai::CHAT_PATH));
            if chat.as_ref().is_some_and(|r| r.status == 404) {
                let routes = rt.block_on(openai::routes(&base));
                return Err(UserError(format!(
                    "{base} has no chat completions route ({} answers 404), so it is not an OpenAI chat server and `tt-model curl` cannot talk to it.{}",
                    openai::CHAT_PATH,
                    routes_lines(&base, &routes)
                ))
                .into());
            }
        }
    }
    let installed_ids: Vec<&Known> = known.iter().filter(|k| k.weights.is_some()).collect();
    let (model, source) = match (&model_flag, served.first()) {
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
    let body = openai::python_json(&openai::chat_payload(&model, prompt, &params));
    let argv = openai::curl_argv(&base, &body);
    if args.print || w.print {
        if source != "--model" {
            // stderr: stdout stays one pasteable command.
            printer.skipped(&format!("model id from {source}: {model}"), None);
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
        return Err(UserError(format!(
            "Nothing is serving at {base}. Start it with `tt-model serve <id>`, or use --print to just see the request."
        ))
        .into());
    }
    let status = match std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .status()
    {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(UserError(
                "curl is not on PATH. Re-run with --print and paste the command, or install curl."
                    .into(),
            )
            .into());
        }
        Err(e) => return Err(anyhow::anyhow!("cannot run curl: {e}")),
    };
    // curl's own code (a signal-killed curl: 128 + the signal, as a shell reports it).
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    Ok(ExitStatus::Child(u8::try_from(code).unwrap_or(1)))
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
            }
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
    }
}
