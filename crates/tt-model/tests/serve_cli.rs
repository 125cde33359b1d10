//! `tt-model serve/ps/logs/stop/rm` end to end: the real binary, the real engine, a busybox
//! image imported here, weights from the local Hub-protocol server.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

const IMAGE: &str = "tt-model-test/busybox-serve:1";
/// Same script as the engine tests' image (they share the tag).
const SERVE_SH: &str = r#"#!/bin/sh
PORT="${1:-${PORT:-8080}}"
echo "Started server process [$$]"
mkdir -p /tmp/www && echo ok > /tmp/www/health
sleep "${BOOT_DELAY:-0}"
echo "Loading weights"
echo "Application startup complete."
exec httpd -f -p "127.0.0.1:${PORT}" -h /tmp/www
"#;

/// A directory removed on drop (this crate has no tempfile dependency).
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new() -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("tt-model-serve-cli-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn docker() -> &'static str {
    // The Debian client matches the 20.10 engine; any client negotiates the API down.
    if Path::new("/usr/bin/docker").exists() {
        "/usr/bin/docker"
    } else {
        "docker"
    }
}

/// Import the busybox test image with the docker CLI if it is missing.
pub(crate) fn ensure_image() {
    let have = Command::new(docker())
        .args(["image", "inspect", IMAGE])
        .output()
        .unwrap();
    if have.status.success() {
        return;
    }
    let root = TempDir::new();
    let r = root.path();
    std::fs::create_dir_all(r.join("bin")).unwrap();
    std::fs::create_dir_all(r.join("tmp")).unwrap();
    std::fs::copy("/bin/busybox", r.join("bin/busybox")).expect("busybox-static at /bin/busybox");
    for a in [
        "sh", "echo", "sleep", "mkdir", "httpd", "cat", "wget", "true", "false",
    ] {
        std::os::unix::fs::symlink("busybox", r.join("bin").join(a)).unwrap();
    }
    std::fs::write(r.join("serve.sh"), SERVE_SH).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.join("serve.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(r.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let tar = Command::new("tar")
        .args([
            "--sort=name",
            "--mtime=@0",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "-C",
        ])
        .arg(r)
        .args(["-c", "."])
        .output()
        .unwrap();
    assert!(tar.status.success());
    let mut imp = Command::new(docker())
        .args(["import", "-c", "CMD [\"/serve.sh\"]", "-", IMAGE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    imp.stdin.take().unwrap().write_all(&tar.stdout).unwrap();
    assert!(imp.wait().unwrap().success(), "docker import");
}

pub(crate) struct Env {
    pub(crate) tmp: TempDir,
    pub(crate) endpoint: String,
}

impl Env {
    pub(crate) fn cmd(&self, args: &[&str]) -> Output {
        self.cmd_env(args, &[])
    }

    /// `cmd` with extra environment variables.
    pub(crate) fn cmd_env(&self, args: &[&str], extra: &[(&str, &str)]) -> Output {
        let t = self.tmp.path();
        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_tt-model"))
            .args(args)
            .env("HF_ENDPOINT", &self.endpoint)
            .env("HF_HOME", t.join("hf"))
            .env("HF_HUB_CACHE", t.join("hub"))
            .env_remove("HF_TOKEN")
            .env("TT_MODEL_HOME", t.join("state"))
            .env("TT_MODEL_NETWORK", "host")
            .env("TT_MODEL_ALLOC_LOCK", t.join("alloc.lock"))
            .env("NO_COLOR", "1")
            .envs(extra.iter().copied())
            .output()
            .unwrap();
        eprintln!(
            "$ tt-model {}  ({:.2}s, {})\n{}{}",
            args.join(" "),
            started.elapsed().as_secs_f64(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub(crate) fn package(
        &self,
        name: &str,
        command: serde_json::Value,
        weights: Option<(&str, &str)>,
    ) -> PathBuf {
        self.package_with_tag(name, command, weights, "1")
    }

    pub(crate) fn package_with_tag(
        &self,
        name: &str,
        command: serde_json::Value,
        weights: Option<(&str, &str)>,
        tag: &str,
    ) -> PathBuf {
        let dir = self.tmp.path().join("out").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let m = serde_json::json!({
            "schema_version": "5.1",
            "name": name,
            "weights": weights.map(|(r, rev)| serde_json::json!({"repo_id": r, "revision": rev, "allow_patterns": [], "ignore_patterns": []})),
            "container": {
                "image": {"registry": "hf", "repository": "tt-model-test/busybox-serve", "tag": tag},
                "kind": "http-server",
                "runtime": {"command": command, "ready_line": "Application startup complete", "health_path": "/health"},
                "serve": {"hardware": "p150"},
                "serve_profiles": [{"name": "default"}],
                "default_profile": "default"
            }
        });
        let p = dir.join("tt_kernel_manifest.json");
        std::fs::write(&p, serde_json::to_string_pretty(&m).unwrap()).unwrap();
        p
    }
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn weights_repo() -> FakeRepo {
    FakeRepo::new(
        "acme/tiny",
        vec![
            FakeFile::regular("config.json", b"{}".to_vec()),
            FakeFile::lfs("model.safetensors", vec![42u8; 200_000]),
        ],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_ready_ps_logs_stop_and_refusals() {
    ensure_image();
    let repo = weights_repo();
    let server = HubServer::start(vec![repo.clone()]).await.unwrap();
    let env = Env {
        tmp: TempDir::new(),
        endpoint: server.endpoint(),
    };
    let port = free_port();
    let m = env.package(
        "serve-cli-ok",
        serde_json::json!(["/serve.sh", "{port}"]),
        Some(("acme/tiny", &repo.commit)),
    );
    let ms = m.to_str().unwrap().to_string();
    let port_s = port.to_string();
    tokio::task::spawn_blocking(move || {
        let _ = Command::new(docker())
            .args(["rm", "-f", "tt-model-serve-cli-ok-default"])
            .output();
    })
    .await
    .unwrap();

    let out = tokio::task::block_in_place(|| {
        env.cmd(&["-v", "serve", &ms, "--device", "none", "--port", &port_s])
    });
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("ready by ready line + health endpoint"), "{t}");
    assert!(t.contains("weights acme/tiny@"), "{t}");
    assert!(t.contains("serving without a Tenstorrent device"), "{t}");
    // The weights are in the host cache, python layout, before the boot.
    let snap = env.tmp.path().join(format!(
        "hub/models--acme--tiny/snapshots/{}/model.safetensors",
        repo.commit
    ));
    assert_eq!(std::fs::read(&snap).unwrap().len(), 200_000);
    let health = http_get(port, "/health");
    assert!(
        health.starts_with("HTTP/1.1 200") || health.starts_with("HTTP/1.0 200"),
        "{health}"
    );

    // A second serve of the same package is refused.
    let again = tokio::task::block_in_place(|| {
        env.cmd(&["serve", &ms, "--device", "none", "--port", &port_s])
    });
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        text(&again).contains("tt-model-serve-cli-ok-default is already running. Stop it first")
    );

    let ps = tokio::task::block_in_place(|| env.cmd(&["ps", "--json"]));
    let rows: serde_json::Value = serde_json::from_slice(&ps.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "tt-model-serve-cli-ok-default")
        .expect("ps lists it");
    assert_eq!(row["port"], port);
    assert_eq!(row["running"], true);
    assert_eq!(row["chips"], serde_json::json!([]));

    let logs = tokio::task::block_in_place(|| env.cmd(&["logs", &ms]));
    assert!(String::from_utf8_lossy(&logs.stdout).contains("Application startup complete."));

    let stop = tokio::task::block_in_place(|| env.cmd(&["stop", &ms]));
    let st = text(&stop);
    assert!(stop.status.success(), "{st}");
    assert!(
        st.contains("clean shutdown") && st.contains("stopped 1 container(s)"),
        "{st}"
    );
    let gone = Command::new(docker())
        .args(["inspect", "tt-model-serve-cli-ok-default"])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "the container is removed");
    let again = tokio::task::block_in_place(|| env.cmd(&["stop", &ms]));
    assert!(text(&again).contains("nothing running"));
}

#[tokio::test(flavor = "multi_thread")]
async fn early_exit_card_logs_of_exited_container_and_rm() {
    ensure_image();
    let server = HubServer::start(vec![]).await.unwrap();
    let env = Env {
        tmp: TempDir::new(),
        endpoint: server.endpoint(),
    };
    // `rm` removes the package's image: give this package its own tag of the shared image.
    let tagged = Command::new(docker())
        .args(["tag", IMAGE, "tt-model-test/busybox-serve:rm"])
        .output()
        .unwrap();
    assert!(tagged.status.success());
    let m = env.package_with_tag(
        "serve-cli-exit",
        serde_json::json!([
            "sh",
            "-c",
            "echo booting; echo 'server: error: unrecognized arguments: --bogus' >&2; exit 2"
        ]),
        None,
        "rm",
    );
    let ms = m.to_str().unwrap().to_string();
    let port = free_port().to_string();
    let _ = Command::new(docker())
        .args(["rm", "-f", "tt-model-serve-cli-exit-default"])
        .output();
    let out = tokio::task::block_in_place(|| {
        env.cmd(&["serve", &ms, "--device", "none", "--port", &port, "--bogus"])
    });
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("the container exited — the engine rejected a flag"),
        "{t}"
    );
    assert!(t.contains("`--bogus`"), "{t}");
    // logs works on the exited container
    let logs = tokio::task::block_in_place(|| env.cmd(&["logs", &ms]));
    assert!(logs.status.success());
    assert!(text(&logs).contains("unrecognized arguments: --bogus"));
    let rm = tokio::task::block_in_place(|| env.cmd(&["rm", &ms]));
    assert!(rm.status.success(), "{}", text(&rm));
    assert!(text(&rm).contains("removed container tt-model-serve-cli-exit-default"));
    assert!(text(&rm).contains("removed image tt-model-test/busybox-serve:rm"));
    assert!(
        Command::new(docker())
            .args(["image", "inspect", IMAGE])
            .output()
            .unwrap()
            .status
            .success(),
        "the shared tag stays"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn weights_sha_mismatch_is_fatal_before_boot() {
    ensure_image();
    let mut repo = weights_repo();
    repo.id = "acme/corrupt".into();
    repo.files[1].corrupt_with = Some(vec![0u8; 200_000]);
    let server = HubServer::start(vec![repo.clone()]).await.unwrap();
    let env = Env {
        tmp: TempDir::new(),
        endpoint: server.endpoint(),
    };
    let m = env.package(
        "serve-cli-sha",
        serde_json::json!(["/serve.sh", "{port}"]),
        Some(("acme/corrupt", "main")),
    );
    let ms = m.to_str().unwrap().to_string();
    let out = tokio::task::block_in_place(|| env.cmd(&["serve", &ms, "--device", "none"]));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("sha256 mismatch for model.safetensors"), "{t}");
    let c = Command::new(docker())
        .args(["inspect", "tt-model-serve-cli-sha-default"])
        .output()
        .unwrap();
    assert!(!c.status.success(), "no container was created");
}

#[test]
fn print_refusals_and_hints_need_no_engine() {
    let env = Env {
        tmp: TempDir::new(),
        endpoint: "http://127.0.0.1:9".into(),
    };
    let m = env.package(
        "serve-cli-print",
        serde_json::json!(["/serve.sh", "{port}"]),
        None,
    );
    let ms = m.to_str().unwrap();
    let out = env.cmd(&["serve", ms, "--print", "--device", "none"]);
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success());
    assert!(
        line.starts_with("docker run --detach --name tt-model-serve-cli-print-default "),
        "{line}"
    );
    assert!(
        line.contains("--network host") && line.contains("/serve.sh 20000"),
        "{line}"
    );
    assert!(!line.contains("--device"), "no card: {line}");
    let out = env.cmd(&["serve", ms, "--print", "--device-id", "0"]);
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        line.contains("--device /dev/tenstorrent/0:/dev/tenstorrent/0")
            && line.contains("--ipc host"),
        "{line}"
    );
    assert!(line.contains("--cap-add IPC_LOCK"), "{line}");

    let yaml = env.tmp.path().join("tt-model.yaml");
    std::fs::write(&yaml, "name: x\n").unwrap();
    let out = env.cmd(&["serve", yaml.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("is the AUTHORING manifest"));

    let out = env.cmd(&["serve", ms, "--port", "1", "--", "--port", "5"]);
    assert!(
        text(&out).contains("--port must come before the target"),
        "{}",
        text(&out)
    );
    // A package that is not installed: serve would pull it, but `--print` has no side effects
    // and `--local-only` stays off the network, so both refuse with the hint.
    for flag in ["--print", "--local-only"] {
        let out = env.cmd(&["serve", "acme/not-pulled", flag]);
        assert!(
            text(&out).contains("Pull it first:  tt-model pull acme/not-pulled"),
            "{flag}: {}",
            text(&out)
        );
    }
    let out = env.cmd(&["serve", ms, "--device-id", "1,1", "--print"]);
    assert!(text(&out).contains("--device-id must be distinct"));
}

#[test]
fn no_card_is_refused_with_what_is_missing() {
    if Path::new("/dev/tenstorrent").exists() {
        return; // a host with a card serves; this test is about hosts without one
    }
    let env = Env {
        tmp: TempDir::new(),
        endpoint: "http://127.0.0.1:9".into(),
    };
    let m = env.package(
        "serve-cli-nocard",
        serde_json::json!(["/serve.sh", "{port}"]),
        None,
    );
    let out = env.cmd(&["serve", m.to_str().unwrap()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains("/dev/tenstorrent/*")
            && t.contains("/dev/hugepages-1G")
            && t.contains("--device none"),
        "{t}"
    );
}

/// Ctrl-C while serve watches the boot detaches (the container keeps booting), says so, and
/// exits 130 as the original does.
#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_detaches_from_the_boot_and_exits_130() {
    use std::io::BufRead;
    ensure_image();
    let server = HubServer::start(vec![]).await.unwrap();
    let env = Env {
        tmp: TempDir::new(),
        endpoint: server.endpoint(),
    };
    let name = "tt-model-serve-cli-ctrlc-default";
    let _ = Command::new(docker()).args(["rm", "-f", name]).output();
    // Never ready: no ready line, nothing listens.
    let m = env.package(
        "serve-cli-ctrlc",
        serde_json::json!(["sh", "-c", "echo booting; sleep 600"]),
        None,
    );
    let ms = m.to_str().unwrap().to_string();
    let port = free_port().to_string();
    let t = env.tmp.path();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .args(["serve", &ms, "--device", "none", "--port", &port])
        .env("HF_ENDPOINT", &env.endpoint)
        .env("HF_HOME", t.join("hf"))
        .env("HF_HUB_CACHE", t.join("hub"))
        .env_remove("HF_TOKEN")
        .env("TT_MODEL_HOME", t.join("state"))
        .env("TT_MODEL_NETWORK", "host")
        .env("TT_MODEL_ALLOC_LOCK", t.join("alloc.lock"))
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 {
        seen.push_str(&line);
        let started = line.contains("container started");
        line.clear();
        if started {
            break;
        }
    }
    assert!(seen.contains("container started"), "{seen}");
    // Let the watch begin, then interrupt as a terminal would.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    err.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    let running = Command::new(docker())
        .args(["inspect", "-f", "{{.State.Running}}", name])
        .output()
        .unwrap();
    let _ = Command::new(docker()).args(["rm", "-f", name]).output();
    assert_eq!(status.code(), Some(130), "{seen}");
    assert!(
        seen.contains("Ctrl-C: detached from the boot; the container keeps booting"),
        "{seen}"
    );
    assert!(seen.contains("→ stop it: tt-model stop "), "{seen}");
    assert_eq!(
        String::from_utf8_lossy(&running.stdout).trim(),
        "true",
        "the container keeps booting"
    );
}
