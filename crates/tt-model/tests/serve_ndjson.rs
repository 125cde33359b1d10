//! The progress stream tt asks for (`TT_MODEL_PROGRESS=ndjson`): the argv tt runs parses, a
//! real `serve --detach` writes the shared steps and the container event as NDJSON on stdout
//! (human lines stay on stderr), and a failure is a failed step plus an `error` event.

use std::process::Command;

use clap::FromArgMatches;
use tt_model::args::{Cli, Commands};
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

use super::serve_cli::{Env, TempDir, docker, ensure_image, free_port, text, weights_repo};

const NDJSON: [(&str, &str); 2] = [("TT_MODEL_PROGRESS", "ndjson"), ("TT_MODEL_NO_PIN", "1")];

/// Every stdout line as JSON (each must be an event), and `(event, key, state)` per line.
fn events(stdout: &[u8]) -> (Vec<serde_json::Value>, Vec<String>) {
    let text = String::from_utf8_lossy(stdout);
    let values: Vec<serde_json::Value> = text
        .lines()
        .map(|l| {
            assert!(
                l.starts_with('{') && l.contains("\"event\""),
                "not an event: {l}"
            );
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))
        })
        .collect();
    let shape = values
        .iter()
        .filter(|v| v["event"] != "progress")
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            [s("event"), s("key"), s("state")]
                .into_iter()
                .filter(|x| !x.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    (values, shape)
}

/// Removes a test's container (from an earlier run, or after this one) whatever its state.
fn remove_container(name: &str) {
    let _ = Command::new(docker()).args(["rm", "-f", name]).output();
}

#[test]
fn the_argv_tt_runs_parses() {
    // model_manager.py `_argv`: `--verbose` before the subcommand, `--detach` after the id,
    // then tt's serve flags, then what the user passed through.
    let argv = [
        "tt-model",
        "--verbose",
        "serve",
        "acme/x",
        "--detach",
        "--local-only",
        "--port",
        "20001",
        "--profile",
        "p150",
        "--refresh",
        "--no-update-check",
        "--no-weights",
        "--follow",
        "--force",
        "--arch",
        "blackhole",
        "--max-num-seqs",
        "4",
    ];
    let m = tt_model::args::command()
        .try_get_matches_from(argv)
        .expect("parses");
    let cli = Cli::from_arg_matches(&m).unwrap();
    assert!(cli.global.verbose);
    let Some(Commands::Serve(s)) = cli.command else {
        panic!("serve")
    };
    assert_eq!(s.target, "acme/x");
    assert!(s.detach && s.local_only && s.refresh && s.no_update_check && s.no_weights);
    assert!(s.follow && s.force);
    assert_eq!(s.arch.as_deref(), Some("blackhole"));
    assert_eq!((s.port, s.profile.as_deref()), (Some(20001), Some("p150")));
    let rest: Vec<String> = s
        .passthrough
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(rest, ["--max-num-seqs", "4"], "the rest reaches the engine");
}

