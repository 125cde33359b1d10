//! Image builds: a context byte stream in, our own [`BuildEvent`]s out, an image id back.
//!
//! Packages are built by the engine's classic builder (`version=1`) through bollard: it
//! streams plain text, keys its cache on content (mtimes do not matter) and accepts a base
//! pinned by local image id (`FROM sha256:…`, which BuildKit resolves against a registry).
//! The price is no `RUN --mount=type=cache`, which the generated Dockerfiles therefore do not
//! use yet; [`crate::buildkit`] is the same request through BuildKit, with cache mounts, for
//! the tt-metal build's compiler cache (issue 27). `RUN` steps get the engine's default
//! (bridge) network unless the request names one (`none` for a hermetic build).
//!
//! Failure reporting follows the daemon's protocol: a failing step arrives as an error item
//! inside an HTTP-200 stream, so the first error ends the build and carries the last output
//! lines with it.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bollard::query_parameters::{BuildImageOptions, BuilderVersion};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::client::Client;
use crate::error::EngineError;

/// How many output lines a build failure keeps for the report.
pub const FAILURE_TAIL_LINES: usize = 40;

/// What to build.
#[derive(Debug, Clone, Default)]
pub struct BuildRequest {
    /// The tag the result gets (`repo:tag`).
    pub tag: String,
    /// The Dockerfile's path inside the context.
    pub dockerfile: String,
    /// `--build-arg` values.
    pub build_args: BTreeMap<String, String>,
    /// Labels added to the final image.
    pub labels: BTreeMap<String, String>,
    /// Network for `RUN` steps: `none` (hermetic), `host`, or the engine default when `None`.
    pub network_mode: Option<String>,
    /// Build only up to this stage.
    pub target: Option<String>,
    /// Ignore the layer cache.
    pub no_cache: bool,
}

/// One thing the build reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildEvent {
    /// A Dockerfile instruction started: `Step index/total : instruction`.
    Step {
        /// 1-based number of the step.
        index: usize,
        /// Number of steps in the Dockerfile.
        total: usize,
        /// The instruction as the builder echoes it (e.g. `RUN pip install …`).
        instruction: String,
    },
    /// The step was served from the layer cache.
    Cached,
    /// Any other output line (RUN output, intermediate ids), without its newline.
    Line(String),
}

/// Removes ANSI CSI sequences (`ESC [` … final byte `@`–`~`): colours, cursor moves and
/// erases. The classic builder paints RUN's stderr red; servers colour their logs. The one
/// implementation of the workspace (boot-log reading uses it too).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Parses a classic-builder line into an event.
pub fn parse_line(line: &str) -> BuildEvent {
    let line = strip_ansi(line);
    let trimmed = line.trim_end_matches(['\r', '\n']);
    if let Some(rest) = trimmed.strip_prefix("Step ")
        && let Some((counts, instruction)) = rest.split_once(" : ")
        && let Some((index, total)) = counts.split_once('/')
        && let (Ok(index), Ok(total)) = (index.parse(), total.parse())
    {
        return BuildEvent::Step {
            index,
            total,
            instruction: instruction.to_string(),
        };
    }
    if trimmed.trim() == "---> Using cache" {
        return BuildEvent::Cached;
    }
    BuildEvent::Line(trimmed.to_string())
}

impl Client {
    /// Builds an image from a context tar stream, reporting events as they come, and returns
    /// the image id (`sha256:…`). Dropping the returned future cancels the build (the engine
    /// aborts a build whose client went away).
    pub async fn build_image<S>(
        &self,
        request: &BuildRequest,
        context: S,
        mut on_event: impl FnMut(BuildEvent),
    ) -> Result<String, EngineError>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    {
        let options = BuildImageOptions {
            dockerfile: request.dockerfile.clone(),
            t: Some(request.tag.clone()),
            rm: true,
            forcerm: true,
            nocache: request.no_cache,
            buildargs: Some(to_hash_map(&request.build_args)),
            labels: Some(to_hash_map(&request.labels)),
            networkmode: request.network_mode.clone(),
            target: request.target.clone().unwrap_or_default(),
            version: BuilderVersion::BuilderV1,
            ..Default::default()
        };
        let mut stream =
            self.docker()
                .build_image(options, None, Some(bollard::body_try_stream(context)));
        let mut tail: VecDeque<String> = VecDeque::with_capacity(FAILURE_TAIL_LINES);
        let mut image_id = None;
        let mut pending = String::new();
        while let Some(item) = stream.next().await {
            let info = match item {
                Ok(info) => info,
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Err(EngineError::Build {
                        tag: request.tag.clone(),
                        message: error.trim().to_string(),
                        last_lines: tail.into_iter().collect(),
                    });
                }
                Err(source) => {
                    // Every message may have come with only a line end missing: done when
                    // the engine holds the tag on the image the build reported.
                    if crate::torn_line_end::is_torn_line_end(&source)
                        && let Some(id) = &image_id
                        && self.image(&request.tag).await?.is_some_and(|f| &f.id == id)
                    {
                        break;
                    }
                    return Err(EngineError::BuildRequest {
                        tag: request.tag.clone(),
                        source,
                    });
                }
            };
            if let Some(detail) = info.error_detail {
                return Err(EngineError::Build {
                    tag: request.tag.clone(),
                    message: detail.message.unwrap_or_default().trim().to_string(),
                    last_lines: tail.into_iter().collect(),
                });
            }
            if let Some(aux) = info.aux
                && let Some(id) = aux.id
            {
                image_id = Some(id);
            }
            // Output chunks are not line-aligned: split on newlines ourselves.
            if let Some(text) = info.stream {
                pending.push_str(&text);
                while let Some(pos) = pending.find('\n') {
                    let line: String = pending.drain(..=pos).collect();
                    let line = strip_ansi(line.trim_end_matches(['\r', '\n']));
                    if tail.len() == FAILURE_TAIL_LINES {
                        tail.pop_front();
                    }
                    tail.push_back(line.clone());
                    on_event(parse_line(&line));
                }
            }
        }
        if !pending.is_empty() {
            on_event(parse_line(&pending));
        }
        image_id.ok_or_else(|| EngineError::NoImageId {
            tag: request.tag.clone(),
        })
    }
}

fn to_hash_map(map: &BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_every_csi_sequence_whatever_its_final_byte() {
        assert_eq!(strip_ansi("\x1b[31mred\x1b[0m"), "red");
        // `~` and `@` end a CSI sequence too (the old matcher ran on to the next letter).
        assert_eq!(strip_ansi("a\x1b[2~b\x1b[3@c"), "abc");
        assert_eq!(strip_ansi("\x1b[1;32mok\x1b[K done"), "ok done");
        assert_eq!(strip_ansi("plain [x]"), "plain [x]");
    }

    #[test]
    fn parses_steps_cache_hits_and_lines() {
        assert_eq!(
            parse_line("Step 3/12 : COPY code/ /opt/tt-metal/\n"),
            BuildEvent::Step {
                index: 3,
                total: 12,
                instruction: "COPY code/ /opt/tt-metal/".into()
            }
        );
        assert_eq!(parse_line(" ---> Using cache"), BuildEvent::Cached);
        assert_eq!(
            parse_line("Step x/12 : RUN true"),
            BuildEvent::Line("Step x/12 : RUN true".into())
        );
        assert_eq!(
            parse_line("hello world\r\n"),
            BuildEvent::Line("hello world".into())
        );
        assert_eq!(
            parse_line("\u{1b}[91mln: missing\u{1b}[0m"),
            BuildEvent::Line("ln: missing".into())
        );
    }
}
