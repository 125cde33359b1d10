//! Serving against the real engine, through the boot watch: a busybox image imported in the test, a server that prints
//! a ready line and answers /health, readiness by both signals, stop, removal, the early-exit
//! diagnosis, logs of an exited container, and the claim scan.

use std::collections::BTreeMap;
use std::time::Duration;

use tt_model_engine::Client;
use tt_model_engine::run_spec::{Chips, HostFacts, RunSpec, ServeRequest, compose};
use tt_model_local::bootlog::BootTracker;
use tt_model_local::diagnose::{Cause, diagnose};
use tt_model_local::watch::{ReadySpec, WaitOutcome, probe_http, wait_ready};

const IMAGE_REPO: &str = "tt-model-test/busybox-serve";
const IMAGE_TAG: &str = "1";

/// The test server: prints phases, the ready line, then execs httpd on 127.0.0.1:$PORT.
const SERVE_SH: &str = r#"#!/bin/sh
PORT="${1:-${PORT:-8080}}"
echo "Started server process [$$]"
mkdir -p /tmp/www && echo ok > /tmp/www/health
sleep "${BOOT_DELAY:-0}"
echo "Loading weights"
echo "Application startup complete."
exec httpd -f -p "127.0.0.1:${PORT}" -h /tmp/www
"#;

/// A rootfs tar with busybox-static and its applet links (`docker import` input).
fn rootfs_tar() -> Vec<u8> {
    let busybox = std::fs::read("/bin/busybox")
        .expect("busybox-static at /bin/busybox (apt-get install busybox-static)");
    let mut b = tar::Builder::new(Vec::new());
    let dir = |b: &mut tar::Builder<Vec<u8>>, p: &str, mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(mode);
        h.set_size(0);
        h.set_mtime(0);
        b.append_data(&mut h, p, std::io::empty()).unwrap();
    };
    dir(&mut b, "bin", 0o755);
    dir(&mut b, "tmp", 0o1777);
    let file = |b: &mut tar::Builder<Vec<u8>>, p: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o755);
        h.set_size(data.len() as u64);
        h.set_mtime(0);
        b.append_data(&mut h, p, data).unwrap();
    };
    file(&mut b, "bin/busybox", &busybox);
    file(&mut b, "serve.sh", SERVE_SH.as_bytes());
    for applet in [
        "sh", "echo", "sleep", "mkdir", "httpd", "cat", "wget", "true", "false",
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        h.set_mtime(0);
        b.append_link(&mut h, format!("bin/{applet}"), "busybox")
            .unwrap();
    }
    b.into_inner().unwrap()
}

