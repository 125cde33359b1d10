//! Behind Tenstorrent's own front door (SLOW, `#[ignore]`d; issue 26): the real `tt` CLI (PyPI
//! `tenstorrent==1.2.1`, installed by `scripts/setup.sh` into a venv) drives this `tt-model`
//! through `TT_TOOL_BIN_TT_MODEL`, against the loopback Hub-protocol server holding a pushed
//! `examples/gr00t-tiny` bundle and its golden tiny checkpoint. `tt serve <id> --yes -- --device
//! none` pulls, starts and reaches ready on our NDJSON events (tt tees every line to its serve
//! log, which is read back here), `/predict` through the port answers like NVIDIA's reference,
//! then `tt model ps`, `info`, `profiles`, `search`, `logs`, `stop` and `rm` work on it.
//!
//! What tt relies on (argv, events, state files, labels, tags) is read from its code; the list
//! with file:line references is in docs/serving.md, "Behind the tt CLI". The contract checks
//! are gathered and reported together (one failing check does not hide the next), except where
//! the rest of the run depends on one (tt serve reaching ready).
//!
//! The tt CLI: `$TT_MODEL_TT_CLI`, else `~/.cache/tt-model-ci/tt-venv/bin/tt`; missing, the test
//! says so and passes, except under `CI`, where it fails.

use crate::common;
use crate::gr00t_image::{
    case1_actions, case1_request, check_actions, example_yaml, http, weights_repo,
};

use std::path::PathBuf;
use std::process::{Command, Output};

use common::*;
use tt_model_testkit::hub::{HubServer, TEST_TOKEN};

/// The bundle: the id `tt-model push` publishes it under (the manifest's `repo:`), and its
/// package name (the container is `tt-model-<name>-<profile>`). Not the example's own: the
/// GR00T image test (gr00t_image.rs) may run beside this one with that image and container.
const ID: &str = "acme/gr00t-tiny-tt";
const NAME: &str = "gr00t-tiny-tt";
const CONTAINER: &str = "tt-model-gr00t-tiny-tt-default";
/// The variable naming the `tt` executable; its default is where `scripts/setup.sh` puts it.
const TT_CLI_ENV: &str = "TT_MODEL_TT_CLI";

/// The `tt` executable, or `None` (the reason printed) where it is not installed; under `CI`
/// a missing tt is a failure, never a skip.
fn tt_cli_or_skip() -> Option<PathBuf> {
    let path = std::env::var_os(TT_CLI_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/tt-model-ci/tt-venv/bin/tt")
        });
    if path.is_file() {
        return Some(path);
    }
    let why = format!(
        "the tt CLI is not at {} (scripts/setup.sh installs tenstorrent==1.2.1 there; {TT_CLI_ENV} names another)",
        path.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("SKIPPED: {why}");
    None
}

/// The state tt and tt-model share: tt reads tt-model's `installed.json` under
/// `$XDG_CACHE_HOME/tt-model` (it ignores `TT_MODEL_HOME`), so both run with that root.
struct World {
    t: PathBuf,
    tt: PathBuf,
    hub: String,
}

impl World {
    fn state(&self) -> PathBuf {
        self.t.join("xdg/tt-model")
    }

    /// The environment both programs get: every home inside the test's directory.
    fn env(&self, c: &mut Command) {
        let t = &self.t;
        c.current_dir(t)
            .env("XDG_CACHE_HOME", t.join("xdg"))
            .env("HF_HOME", t.join("hf"))
            .env("HF_HUB_CACHE", t.join("hub"))
            .env("HF_ENDPOINT", &self.hub)
            .env("TT_MODEL_ALLOC_LOCK", t.join("alloc.lock"))
            // CI's engine has no bridge network (scripts/ensure-docker.sh).
            .env("TT_MODEL_NETWORK", "host")
            .env("NO_COLOR", "1")
            .env_remove("TT_MODEL_HOME")
            .env_remove("HF_TOKEN");
    }

