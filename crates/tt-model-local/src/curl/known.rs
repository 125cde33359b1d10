//! The packages this machine knows, as `curl` needs them: which one answers at the server
//! (its task comes from its card), and why a chat request would miss, when it would (the
//! original's refusal of a pulled package whose kind has no chat API, and ours of any server
//! without a chat route, naming the routes it does answer, probed, not guessed).

use tt_model_manifest::types::Kind;

use crate::package::Package;
use crate::{Local, installed, openai, target};

/// A pulled or staged package this machine knows, as the task and the refusal need it.
pub(super) struct Known {
    pub id: String,
    pub name: String,
    pub kind: Kind,
    pub weights: Option<String>,
    /// The card's `pipeline_tag`, else the kind's default (`text-generation` for vLLM).
    pub pipeline_tag: Option<String>,
    pub health_path: String,
}

/// Every installed package that loads.
pub(super) fn packages(local: &Local) -> Vec<Known> {
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
pub(super) fn answering<'k>(known: &'k [Known], served: &[String]) -> Option<&'k Known> {
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
pub(super) async fn why_not_chat(
    local: &Local,
    known: &[Known],
    served: &[String],
    base: &str,
    ask_server: bool,
) -> Option<String> {
    if let Some(k) = non_chat(known, served) {
        let routes = openai::routes(base).await;
        let card = if target::split_repo(&k.id).is_some() {
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
        let chat = openai::get(base, openai::CHAT_PATH).await;
        if chat.as_ref().is_some_and(|r| r.status == 404) {
            let routes = openai::routes(base).await;
            return Some(format!(
                "{base} has no chat completions route ({} answers 404), so it is not an OpenAI chat server and `tt-model curl` cannot talk to it.{}",
                openai::CHAT_PATH,
                routes_lines(base, &routes)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
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

    #[test]
    fn the_routes_it_answers_and_one_to_try() {
        assert_eq!(routes_lines("http://h:1", &[]), "");
        assert_eq!(
            routes_lines("http://h:1", &s(&["POST /predict", "GET /health"])),
            "\n  It answers: POST /predict, GET /health\n  → try:  curl http://h:1/health"
        );
    }
}