async fn client_with_image() -> Client {
    let c = Client::connect()
        .await
        .expect("a Docker engine (scripts/ensure-docker.sh)");
    if c.image(&format!("{IMAGE_REPO}:{IMAGE_TAG}"))
        .await
        .unwrap()
        .is_none()
    {
        let body =
            futures_util::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(rootfs_tar()))]);
        c.import_rootfs(body, IMAGE_REPO, IMAGE_TAG, &["CMD [\"/serve.sh\"]".into()])
            .await
            .unwrap();
    }
    c
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spec(name: &str, port: u16, cmd: &[&str], tmp: &std::path::Path) -> RunSpec {
    let req = ServeRequest {
        package: name.into(),
        profile: "default".into(),
        image: format!("{IMAGE_REPO}:{IMAGE_TAG}"),
        target: name.into(),
        kind: "http-server".into(),
        port,
        expose: false,
        health_path: "/health".into(),
        chips: Chips::None,
        weights_on_host: true,
        env: BTreeMap::from([("PORT".into(), port.to_string())]),
        labels: BTreeMap::new(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        network: Some("host".into()),
    };
    let host = HostFacts {
        uid: unsafe_uid(),
        gid: 0,
        rootless: false,
        hub_cache: tmp.join("hub"),
        state_dir: tmp.join("state"),
        hf_token_set: false,
        hugepages_1g: false,
    };
    for d in ["hub", "state/cache", "state/weights", "state/tensors"] {
        std::fs::create_dir_all(tmp.join(d)).unwrap();
    }
    compose(&req, &host)
}

fn unsafe_uid() -> u32 {
    // The test runs as root in CI; any uid works for busybox, 0 keeps /tmp writable.
    0
}

fn ready_spec(port: u16, timeout: Duration) -> ReadySpec {
    ReadySpec {
        ready_line: Some("Application startup complete".into()),
        http_addr: format!("127.0.0.1:{port}"),
        health_path: Some("/health".into()),
        timeout,
        poll: Duration::from_millis(100),
    }
}

/// A package that declares no health endpoint (the original's kinds) is ready at its ready
/// line: the server here never listens, and the wait still ends ready.
#[tokio::test]
async fn without_a_health_path_the_ready_line_decides() {
    let c = client_with_image().await;
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let s = spec(
        "engine-ready-line",
        port,
        &[
            "sh",
            "-c",
            "echo 'Application startup complete.'; exec sleep 600",
        ],
        tmp.path(),
    );
    c.remove_container_force(&s.name).await.unwrap();
    c.create_and_start(&s, |_| None).await.unwrap();
    let mut tracker = BootTracker::new("vllm-plugin");
    let mut events = Vec::new();
    let ready = ReadySpec {
        health_path: None,
        ..ready_spec(port, Duration::from_secs(60))
    };
    let out = wait_ready(
        &c,
        &s.name,
        &ready,
        &mut tracker,
        |e| events.push(e.clone()),
        std::future::pending(),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            out,
            WaitOutcome::Ready {
                log_ready: Some(_),
                ..
            }
        ),
        "{out:?}"
    );
    assert!(
        !probe_http(
            &format!("127.0.0.1:{port}"),
            "/health",
            Duration::from_secs(1)
        )
        .await,
        "nothing listens: the ready line alone decided"
    );
    assert!(!events.contains(&tt_model_local::watch::WaitEvent::HttpReady));
    c.remove_container_force(&s.name).await.unwrap();
}

#[tokio::test]
async fn serve_waits_for_both_signals_then_stops_and_removes() {
    let c = client_with_image().await;
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let s = spec("engine-ready", port, &["/serve.sh"], tmp.path());
    c.remove_container_force(&s.name).await.unwrap();
    c.create_and_start(&s, |_| None).await.unwrap();

    let mut tracker = BootTracker::new("http-server");
    let mut events = Vec::new();
    let out = wait_ready(
        &c,
        &s.name,
        &ready_spec(port, Duration::from_secs(60)),
        &mut tracker,
        |e| events.push(e.clone()),
        std::future::pending(),
    )
    .await
    .unwrap();
    let WaitOutcome::Ready {
        log_ready,
        http_ready,
        ..
    } = out
    else {
        panic!("not ready: {out:?}")
    };
    assert!(
        log_ready.unwrap() <= http_ready,
        "the log line alone is not enough"
    );
    assert!(
        probe_http(
            &format!("127.0.0.1:{port}"),
            "/health",
            Duration::from_secs(2)
        )
        .await
    );
    assert!(tracker.rows.iter().any(|r| r.key == "weights"));

    let info = c.container(&s.name).await.unwrap().unwrap();
    assert!(info.running);
    assert_eq!(info.label("org.tenstorrent.tt-model"), Some("engine-ready"));
    let listed = c
        .tt_model_containers(Some("engine-ready"), false)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);

    let stop = c
        .stop_with_grace(&s.name, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(stop.was_running);
    assert!(!stop.dirty(), "init forwards SIGTERM: {stop:?}");
    // logs still work on the exited container
    let log = tt_model_engine::logs::collect(&c, &s.name, None)
        .await
        .unwrap();
    assert!(log.contains("Application startup complete."), "{log}");
    assert!(c.remove_container_force(&s.name).await.unwrap());
    assert!(c.container(&s.name).await.unwrap().is_none());
}

