//! The Python kinds end to end on the real engine, through the `tt-model` binary: each fixture
//! of `tests/fixtures/python-kinds` is packaged on `local/python:tt-model` (the Debian base
//! `scripts/make-base-images.sh` builds; PyPI reached at build time with `--build-network
//! host`), verify's Python checks run inside as uid 1000 with no network, the image carries
//! what a card host needs (tt-smi, `/opt/tenstorrent`, the entrypoint), a re-package is a
//! no-op, then `serve --device none` waits for the kind's ready line (these fixtures declare no
//! `health_path`, so, as in the original, the line alone decides), the server answers, and
//! `stop` removes the container.
//!
//! Slow (a cold build downloads the HTTP stack and tt-smi from PyPI), so `#[ignore]`d: CI runs
//! it in its `--ignored` pass. All Python fixtures live in this one binary so they share the
//! base image and one build of the CLI.

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use tt_model_engine::oneshot::OneShot;
use tt_model_package::launcher::TT_SMI_VERSION;
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

/// The Python base `scripts/make-base-images.sh` builds.
const PYTHON_BASE: &str = "local/python:tt-model";

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/python-kinds")
}

/// The fixture's manifest with its relative roots made absolute (the binary runs in a temp
/// dir; relative paths are read from the working directory, as the original tool does).
fn fixture_yaml(tmp: &Path, fixture: &str, roots: &[&str]) -> PathBuf {
    let dir = fixtures().join(fixture);
    let mut text = std::fs::read_to_string(dir.join("tt-model.yaml")).unwrap();
    for root in roots {
        let abs = dir.join(root).canonicalize().unwrap();
        for key in ["tt_metal: ", "root: "] {
            text = text.replace(
                &format!("{key}{root}\n"),
                &format!("{key}{}\n", abs.display()),
            );
        }
        assert!(text.contains(&*abs.to_string_lossy()), "{root} replaced");
    }
    let path = tmp.join("tt-model.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The fixtures run one at a time: they share the engine's build cache (the same base and
/// builder stage), and one fixture removing its image (which prunes untagged parents) while
/// another builds made the other's no-op re-package rebuild in a fresh-clone CI run. The GR00T
/// image test (busybox base, no shared stage) may run beside them.
static PYTHON_KINDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn package_python(tmp: &Path, yaml: &Path, out: &Path) -> std::process::Output {
    tt_model(
        tmp,
        &[],
        &[
            "package",
            "--container",
            yaml.to_str().unwrap(),
            "--base-image",
            PYTHON_BASE,
            "--build-network",
            "host",
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

/// The raw HTTP/1.0 response of `GET path` on 127.0.0.1:`port`.
fn get(port: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// [`get`] once `port` accepts a connection, waiting at most `patience`.
fn get_when_listening(port: &str, path: &str, patience: Duration) -> String {
    let until = Instant::now() + patience;
    let addr = ("127.0.0.1", port.parse::<u16>().unwrap());
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < until,
            "nothing listens on {port} after {patience:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    get(port, path)
}

fn body_json(response: &str) -> serde_json::Value {
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}

/// Runs `script` with `sh -c` in `image` as the runtime user, without network.
async fn in_image(client: &tt_model_engine::Client, image: &str, script: &str) -> (i64, String) {
    let run = client
        .run_to_completion(&OneShot {
            image: image.to_string(),
            entrypoint: Some(vec![]),
            cmd: vec!["sh".into(), "-c".into(), script.into()],
            user: Some("1000:1000".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    (run.exit_code, run.output)
}

/// What every Python-kind image must carry for a card host: tt-smi on PATH (stop's reset runs
/// `tt-smi -r` from the image) at the pinned version, `/opt/tenstorrent`, the entrypoint, the
/// venv, and `TT_VLLM_BUILTIN_MODELS` declared.
async fn assert_card_host_parts(client: &tt_model_engine::Client, image: &str) {
    let (code, out) = in_image(
        client,
        image,
        "set -e; command -v tt-smi; tt-smi --help >/dev/null; \
         /opt/tt-venv/bin/python -c 'import importlib.metadata as m; print(\"tt-smi\", m.version(\"tt-smi\"))'; \
         test -d /opt/tenstorrent; test -x /usr/local/bin/entrypoint.sh; \
         env | grep -q '^TT_VLLM_BUILTIN_MODELS='; id -u",
    )
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("/opt/tt-venv/bin/tt-smi"), "{out}");
    assert!(out.contains(&format!("tt-smi {TT_SMI_VERSION}")), "{out}");
}

fn weights_repo(id: &str) -> FakeRepo {
    let mut weights = FakeRepo::new(
        id,
        vec![FakeFile::lfs("model.safetensors", vec![7u8; 1024])],
    );
    weights.commit = "0123456789abcdef0123456789abcdef01234567".into();
    weights
}

/// A package made from a fixture, served: what the kind-specific checks need.
struct Served {
    tmp: TempDir,
    dir: PathBuf,
    wire: serde_json::Value,
    image: String,
    port: String,
    container: String,
    _hub: HubServer,
    env: Vec<(String, String)>,
}

impl Served {
    fn manifest(&self) -> String {
        self.dir
            .join("tt_kernel_manifest.json")
            .to_string_lossy()
            .into_owned()
    }

    fn built(&self) -> &serde_json::Value {
        &self.wire["container"]["built"]
    }

    /// `tt-model stop`, then the container is gone and the image removed (disk hygiene).
    async fn stop(self, client: &tt_model_engine::Client) {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let m = self.manifest();
        let stop = tokio::task::block_in_place(|| tt_model(&self.tmp.0, &env, &["stop", &m]));
        assert!(stop.status.success(), "{}", stderr(&stop));
        assert!(
            client.container(&self.container).await.unwrap().is_none(),
            "the container was removed"
        );
        let _ = client.remove_image(&self.image).await;
    }

    /// What the launcher runs for the default profile on this port (the golden the server's
    /// recorded argv/env must equal), from the wire manifest as `serve` reads it.
    /// What `serve` launches for the default profile: the package's launcher plus what serve
    /// adds (the pinned weights revision: `TT_MODEL_WEIGHTS_REVISION`, and `--revision` for
    /// vllm-plugin), from the one function serve itself calls.
    fn launcher_golden(&self) -> tt_model_manifest::launch::ServerCommand {
        let pkg = tt_model_local::package::Package::load(Path::new(&self.manifest())).unwrap();
        pkg.launch(pkg.profile(None).unwrap(), self.port.parse().unwrap())
    }
}

/// Package `yaml` (already written into `tmp`), check the outputs every Python kind shares,
/// re-package (a no-op: same image), then `serve --device none` until ready by the ready line
/// (no `health_path` declared: the original's readiness).
async fn package_and_serve(
    client: &tt_model_engine::Client,
    tmp: TempDir,
    yaml: &Path,
    name: &str,
    weights: &str,
) -> Served {
    let t = tmp.0.clone();
    let out = t.join("out");

    let started = Instant::now();
    let pkg = tokio::task::block_in_place(|| package_python(&t, yaml, &out));
    let first_secs = started.elapsed().as_secs_f64();
    assert!(pkg.status.success(), "{}", stderr(&pkg));
    assert!(
        stderr(&pkg).contains("checks passed inside the image"),
        "{}",
        stderr(&pkg)
    );
    let dir = out.join(name);
    let read_wire = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("tt_kernel_manifest.json")).unwrap())
            .unwrap()
    };
    let wire = read_wire();
    let built = &wire["container"]["built"];
    let image = built["image"].as_str().unwrap().to_string();
    let digest = built["image_digest"].as_str().unwrap().to_string();
    let base = built["base_images"]["runtime"].as_str().unwrap();
    assert!(
        base.starts_with(&format!("{PYTHON_BASE}@sha256:")),
        "{base}"
    );
    // The frozen lock pins what PyPI gave the build, tt-smi included; never ttnn.
    let lock = std::fs::read_to_string(dir.join("requirements.lock")).unwrap();
    assert!(
        lock.lines()
            .any(|l| l == format!("tt-smi=={TT_SMI_VERSION}")),
        "{lock}"
    );
    assert!(!lock.contains("ttnn=="), "{lock}");
    assert_card_host_parts(client, &image).await;

    // A no-op re-package: the same image, verify and export reused.
    let started = Instant::now();
    let again = tokio::task::block_in_place(|| package_python(&t, yaml, &out));
    let noop_secs = started.elapsed().as_secs_f64();
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("same image as the previous package"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        read_wire()["container"]["built"]["image_digest"],
        digest.as_str()
    );
    let size = client
        .image(&image)
        .await
        .unwrap()
        .map(|f| format!("{f:?}"))
        .unwrap_or_default();
    eprintln!(
        "MEASURE {name}: package {first_secs:.1} s, no-op re-package {noop_secs:.2} s, image {image} {}",
        size.chars().take(300).collect::<String>()
    );

    let hub = HubServer::start(vec![weights_repo(weights)]).await.unwrap();
    let env = vec![("HF_ENDPOINT".to_string(), hub.endpoint())];
    let container = format!("tt-model-{name}-default");
    let _ = client.remove_container_force(&container).await;
    let port = free_port();
    let served = Served {
        tmp,
        dir,
        wire,
        image,
        port,
        container,
        _hub: hub,
        env,
    };
    let m = served.manifest();
    let env: Vec<(&str, &str)> = served
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let serve = tokio::task::block_in_place(|| {
        tt_model(
            &t,
            &env,
            &[
                "-v",
                "serve",
                &m,
                "--device",
                "none",
                "--port",
                &served.port,
            ],
        )
    });
    let text = stderr(&serve);
    assert!(serve.status.success(), "{text}");
    assert!(text.contains("(ready by ready line)"), "{text}");
    assert!(!text.contains("probing the health endpoint"), "{text}");
    // Ready by the line alone, the server may still be a moment from listening (uvicorn logs
    // its startup before it binds): allow it a few seconds.
    let health = get_when_listening(&served.port, "/health", Duration::from_secs(10));
    assert!(health.contains(" 200 "), "{health}");
    served
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow: builds a Python image from the Debian base and PyPI (minutes cold)"]
async fn dit_server_packages_verifies_serves_and_stops() {
    let _one_at_a_time = PYTHON_KINDS.lock().await;
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("py-dit");
    let yaml = fixture_yaml(&tmp.0, "dit-server", &["../tt-metal", "app"]);
    let served = package_and_serve(&client, tmp, &yaml, "dit-tiny", "acme/dit-tiny-weights").await;
    let lock = std::fs::read_to_string(served.dir.join("requirements.lock")).unwrap();
    for pin in ["fastapi==0.165.0", "uvicorn==0.54.0", "pydantic==2.14.4"] {
        assert!(lock.lines().any(|l| l == pin), "{pin} in\n{lock}");
    }
    let info = body_json(&get(&served.port, "/info"));
    let golden = served.launcher_golden();
    assert_eq!(info["hf_model"], "acme/dit-tiny-weights", "{info}");
    assert_eq!(
        info["mesh_shape"],
        golden.env["FLUX2_MESH_SHAPE"].as_str(),
        "{info}"
    );
    assert_eq!(info["python"], "/opt/tt-venv/bin/python", "{info}");
    // uvicorn got the launcher's flags (`python -m uvicorn` is argv[0] = its __main__).
    assert_eq!(golden.argv[..3], ["python", "-m", "uvicorn"]);
    let got: Vec<String> = serde_json::from_value(info["argv"].clone()).unwrap();
    assert_eq!(got[1..], golden.argv[3..], "argv");
    // serve runs the container as the invoking user, as the original does (--user uid:gid).
    let me = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&served.dir).unwrap());
    assert_eq!(info["uid"], me, "{info}");
    served.stop(&client).await;
}

/// The stand-in's record of its launch: argv and environment.
fn launch_record(port: &str) -> serde_json::Value {
    body_json(&get(port, "/stand-in/launch"))
}

/// Every variable of the launcher's environment reached the server with its value.
fn assert_env_reached(
    golden: &tt_model_manifest::launch::ServerCommand,
    record: &serde_json::Value,
) {
    for (k, v) in &golden.env {
        assert_eq!(record["env"][k], v.as_str(), "{k} in {}", record["env"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow: builds a Python image from the Debian base and PyPI (minutes cold)"]
async fn vllm_plugin_with_local_plugin_and_vllm_paths_serves_as_the_launcher_says() {
    let _one_at_a_time = PYTHON_KINDS.lock().await;
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("py-vllm-plugin");
    let yaml = fixture_yaml(&tmp.0, "vllm-plugin", &["../tt-metal"]);
    // The two local sources, made absolute like the tree.
    let dir = fixtures().join("vllm-plugin");
    let text = std::fs::read_to_string(&yaml)
        .unwrap()
        .replace(
            "vllm: {path: ../vllm-stand-in}",
            &format!(
                "vllm: {{path: {}}}",
                fixtures().join("vllm-stand-in").display()
            ),
        )
        .replace(
            "plugin: {path: vllm-tt-plugin}",
            &format!("plugin: {{path: {}}}", dir.join("vllm-tt-plugin").display()),
        );
    std::fs::write(&yaml, text).unwrap();
    let served = package_and_serve(&client, tmp, &yaml, "llm-tiny", "acme/llm-tiny-weights").await;
    let built = served.built();
    assert!(
        built["plugin"]["path"]
            .as_str()
            .unwrap()
            .ends_with("vllm-tt-plugin"),
        "{built}"
    );
    assert!(
        built["vllm"]["path"]
            .as_str()
            .unwrap()
            .ends_with("vllm-stand-in"),
        "{built}"
    );

    let models = body_json(&get(&served.port, "/v1/models"));
    assert_eq!(models["data"][0]["id"], "acme/llm-tiny-weights", "{models}");
    let record = launch_record(&served.port);
    let golden = served.launcher_golden();
    // The image's `vllm` console script got exactly the launcher's argv after the program.
    assert_eq!(golden.argv[0], "vllm");
    let got: Vec<String> = serde_json::from_value(record["argv"].clone()).unwrap();
    assert_eq!(got, golden.argv[1..], "argv");
    assert_env_reached(&golden, &record);
    assert_eq!(record["plugin_importable"], true, "{record}");
    assert_eq!(record["cwd"], "/home/tt/work", "{record}");
    served.stop(&client).await;
}

/// A bare repository at `git/<name>.git` holding `files` (copied trees) in one commit on
/// `main`, with an annotated tag `v1` on it. Returns its commit.
fn bare_repo(git: &Path, name: &str, trees: &[(&Path, &str)]) -> String {
    let work = git.join(format!("{name}-work"));
    std::fs::create_dir_all(&work).unwrap();
    for (src, dest) in trees {
        copy_tree(src, &work.join(dest));
    }
    let run = |dir: &Path, args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    run(&work, &["init", "-q"]);
    run(&work, &["add", "-A"]);
    run(&work, &["commit", "-q", "-m", "fixture"]);
    run(&work, &["tag", "-a", "v1", "-m", "v1"]);
    let bare = git.join(format!("{name}.git"));
    run(
        git,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    // A later commit on main that the pinned tag does not include.
    std::fs::write(work.join("LATER"), "after v1\n").unwrap();
    run(&work, &["add", "-A"]);
    run(&work, &["commit", "-q", "-m", "later"]);
    run(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    run(&bare, &["rev-parse", "main"])
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow: builds a Python image from the Debian base and PyPI (minutes cold)"]
async fn vllm_fork_from_pinned_git_sources_serves_as_the_launcher_says() {
    let _one_at_a_time = PYTHON_KINDS.lock().await;
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("py-vllm-fork");
    let git = tmp.0.join("git");
    std::fs::create_dir_all(&git).unwrap();
    let fx = fixtures();
    let metal_main = bare_repo(&git, "tt-metal", &[(&fx.join("tt-metal"), "")]);
    let vllm_main = bare_repo(
        &git,
        "vllm",
        &[
            (&fx.join("vllm-stand-in"), ""),
            (
                &fx.join("vllm-plugin/vllm-tt-plugin"),
                "plugins/vllm-tt-plugin",
            ),
        ],
    );
    let extra_dir = tmp.0.join("extra-src/fork_extra");
    std::fs::create_dir_all(&extra_dir).unwrap();
    std::fs::write(extra_dir.join("__init__.py"), "PINNED = True\n").unwrap();
    bare_repo(&git, "extra", &[(&tmp.0.join("extra-src"), "")]);
    let extra_v1 = {
        let out = std::process::Command::new("git")
            .args([
                "-C",
                git.join("extra.git").to_str().unwrap(),
                "rev-parse",
                "v1^{commit}",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let text = std::fs::read_to_string(fx.join("vllm-fork/tt-model.yaml"))
        .unwrap()
        .replace("@GIT@", &format!("file://{}", git.display()));
    let yaml = tmp.0.join("tt-model.yaml");
    std::fs::write(&yaml, text).unwrap();

    let served = package_and_serve(
        &client,
        tmp,
        &yaml,
        "llm-fork-tiny",
        "acme/llm-fork-tiny-weights",
    )
    .await;
    let built = served.built();
    // Every ref pinned: branches to their tip at package time, the tag to its commit.
    assert_eq!(built["tt_metal"]["sha"], metal_main.as_str(), "{built}");
    assert_eq!(built["tt_metal"]["mode"], "git", "{built}");
    assert_eq!(built["vllm"]["sha"], vllm_main.as_str(), "{built}");
    assert_eq!(built["extra_code"][0]["sha"], extra_v1.as_str(), "{built}");
    assert_eq!(built["extra_code"][0]["ref"], "v1", "{built}");

    let record = launch_record(&served.port);
    let golden = served.launcher_golden();
    // The runner was started with the launcher's argv (`python -m <runner>` then its flags).
    assert_eq!(
        golden.argv[..3],
        [
            "python",
            "-m",
            "models.common.readiness_check.run_vllm_server"
        ]
    );
    let got: Vec<String> = serde_json::from_value(record["argv"].clone()).unwrap();
    let after = got.iter().position(|a| a == "--runner-argv").unwrap() + 1;
    assert_eq!(got[after..], golden.argv[3..], "argv");
    assert_env_reached(&golden, &record);
    let (code, out) = in_image(
        &client,
        &served.image,
        "test ! -e /opt/vllm/.git && ls /opt/vllm/plugins",
    )
    .await;
    assert_eq!(code, 0, "{out}");
    served.stop(&client).await;
}
