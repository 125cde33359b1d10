//! BuildKit builds on the real engine (issue 27, item 3): a `RUN --mount=type=cache` whose
//! cache outlives the step's layer, a failing `RUN` reported like the classic builder's, and
//! a rebuild served from the cache.
//!
//! Needs a Docker engine on its local socket and `local/busybox:tt-model` (BuildKit cannot
//! `FROM sha256:<id>`, so the base is named by its tag). Without an engine the tests print why
//! and pass, unless `TT_MODEL_REQUIRE_DOCKER=1` (CI sets it) turns that into a failure.
//!
//! Each run uses its own cache-mount id, image tags and a stamp in every step, so runs never
//! share state, and removes the images and tags it made. What stays on the engine: the cache
//! mount of the first test (4 bytes; `docker system df -v` lists it as `exec.cachemount`,
//! its description naming the run id) and BuildKit's cache records of the steps. Pruning just
//! that mount takes its record id (a `description` filter cannot hold the spaces of one), and
//! API 1.41 lists records in a `system df` layout bollard 0.21 no longer parses; BuildKit's
//! garbage collection or `docker builder prune` clears them.

use bytes::Bytes;
use tt_model_engine::build::{BuildEvent, BuildRequest};
use tt_model_engine::buildkit::BuildKitError;
use tt_model_engine::{Client, EngineError};
use tt_model_testkit::engine::engine_or_skip as engine;

const BASE: &str = "local/busybox:tt-model";
const REPO: &str = "tt-model-test/buildkit";

/// Unique to this test run (pid and clock), for tags, cache ids and stamps.
fn run_id(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{test}-{}-{nanos}", std::process::id())
}

/// A context holding only `Dockerfile`, streamed in two chunks (the upload is chunked).
fn context(
    dockerfile: &str,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + use<> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(dockerfile.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_cksum();
    tar.append_data(&mut header, "Dockerfile", dockerfile.as_bytes())
        .unwrap();
    let mut bytes = Bytes::from(tar.into_inner().unwrap());
    let second = bytes.split_off(700);
    futures_util::stream::iter([Ok(bytes), Ok(second)])
}

fn request(tag: &str, args: &[(&str, &str)]) -> BuildRequest {
    BuildRequest {
        tag: tag.to_string(),
        dockerfile: "Dockerfile".into(),
        build_args: args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        network_mode: Some("none".into()),
        ..Default::default()
    }
}

async fn build(
    c: &Client,
    dockerfile: &str,
    request: &BuildRequest,
) -> (Result<String, BuildKitError>, Vec<BuildEvent>) {
    let mut events = Vec::new();
    let result = c
        .build_image_buildkit(request, context(dockerfile), |e| events.push(e))
        .await;
    (result, events)
}

fn is_run(e: &BuildEvent) -> bool {
    matches!(e, BuildEvent::Step { instruction, .. } if instruction.starts_with("RUN"))
}

fn lines(events: &[BuildEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            BuildEvent::Line(l) => Some(l.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_cache_mount_outlives_the_step_that_wrote_it() {
    let Some(c) = engine().await else { return };
    let id = run_id("mount");
    let tag = format!("{REPO}:{id}");
    let dockerfile = format!(
        "FROM {BASE}\nARG RUNID\n\
         RUN --mount=type=cache,id={id},target=/c sh -c ': {id}; echo x >> /c/f; echo count=$(wc -l < /c/f)'\n"
    );
    let mut counts = Vec::new();
    let mut ids = Vec::new();
    // A changed build-arg re-runs the step (BuildKit puts ARGs in the step's environment).
    for run in ["1", "2"] {
        let (result, events) = build(&c, &dockerfile, &request(&tag, &[("RUNID", run)])).await;
        let image = result.unwrap_or_else(|e| panic!("build {run}: {e}\n{e:?}\n{events:?}"));
        let run_at = events.iter().position(is_run).expect("a RUN step");
        let BuildEvent::Step { index, total, .. } = &events[run_at] else {
            unreachable!()
        };
        assert_eq!((*index, *total), (2, 2), "per-stage numbering");
        assert_ne!(
            events.get(run_at + 1),
            Some(&BuildEvent::Cached),
            "re-run: {events:?}"
        );
        let count = lines(&events)
            .iter()
            .find_map(|l| l.strip_prefix("count=")?.trim().parse::<u32>().ok());
        counts.push(count.unwrap_or_else(|| panic!("no count line in {events:?}")));
        let tagged = c.image(&tag).await.unwrap().expect("the tag exists");
        assert_eq!(tagged.id, image, "the id returned is the tagged image's");
        ids.push(image);
    }
    assert_eq!(counts, [1, 2], "the second build saw the first one's file");
    c.remove_image(&tag).await.unwrap();
    for image in ids {
        c.remove_image(&image).await.unwrap();
    }
}

#[tokio::test]
async fn a_failing_run_is_the_classic_build_error_with_its_output() {
    let Some(c) = engine().await else { return };
    let id = run_id("fail");
    let tag = format!("{REPO}:{id}");
    let dockerfile =
        format!("FROM {BASE}\nRUN echo before-failure {id}; echo to-stderr >&2; exit 3\n");
    let (result, events) = build(&c, &dockerfile, &request(&tag, &[])).await;
    let err = result.expect_err("exit 3 fails the build");
    let BuildKitError::Engine(EngineError::Build {
        tag: failed,
        message,
        last_lines,
    }) = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(failed, &tag);
    assert!(message.contains("exit code: 3"), "{message}");
    assert!(
        last_lines.contains(&format!("before-failure {id}")),
        "{last_lines:?}"
    );
    assert!(
        last_lines.iter().any(|l| l == "to-stderr"),
        "{last_lines:?}"
    );
    assert!(lines(&events).contains(&"to-stderr"), "{events:?}");
    assert!(c.image(&tag).await.unwrap().is_none(), "nothing was tagged");
}

#[tokio::test]
async fn an_unchanged_rebuild_reports_the_run_step_cached() {
    let Some(c) = engine().await else { return };
    let id = run_id("cached");
    let tag = format!("{REPO}:{id}");
    let dockerfile = format!("FROM {BASE}\nRUN echo {id} > /stamp\n");
    let (first, events) = build(&c, &dockerfile, &request(&tag, &[])).await;
    let first = first.unwrap();
    let run_at = events.iter().position(is_run).expect("a RUN step");
    assert_ne!(
        events.get(run_at + 1),
        Some(&BuildEvent::Cached),
        "new the first time"
    );
    let (second, events) = build(&c, &dockerfile, &request(&tag, &[])).await;
    let second = second.unwrap();
    let run_at = events.iter().position(is_run).expect("a RUN step");
    assert_eq!(
        events.get(run_at + 1),
        Some(&BuildEvent::Cached),
        "{events:?}"
    );
    assert_eq!(c.image(&tag).await.unwrap().unwrap().id, second);
    c.remove_image(&tag).await.unwrap();
    for image in [first, second] {
        c.remove_image(&image).await.unwrap();
    }
}
