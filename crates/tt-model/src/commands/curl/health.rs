//! The health-only tasks (speech, video, classification): `curl` has no request for them, so
//! it checks that the server is up, as the original does. The route is the package's declared
//! health path when the package that answers is known, else the first of `/health` (vLLM, our
//! servers) and `/v1/health` (the media servers) that is not a 404.

use tt_model_local::openai;

use crate::printer::Printer;
use crate::{ExitStatus, UserError};

/// The routes asked when no package names one.
pub const DEFAULT_PATHS: &[&str] = &["/health", "/v1/health"];

/// `--print`: the check as one curl.
pub fn render(base: &str, paths: &[String]) -> String {
    openai::render_curl(&[
        "curl".to_owned(),
        "-sS".to_owned(),
        format!("{}{}", base.trim_end_matches('/'), paths[0]),
    ])
}

/// Asks `paths` in turn; 0 when one answers 2xx (its body on stdout), else a user error.
pub fn check(
    task: &str,
    base: &str,
    paths: &[String],
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let rt = crate::runtime()?;
    let root = base.trim_end_matches('/');
    for path in paths {
        let Some(reply) = rt.block_on(openai::get(base, path)) else {
            return Err(UserError(format!(
                "Nothing is serving at {base}. Start it with `tt-model serve <id>`, or use --print to just see the request."
            ))
            .into());
        };
        if reply.status == 404 {
            continue;
        }
        let body = String::from_utf8_lossy(&reply.body).trim().to_owned();
        if !(200..300).contains(&reply.status) {
            return Err(UserError(format!(
                "{root}{path} answers {}{}: the server is not ready (`tt-model logs <target> -f`).",
                reply.status,
                if body.is_empty() {
                    String::new()
                } else {
                    format!(" ({body})")
                }
            ))
            .into());
        }
        printer.skipped(
            &format!(
                "{task}: `tt-model curl` has no request for this task, so it checked the server is up"
            ),
            None,
        );
        if !body.is_empty() {
            printer.out(&body);
        }
        printer.done(&format!("{root}{path} answers {}", reply.status), None);
        return Ok(ExitStatus::Success);
    }
    Err(UserError(format!(
        "{base} has no health route ({} answer 404).",
        paths.join(", ")
    ))
    .into())
}