#[tokio::test(flavor = "multi_thread")]
async fn detached_serve_streams_the_shared_steps_and_the_container() {
    ensure_image();
    let repo = weights_repo();
    let server = HubServer::start(vec![repo.clone()]).await.unwrap();
    let env = Env {
        tmp: TempDir::new(),
        endpoint: server.endpoint(),
    };
    let name = "serve-ndjson";
    let container = format!("tt-model-{name}-default");
    let m = env.package(
        name,
        serde_json::json!(["/serve.sh", "{port}"]),
        Some(("acme/tiny", &repo.commit)),
    );
    let (ms, port) = (m.to_str().unwrap().to_string(), free_port().to_string());
    remove_container(&container);

    let out = tokio::task::block_in_place(|| {
        env.cmd_env(
            &[
                "--verbose",
                "serve",
                &ms,
                "--detach",
                "--device",
                "none",
                "--port",
                &port,
            ],
            &NDJSON,
        )
    });
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{}", text(&out));
    let (values, shape) = events(&out.stdout);
    assert_eq!(
        shape,
        [
            "step host start",
            "step host done",
            "step image start",
            "step image done",
            "step weights start",
            "step weights done",
            "step container start",
            "container",
            "step container done",
        ],
        "{}",
        text(&out)
    );
    let c = values.iter().find(|v| v["event"] == "container").unwrap();
    assert_eq!(c["id"], container.as_str());
    assert_eq!(c["endpoint"], format!("http://127.0.0.1:{port}"));
    // The weights' bytes: the last progress event is the whole download.
    let last = values
        .iter()
        .rev()
        .find(|v| v["event"] == "progress")
        .expect("the download reports progress");
    assert_eq!(
        (&last["key"], &last["unit"]),
        (&"weights".into(), &"bytes".into())
    );
    assert_eq!(last["done"], last["total"]);
    assert!(last["total"].as_u64().unwrap() >= 200_000, "{last}");
    // The human lines are still there, on stderr, without events or escapes.
    assert!(stderr.contains("✓ host ready") && stderr.contains("✓ container started"));
    assert!(
        stderr.contains("checking the host…"),
        "-v announces steps: {stderr}"
    );
    assert!(!stderr.contains("\"event\"") && !stderr.contains('\x1b'));
    remove_container(&container);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_serve_fails_its_step_and_says_why() {
    ensure_image();
    let server = HubServer::start(vec![]).await.unwrap();
    let env = Env {
        tmp: TempDir::new(),
        endpoint: server.endpoint(),
    };
    // An image nobody built: the image step fails, nothing is started.
    let m = env.package_with_tag(
        "serve-ndjson-noimage",
        serde_json::json!(["/serve.sh", "{port}"]),
        None,
        "never-built",
    );
    let ms = m.to_str().unwrap().to_string();
    let out = tokio::task::block_in_place(|| {
        env.cmd_env(&["serve", &ms, "--detach", "--device", "none"], &NDJSON)
    });
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (values, shape) = events(&out.stdout);
    assert_eq!(
        shape,
        [
            "step host start",
            "step host done",
            "step image start",
            "step image fail",
            "error",
        ],
        "{}",
        text(&out)
    );
    let err = values.last().unwrap();
    assert!(
        err["cause"]
            .as_str()
            .unwrap()
            .contains("tt-model-test/busybox-serve:never-built"),
        "{err}"
    );
    assert!(err["actions"].is_array());
}

/// The card and its chips are judged before any download: asking for a chip this host does
/// not have (`--device-id 99`) is refused at the host step on a card-less host, and by the
/// chip pre-check on a card host, never after the image or the weights. A first serve of a Hub
/// package is judged on its fetched manifest, before the auto-pull downloads the image.
#[tokio::test(flavor = "multi_thread")]
async fn chips_are_refused_before_any_download() {
    ensure_image();
    let repo = weights_repo();
    let mut env = Env {
        tmp: TempDir::new(),
        endpoint: String::new(),
    };
    let m = env.package(
        "serve-ndjson-chips",
        serde_json::json!(["/serve.sh", "{port}"]),
        Some(("acme/tiny", &repo.commit)),
    );
    // The same package on the Hub, with an image nobody built and a layout to download.
    let hub_pkg = FakeRepo::new(
        "acme/serve-ndjson-chips",
        vec![
            FakeFile::regular("tt_kernel_manifest.json", std::fs::read(&m).unwrap()),
            FakeFile::regular(
                "image/oci-layout",
                br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
            ),
            FakeFile::lfs("image/blobs/sha256/layer", vec![7u8; 300_000]),
        ],
    );
    let server = HubServer::start(vec![repo.clone(), hub_pkg]).await.unwrap();
    env.endpoint = server.endpoint();
    let ms = m.to_str().unwrap().to_string();
    let out = tokio::task::block_in_place(|| {
        env.cmd_env(&["serve", &ms, "--detach", "--device-id", "99"], &NDJSON)
    });
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (values, shape) = events(&out.stdout);
    assert!(
        !shape
            .iter()
            .any(|s| s.contains("image") || s.contains("weights")),
        "{shape:?}"
    );
    assert_eq!(values.last().unwrap()["event"], "error", "{shape:?}");
    let snapshot = env
        .tmp
        .path()
        .join("hub/models--acme--tiny/snapshots")
        .join(&repo.commit);
    assert!(!snapshot.exists(), "no weights were downloaded");

    let out = tokio::task::block_in_place(|| {
        env.cmd_env(
            &[
                "serve",
                "acme/serve-ndjson-chips",
                "--detach",
                "--device-id",
                "99",
            ],
            &NDJSON,
        )
    });
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (values, shape) = events(&out.stdout);
    assert_eq!(
        shape,
        ["step bundle start", "step bundle done", "error"],
        "{}",
        text(&out)
    );
    assert!(
        !values.last().unwrap()["cause"]
            .as_str()
            .unwrap()
            .ends_with('.'),
        "{shape:?}"
    );
    let t = env.tmp.path();
    let cached = t.join("state/pull-cache/models--acme--serve-ndjson-chips/snapshots");
    let layouts: Vec<_> = std::fs::read_dir(&cached)
        .unwrap()
        .flatten()
        .filter(|d| d.path().join("image").exists())
        .collect();
    assert!(layouts.is_empty(), "no image layout was downloaded");
    assert!(!t.join("state/pulled/acme__serve-ndjson-chips").exists());
    assert!(!snapshot.exists(), "no weights were downloaded");
}

/// A container that exits while it boots: the boot's step fails and the stream ends in an
/// `error` event carrying the diagnosis card's cause (the device held by another process, read
/// from the boot log), its evidence and its actions, as the terminal's `✗` card says them.
#[tokio::test(flavor = "multi_thread")]
async fn a_container_that_exits_during_boot_ends_the_stream_with_the_cards_error() {
    ensure_image();
    let server = HubServer::start(vec![]).await.unwrap();
    let env = Env {
        tmp: TempDir::new(),
        endpoint: server.endpoint(),
    };
    let name = "serve-ndjson-bootfail";
    let container = format!("tt-model-{name}-default");
    let m = env.package(
        name,
        serde_json::json!([
            "sh",
            "-c",
            "echo 'starting the server'; sleep 1; echo 'TT_THROW: CHIP_IN_USE: another PID holds the device lock' >&2; exit 3"
        ]),
        None,
    );
    let (ms, port) = (m.to_str().unwrap().to_string(), free_port().to_string());
    remove_container(&container);
    let out = tokio::task::block_in_place(|| {
        env.cmd_env(
            &[
                "serve",
                &ms,
                "--device",
                "none",
                "--port",
                &port,
                "--timeout",
                "2m",
            ],
            &NDJSON,
        )
    });
    remove_container(&container);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let (values, shape) = events(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let n = shape.len();
    assert!(n >= 3, "{shape:?}");
    assert_eq!(shape[n - 1], "error", "{shape:?}\n{}", text(&out));
    assert!(
        shape[n - 2].starts_with("step ") && shape[n - 2].ends_with(" fail"),
        "the step the boot was in fails before the error: {shape:?}"
    );
    assert!(
        shape.contains(&"step container done".to_string()),
        "the container had started: {shape:?}"
    );
    let err = &values.last().unwrap();
    let cause = err["cause"].as_str().unwrap();
    assert_eq!(
        cause, "the container exited — another process is holding the Tenstorrent device",
        "{err}"
    );
    assert!(
        stderr.contains(&format!("✗ {cause}")),
        "the terminal's card has the same cause: {stderr}"
    );
    let said = err.to_string();
    assert!(said.contains("CHIP_IN_USE"), "the evidence: {err}");
    assert!(
        err["actions"].as_array().is_some_and(|a| a
            .iter()
            .any(|x| x.as_str().unwrap().contains("tt-model ps"))),
        "{err}"
    );
}
