//! The health-only tasks (speech, video, classification): `curl` has no request for them, so
//! it checks that the server is up, as the original does. The route is the package's declared
//! health path when the package that answers is known, else the first of `/health` (vLLM, our
//! servers) and `/v1/health` (the media servers) that is not a 404.

use super::Outcome;
use crate::event::Event;
use crate::{LocalError, Progress, openai};

/// The routes asked when no package names one.
pub(super) const DEFAULT_PATHS: &[&str] = &["/health", "/v1/health"];

/// `--print`: the check as one curl.
pub(super) fn render(base: &str, paths: &[String]) -> String {
    openai::render_curl(&[
        "curl".to_owned(),
        "-sS".to_owned(),
        format!("{}{}", base.trim_end_matches('/'), paths[0]),
    ])
}

/// Asks `paths` in turn: [`Outcome::Healthy`] for the first that answers 2xx, a refusal for
/// a server that answers none of them, or not yet.
pub(super) async fn check(
    task: &str,
    base: &str,
    paths: &[String],
    progress: &dyn Progress,
) -> Result<Outcome, LocalError> {
    let root = base.trim_end_matches('/');
    for path in paths {
        let Some(reply) = openai::get(base, path).await else {
            return Err(super::nothing_serving(base));
        };
        if reply.status == 404 {
            continue;
        }
        let body = String::from_utf8_lossy(&reply.body).trim().to_owned();
        if !(200..300).contains(&reply.status) {
            return Err(LocalError::refused(
                "--base-url",
                format!(
                    "{root}{path} answers {}{}: the server is not ready (`tt-model logs <target> -f`).",
                    reply.status,
                    if body.is_empty() {
                        String::new()
                    } else {
                        format!(" ({body})")
                    }
                ),
            ));
        }
        progress.emit(Event::skipped(
            format!(
                "{task}: `tt-model curl` has no request for this task, so it checked the server is up"
            ),
            None,
        ));
        return Ok(Outcome::Healthy {
            url: format!("{root}{path}"),
            status: reply.status,
            body,
        });
    }
    Err(LocalError::refused(
        "--base-url",
        format!(
            "{base} has no health route ({} answer 404).",
            paths.join(", ")
        ),
    ))
}