    /// `tt <args>`, pointed at this build's `tt-model`; its own state in the test's directory,
    /// telemetry and the update check off (nothing outside loopback is reachable).
    fn tt(&self, args: &[&str]) -> Output {
        let t = &self.t;
        let mut c = Command::new(&self.tt);
        self.env(&mut c);
        // HOME too (tt's platformdirs fallbacks), only for tt: packaging runs cargo, whose
        // toolchain rustup finds under the real HOME.
        c.args(args)
            .env("HOME", t.join("home"))
            .env("TT_TOOL_BIN_TT_MODEL", env!("CARGO_BIN_EXE_tt-model"))
            .env("TT_DATA_DIR", t.join("tt-data"))
            .env("TT_CONFIG_DIR", t.join("tt-config"))
            .env("TT_CACHE_DIR", t.join("tt-cache"))
            .env("TT_TELEMETRY_DISABLED", "1")
            .env("DO_NOT_TRACK", "1")
            .env("TT_NO_UPDATE_CHECK", "1")
            .env("TT_NO_PAGER", "1")
            // A hung boot fails the test in minutes, not tt's default hour.
            .env("TT_SERVE_READY_TIMEOUT", "600");
        let out = c.output().unwrap();
        eprintln!(
            "$ tt {} ({})\n{}{}",
            args.join(" "),
            out.status,
            stdout(&out),
            stderr(&out)
        );
        out
    }

    /// `tt-model <args>` directly (packaging and publishing, which tt forwards verbatim).
    fn tt_model(&self, extra: &[(&str, &str)], args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tt-model"));
        self.env(&mut c);
        c.args(args).envs(extra.iter().copied());
        let out = c.output().unwrap();
        eprintln!(
            "$ tt-model {} ({})\n{}{}",
            args.join(" "),
            out.status,
            stdout(&out),
            stderr(&out)
        );
        out
    }

