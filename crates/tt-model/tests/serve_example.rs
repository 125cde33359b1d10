//! The package issue's example end to end: `package` examples/minimal-http on the busybox base,
//! then `serve --device none` with its pinned weights from the local Hub-protocol server,
//! ready by both signals, GET /health, stop, and the container is gone.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tt_model_hub::testserver::{FakeFile, FakeRepo, HubServer};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cwd: &Path, envs: &[(&str, &Path)], args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tt-model"));
    c.current_dir(cwd)
        .args(args)
        .env("NO_COLOR", "1")
        .env("TT_MODEL_NETWORK", "host")
        .env_remove("HF_TOKEN");
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    eprintln!(
        "$ tt-model {} ({})\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn minimal_http_example_packages_serves_and_stops() {
    let root = repo_root();
    let base = Command::new("bash")
        .arg(root.join("scripts/make-base-images.sh"))
        .output()
        .unwrap();
    assert!(
        base.status.success(),
        "{}",
        String::from_utf8_lossy(&base.stderr)
    );

    let tmp = std::env::temp_dir().join(format!("tt-model-serve-example-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let mut weights = FakeRepo::new(
        "acme/minimal-http-weights",
        vec![FakeFile::lfs("model.safetensors", vec![1u8; 4096])],
    );
    weights.commit = "0123456789abcdef0123456789abcdef01234567".into();
    let server = HubServer::start(vec![weights]).await.unwrap();
    let endpoint = PathBuf::from(server.endpoint());
    let (hub, state, out_dir, lock) = (
        tmp.join("hub"),
        tmp.join("state"),
        tmp.join("out"),
        tmp.join("alloc.lock"),
    );
    let envs: Vec<(&str, &Path)> = vec![
        ("HF_ENDPOINT", &endpoint),
        ("HF_HUB_CACHE", &hub),
        ("TT_MODEL_HOME", &state),
        ("TT_MODEL_ALLOC_LOCK", &lock),
    ];
    let example = root.join("examples/minimal-http");

    let pkg = tokio::task::block_in_place(|| {
        run(
            &example,
            &envs,
            &[
                "package",
                "--container",
                "tt-model.yaml",
                "--base-image",
                "local/busybox:tt-model",
                "--out",
                out_dir.to_str().unwrap(),
            ],
        )
    });
    assert!(pkg.status.success());
    let manifest = out_dir.join("minimal-http/tt_kernel_manifest.json");
    let m = manifest.to_str().unwrap().to_string();
    let _ = Command::new("docker")
        .args(["rm", "-f", "tt-model-minimal-http-default"])
        .output();
    let port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();

    let serve = tokio::task::block_in_place(|| {
        run(
            &tmp,
            &envs,
            &["-v", "serve", &m, "--device", "none", "--port", &port],
        )
    });
    let text = String::from_utf8_lossy(&serve.stderr).to_string();
    assert!(serve.status.success(), "{text}");
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert!(
        text.contains("weights acme/minimal-http-weights@01234567"),
        "{text}"
    );
    let snap = hub.join(
        "models--acme--minimal-http-weights/snapshots/0123456789abcdef0123456789abcdef01234567",
    );
    assert!(snap.join("model.safetensors").is_file());

    let mut s = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    write!(s, "GET /health HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.contains(" 200 "), "{body}");

    let stop = tokio::task::block_in_place(|| run(&tmp, &envs, &["stop", &m]));
    assert!(String::from_utf8_lossy(&stop.stderr).contains("clean shutdown"));
    let gone = Command::new("docker")
        .args(["inspect", "tt-model-minimal-http-default"])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "the container was removed");
    let _ = std::fs::remove_dir_all(&tmp);
}