#[tokio::test]
async fn early_exit_yields_the_flag_rejected_card() {
    let c = client_with_image().await;
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let s = spec(
        "engine-exit",
        port,
        &[
            "sh",
            "-c",
            "echo 'usage: server [-h]'; echo 'server: error: unrecognized arguments: --max-tokenz' >&2; exit 2",
        ],
        tmp.path(),
    );
    c.remove_container_force(&s.name).await.unwrap();
    c.create_and_start(&s, |_| None).await.unwrap();
    let mut tracker = BootTracker::new("http-server");
    let out = wait_ready(
        &c,
        &s.name,
        &ready_spec(port, Duration::from_secs(30)),
        &mut tracker,
        |_| {},
        std::future::pending(),
    )
    .await
    .unwrap();
    let WaitOutcome::Exited { evidence, .. } = out else {
        panic!("expected exit: {out:?}")
    };
    assert_eq!(evidence.exit_code, Some(2));
    let card = diagnose(
        &evidence,
        "engine-exit",
        &["--max-tokenz".into()],
        port,
        Duration::from_secs(30),
    );
    assert_eq!(card.cause, Cause::FlagRejected, "{card:?}");
    assert!(card.detail.contains("--max-tokenz"));
    c.remove_container_force(&s.name).await.unwrap();
}

#[tokio::test]
async fn timeout_leaves_the_container_running_and_says_so() {
    let c = client_with_image().await;
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let s = spec(
        "engine-slow",
        port,
        &["sh", "-c", "echo booting; sleep 30"],
        tmp.path(),
    );
    c.remove_container_force(&s.name).await.unwrap();
    c.create_and_start(&s, |_| None).await.unwrap();
    let mut tracker = BootTracker::new("http-server");
    let out = wait_ready(
        &c,
        &s.name,
        &ready_spec(port, Duration::from_millis(800)),
        &mut tracker,
        |_| {},
        std::future::pending(),
    )
    .await
    .unwrap();
    let WaitOutcome::TimedOut { evidence, .. } = out else {
        panic!("expected timeout: {out:?}")
    };
    assert!(!evidence.exited);
    assert_eq!(
        diagnose(&evidence, "x", &[], port, Duration::from_millis(800)).cause,
        Cause::Timeout
    );
    // A wait can also be detached by the caller.
    let out = wait_ready(
        &c,
        &s.name,
        &ready_spec(port, Duration::from_secs(60)),
        &mut tracker,
        |_| {},
        async {},
    )
    .await
    .unwrap();
    assert!(matches!(out, WaitOutcome::Detached { .. }));
    c.remove_container_force(&s.name).await.unwrap();
}

#[tokio::test]
async fn claim_scan_sees_host_ipc_containers_and_their_labels() {
    let c = client_with_image().await;
    let tmp = tempfile::tempdir().unwrap();
    let mut s = spec("engine-claim", free_port(), &["sleep", "30"], tmp.path());
    s.ipc_host = true;
    s.labels
        .insert("org.tenstorrent.tt-model.devices".into(), "3".into());
    c.remove_container_force(&s.name).await.unwrap();
    c.create_and_start(&s, |_| None).await.unwrap();
    let claims = c.scan_claims().await.unwrap();
    let ours = claims
        .iter()
        .find(|x| x.name == s.name)
        .expect("our container in the scan");
    assert_eq!(ours.ipc_mode, "host");
    assert!(ours.mount_sources.iter().any(|m| m.ends_with("/hub")));
    let claimed = tt_model_local::devices::claimed_chips(&claims, &[0, 1, 2, 3]);
    assert!(claimed.contains(&3));
    c.remove_container_force(&s.name).await.unwrap();
}