    /// `installed.json` as tt reads it (`tenstorrent/modelhub/bundles.py:200`).
    fn installed(&self) -> serde_json::Value {
        std::fs::read(self.state().join("installed.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| serde_json::json!({}))
    }
}

/// The contract's checks, gathered: each failure is kept with what tt said, and all of them
/// fail the test together at the end.
#[derive(Default)]
struct Checks(Vec<String>);

impl Checks {
    fn check(&mut self, ok: bool, what: &str, evidence: impl std::fmt::Display) {
        if !ok {
            eprintln!("CHECK FAILED: {what}\n{evidence}");
            self.0.push(format!("{what}\n    {evidence}"));
        }
    }

    /// A `tt` command that must exit 0.
    fn ran(&mut self, out: &Output, what: &str) -> bool {
        let ok = out.status.success();
        self.check(
            ok,
            what,
            format_args!("{}: {}{}", out.status, stdout(out), stderr(out)),
        );
        ok
    }
}

/// A command's stdout as JSON (`Null` when it is not).
fn json_or_null(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
}

/// The one serve log tt wrote under `logs` (`serve-<ns>--<name>-<time>.log`), or "".
fn tt_serve_log(logs: &std::path::Path) -> String {
    let prefix = format!("serve-{}-", ID.replace('/', "--"));
    let found: Vec<PathBuf> = std::fs::read_dir(logs)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let mine: Vec<&PathBuf> = found
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect();
    assert_eq!(
        mine.len(),
        1,
        "one serve log under {}: {found:?}",
        logs.display()
    );
    std::fs::read_to_string(mine[0]).unwrap()
}

/// The port in a `container` event's endpoint, read as tt reads it
/// (`preparation.py:_port_of`: `://host:PORT`, any path after it).
fn endpoint_port(endpoint: &serde_json::Value) -> Option<&str> {
    let rest = endpoint.as_str()?.split_once("://")?.1;
    let port = rest.split('/').next()?.rsplit_once(':')?.1;
    (!port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())).then_some(port)
}

/// Packages the example (building `gr00t-server`), publishes it to the Hub with the catalog
/// tag, and removes every local trace of it, so that `tt serve` has to pull. Returns the image.
fn publish_the_example(w: &World, env: &[(&str, &str)]) -> String {
    let yaml = example_yaml(&w.t);
    let text = std::fs::read_to_string(&yaml).unwrap();
    let text = text
        .replace("\nname: gr00t-tiny\n", &format!("\nname: {NAME}\n"))
        .replace(
            "\nrepo: acme/gr00t-n1.6-tiny-rs\n",
            &format!("\nrepo: {ID}\n"),
        );
    assert!(
        text.contains(&format!("\nname: {NAME}\n")) && text.contains(&format!("\nrepo: {ID}\n"))
    );
    std::fs::write(&yaml, text).unwrap();
    let out = w.t.join("out");
    let mut args = vec!["package", "--container", yaml.to_str().unwrap()];
    args.extend(["--base-image", BASE, "--out", out.to_str().unwrap()]);
    let pkg = w.tt_model(env, &args);
    assert!(pkg.status.success(), "{}", stderr(&pkg));
    let staged = out.join(NAME);
    let wire: serde_json::Value =
        serde_json::from_slice(&std::fs::read(staged.join("tt_kernel_manifest.json")).unwrap())
            .unwrap();
    assert_eq!(wire["container"]["built"]["repo"], ID, "the example's repo");
    let image = wire["container"]["built"]["image"]
        .as_str()
        .unwrap()
        .to_string();
    let mut push_env = env.to_vec();
    push_env.push(("HF_TOKEN", TEST_TOKEN));
    let push = w.tt_model(&push_env, &["push", staged.to_str().unwrap(), "--publish"]);
    assert!(push.status.success(), "{}", stderr(&push));
    let rm = w.tt_model(env, &["rm", NAME]);
    assert!(rm.status.success(), "{}", stderr(&rm));
    std::fs::remove_dir_all(&out).unwrap();
    image
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "slow end to end: builds gr00t-server, then serves it through the tt CLI; run with --ignored (CI does)"]
async fn tt_cli_serves_a_pushed_gr00t_bundle_through_tt_model() {
    let Some(client) = engine().await else { return };
    let Some(tt) = tt_cli_or_skip() else { return };
    make_base_images();
    let tmp = TempDir::new("tt-cli-e2e");
    let server = HubServer::start(vec![weights_repo()]).await.unwrap();
    let w = World {
        t: tmp.0.clone(),
        tt,
        hub: server.endpoint(),
    };
    let _ = client.remove_container_force(CONTAINER).await;
    // As gr00t_image.rs: CI builds the shipped binary at opt-level 1 (f32 results do not
    // depend on it), without line tables.
    let mut env = vec![("TT_MODEL_CARGO_DEBUG", "0")];
    if std::env::var_os("CI").is_some() {
        env.push(("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1"));
    }
    let image = tokio::task::block_in_place(|| publish_the_example(&w, &env));
    assert!(
        client.image(&image).await.unwrap().is_none(),
        "nothing local is left: tt serve has to pull"
    );
    let mut c = Checks::default();
    let tt = |args: &[&str]| tokio::task::block_in_place(|| w.tt(args));

    // ── the Hub tags tt classifies a bundle by (bundles.py:_classify) ──
    let listed = tt(&[
        "model",
        "list",
        "--community",
        "--include-unverified",
        "--hw",
        "p150",
        "--json",
    ]);
    c.ran(&listed, "tt model list --community --include-unverified");
    let rows = json_or_null(&listed)["models"].clone();
    let row = rows
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["name"] == ID && r["source"] == "HuggingFace")
        })
        .cloned()
        .unwrap_or_default();
    c.check(
        row["kind"] == "container"
            && row["arch"] == serde_json::json!(["blackhole"])
            && row["hardware"] == serde_json::json!(["p150"])
            && row["engine"] == "http-server",
        "tt lists the pushed bundle as a p150 blackhole container (push tags: tt-model-container, blackhole, p150, http-server)",
        format_args!("row {row}; repo tags {:?}", server.tags(ID)),
    );

    // ── tt serve: pulls, starts, ready on our events ──
    // Human output, not `--json`: tt then prints its checklist (stderr), the rows it drew from
    // our events, and the ready card (stdout).
    let port = free_port();
    let serve = tt(&[
        "serve", ID, "--yes", "--port", &port, "--", "--device", "none",
    ]);
    let said = format!("{}{}", stdout(&serve), stderr(&serve));
    assert!(
        serve.status.success() && said.contains(&format!("{ID} ready")),
        "tt serve reached ready: {}\n{said}",
        serve.status,
    );
    c.check(
        said.contains(&format!("http://127.0.0.1:{port}/v1")),
        "tt's ready card names the port it asked for",
        &said,
    );
    // tt's checklist words the shared steps itself once it has read them, and shows ours.
    c.check(
        [
            "✓ container started",
            "✓ weights ready",
            "✓ image ready",
            "✓ host ready",
        ]
        .iter()
        .all(|row| said.contains(row)),
        "tt drew its shared rows (host, image, weights, container) from our step events",
        &said,
    );
    // tt tees every line (ours, then the container's log) to one file per serve.
    let log = tt_serve_log(&w.t.join("tt-data/logs"));
    let events: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| l.trim_start().starts_with('{') && l.contains("\"event\""))
        .filter_map(|l| serde_json::from_str(l.trim()).ok())
        .collect();
    let step = |key: &str, state: &str| {
        events
            .iter()
            .any(|e| e["event"] == "step" && e["key"] == key && e["state"] == state)
    };
    c.check(
        step("weights", "done") && step("image", "done") && step("container", "done"),
        "the serve log holds our step events (weights, image, container settled)",
        &log,
    );
    let container_event = events.iter().find(|e| e["event"] == "container");
    c.check(
        container_event.is_some_and(|e| {
            e["id"] == CONTAINER && endpoint_port(&e["endpoint"]) == Some(port.as_str())
        }),
        "the serve log holds our container event (its id and endpoint)",
        &log,
    );
    c.check(
        events
            .iter()
            .any(|e| e["event"] == "progress" && e["unit"] == "bytes"),
        "the serve log holds byte progress (weights or image)",
        &log,
    );
    c.check(
        log.contains("gr00t-server ready on"),
        "tt followed the container's own log",
        &log,
    );
    // ── /predict through the port tt reported equals the golden ──
    let body = serde_json::to_vec(&case1_request()).unwrap();
    let (code, resp) = tokio::task::block_in_place(|| http(&port, "POST", "/predict", &body));
    assert_eq!(code, 200, "{resp}");
    let worst = check_actions(&resp["actions"], &case1_actions());
    eprintln!("MEASURED max |action - reference| through tt serve = {worst:.3e}");

    // ── the state tt reads directly (bundles.py:192-235) ──
    let installed = w.installed();
    let entry = &installed[ID.to_lowercase().as_str()];
    let manifest: serde_json::Value = entry["manifest"]
        .as_str()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    c.check(
        entry["repo_id"] == ID && manifest["container"]["kind"] == "http-server",
        "installed.json records the pulled bundle with its manifest",
        &installed,
    );

    // ── tt model ps: our container, by its labels (ps.py:186) ──
    let ps = tt(&["model", "ps", "--json"]);
    c.ran(&ps, "tt model ps");
    let served = json_or_null(&ps)["served"].clone();
    let ours = served
        .as_array()
        .and_then(|r| r.iter().find(|r| r["container"] == CONTAINER))
        .cloned()
        .unwrap_or_default();
    c.check(
        ours["name"] == ID
            && ours["backend"] == "model-manager"
            && ours["status"] == "running"
            && ours["profile"] == "default",
        "tt model ps lists the bundle as a running model-manager server",
        &served,
    );

    // ── tt model info: the manifest and our verdict (model_manager.py:393-427) ──
    let info = tt(&["model", "info", ID]);
    c.ran(&info, "tt model info");
    let text = stdout(&info);
    c.check(
        text.contains("compatibility") && text.contains("docker image"),
        "tt model info shows tt-model's compatibility verdict beside the manifest's fields",
        &text,
    );
    let info = tt(&["model", "info", ID, "--json"]);
    c.ran(&info, "tt model info --json");
    let serve_row = json_or_null(&info)["serve"].clone();
    c.check(
        serve_row["engine"] == "http-server"
            && serve_row["arch"] == "blackhole"
            && serve_row["hardware"] == "p150"
            && serve_row["profiles"] == serde_json::json!(["default"])
            && serve_row["weights_repo"] == "tt-model-fixtures/gr00t-n1.6-tiny"
            && serve_row["image"].is_string(),
        "tt model info --json reads the pulled manifest's fields",
        &serve_row,
    );

    // ── tt model profiles: tt-model's table, and tt's own read of the manifest ──
    let profiles = tt(&["model", "profiles", ID]);
    if c.ran(&profiles, "tt model profiles") {
        c.check(
            stdout(&profiles).contains("default"),
            "tt model profiles lists the default profile",
            stdout(&profiles),
        );
    }
    let profiles = tt(&["model", "profiles", ID, "--json"]);
    c.ran(&profiles, "tt model profiles --json");
    c.check(
        json_or_null(&profiles)["default"] == "default",
        "tt model profiles --json names the default",
        stdout(&profiles),
    );

    // ── tt model search: tt-model's search --json rows (model_manager.py:434-470) ──
    let search = tt(&["model", "search", "gr00t", "--json"]);
    c.ran(&search, "tt model search");
    let found = json_or_null(&search)["bundles"].clone();
    c.check(
        found.as_array().is_some_and(|rows| {
            rows.iter().any(|r| {
                r["name"] == ID
                    && r["private"] == false
                    && r["installed"] == true
                    && r["last_modified"].is_string()
            })
        }),
        "tt model search finds the public, installed bundle",
        &found,
    );

    // ── tt model logs, stop, rm ──
    let logs = tt(&["model", "logs", ID]);
    c.ran(&logs, "tt model logs");
    c.check(
        format!("{}{}", stdout(&logs), stderr(&logs)).contains("gr00t-server ready on"),
        "tt model logs shows the container's log",
        stdout(&logs),
    );
    let stop = tt(&["model", "stop", ID]);
    c.ran(&stop, "tt model stop");
    c.check(
        client.container(CONTAINER).await.unwrap().is_none(),
        "tt model stop removed the container",
        CONTAINER,
    );
    let rm = tt(&["model", "rm", ID, "--yes"]);
    c.ran(&rm, "tt model rm");
    c.check(
        w.installed().get(ID.to_lowercase()).is_none(),
        "tt model rm dropped the installed.json entry",
        w.installed(),
    );
    c.check(
        client.image(&image).await.unwrap().is_none(),
        "tt model rm removed the image",
        &image,
    );
    let _ = client.remove_container_force(CONTAINER).await;

    // ── a serve that fails before any container: tt words it from our `error` event
    // (boot.py:664-673: "<id> could not start: <cause>."), not from the prose tail ──
    let missing = tt(&["serve", "acme/nope", "--yes", "--", "--device", "none"]);
    let said = format!("{}{}", stdout(&missing), stderr(&missing));
    c.check(
        !missing.status.success() && said.contains("acme/nope could not start:"),
        "tt reports a failed serve with the cause from our error event",
        &said,
    );

    assert!(
        c.0.is_empty(),
        "{} check(s) of the tt contract failed:\n  {}",
        c.0.len(),
        c.0.join("\n  ")
    );
}
