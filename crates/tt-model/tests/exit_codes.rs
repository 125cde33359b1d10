//! Exit codes as the original's: `1` with a diagnosis card for an unreachable engine or a Hub
//! failure (every command that needs one), `1` with `lint`'s rendering for a manifest with
//! errors (package, serve --print), `2` for usage errors.

use crate::common;

use std::path::Path;

use common::{TempDir, repo_root, stderr, tt_model};

/// No engine listens here, and no Hub.
const NO_ENGINE: (&str, &str) = (
    "DOCKER_HOST",
    "unix:///nonexistent/tt-model-test/docker.sock",
);

fn staged(tmp: &Path) -> String {
    let dir = tmp.join("out/exit-codes");
    std::fs::create_dir_all(&dir).unwrap();
    let m = serde_json::json!({
        "schema_version": "5.1",
        "name": "exit-codes",
        "container": {
            "image": {"registry": "hf", "repository": "tt-model-test/busybox-serve", "tag": "1"},
            "kind": "http-server",
            "runtime": {"command": ["/serve.sh", "{port}"], "ready_line": "up", "health_path": "/health"},
            "serve": {"hardware": "p150"},
            "serve_profiles": [{"name": "default"}],
            "default_profile": "default"
        }
    });
    let p = dir.join("tt_kernel_manifest.json");
    std::fs::write(&p, m.to_string()).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn an_unreachable_engine_is_a_card_and_exit_1_for_every_command() {
    let tmp = TempDir::new("exit-engine");
    let t = &tmp.0;
    let m = staged(t);
    let ex = repo_root().join("examples/minimal-http");
    let src = std::fs::read_to_string(ex.join("tt-model.yaml"))
        .unwrap()
        .replace("../../", &format!("{}/", repo_root().display()));
    let yaml = t.join("tt-model.yaml");
    std::fs::write(&yaml, src).unwrap();
    let out = t.join("pkgs");
    let hub = ("HF_ENDPOINT", "http://127.0.0.1:9");
    for args in [
        vec!["ps"],
        vec!["stop", "exit-codes"],
        vec!["logs", "exit-codes"],
        vec!["rm", "exit-codes"],
        vec!["serve", m.as_str(), "--device", "none"],
        vec!["pull", "acme/exit-codes"],
        vec![
            "package",
            "--container",
            yaml.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    ] {
        let o = tt_model(t, &[NO_ENGINE, hub], &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("is not reachable") && err.contains("Try:"),
            "{args:?}: a card names the engine: {err}"
        );
        assert!(err.contains("→ start the engine"), "{args:?}: {err}");
        assert!(
            !err.contains("Caused by"),
            "{args:?}: a card, not a chain: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hub_failure_is_a_card_and_exit_1() {
    if common::engine().await.is_none() {
        return;
    }
    let tmp = TempDir::new("exit-hub");
    let o = tokio::task::block_in_place(|| {
        tt_model(
            &tmp.0,
            &[("HF_ENDPOINT", "http://127.0.0.1:9")],
            &["pull", "acme/exit-codes"],
        )
    });
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("✗ the Hub: could not reach the Hub at"),
        "{err}"
    );
    assert!(err.contains("cannot fetch acme/exit-codes@main"), "{err}");
    assert!(
        err.contains("→ check HF_ENDPOINT (http://127.0.0.1:9)"),
        "{err}"
    );
}

#[test]
fn package_and_serve_print_show_manifest_errors_as_lint_does() {
    let tmp = TempDir::new("exit-lint");
    let t = &tmp.0;
    let src = std::fs::read_to_string(repo_root().join("examples/minimal-http/tt-model.yaml"))
        .unwrap()
        .replace("\narch: blackhole", "\nacrh: blackhole")
        // package checks the sources too (as `lint --check-sources`): the tree must exist.
        .replace(
            "tt_metal: ../../tests/fixtures/tt-metal-tree",
            &format!(
                "tt_metal: {}",
                repo_root().join("tests/fixtures/tt-metal-tree").display()
            ),
        );
    let yaml = t.join("tt-model.yaml");
    std::fs::write(&yaml, &src).unwrap();
    let y = yaml.to_str().unwrap();
    let lint = tt_model(t, &[], &["lint", y]);
    let lint_out = String::from_utf8_lossy(&lint.stdout).into_owned();
    assert!(lint_out.contains("did you mean `arch`?"), "{lint_out}");
    let out = t.join("pkgs");
    for args in [
        vec!["package", "--container", y, "--out", out.to_str().unwrap()],
        vec!["serve", y, "--print"],
    ] {
        let o = tt_model(t, &[NO_ENGINE], &args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), lint.status.code(), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(1));
        // The same snippet lint prints: located header, dotted path, caret, suggestion.
        assert!(
            err.contains(lint_out.trim_end()),
            "{args:?}:\n{err}\nvs lint:\n{lint_out}"
        );
        assert!(err.contains("^^^^"), "{args:?}: {err}");
        assert!(err.contains("did you mean `arch`?"), "{args:?}: {err}");
        assert!(err.contains("1 error"), "{args:?}: {err}");
    }
}

#[test]
fn usage_errors_exit_2() {
    let tmp = TempDir::new("exit-usage");
    for args in [
        vec!["serve"],
        vec!["serve", "--port", "x", "acme/m"],
        vec!["nope"],
        vec!["push"],
        vec!["push", ".", "--private", "--publish"],
        // `login --token` is the original's flag now; an unknown login flag is still usage.
        vec!["login", "--password", "hf_x"],
    ] {
        let o = tt_model(&tmp.0, &[], &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn info_profiles_curl_version_exit_as_the_original() {
    let tmp = TempDir::new("exit-c");
    let hub = ("HF_ENDPOINT", "http://127.0.0.1:9");
    for (args, code) in [
        (vec!["version"], 0),
        (vec!["profiles"], 2),
        (vec!["info"], 2),
        (vec!["info", "acme/x", "--arch"], 2),
        // Handled errors: 1, as `_err` exits.
        (vec!["profiles", "acme/not-pulled"], 1),
        (vec!["info", "not-an-id"], 1),
        (vec!["curl", "two", "words", "--model", "m"], 1),
        (
            vec!["curl", "--base-url", "http://127.0.0.1:9", "--model", "m"],
            1,
        ),
        // --print sends nothing: 0 with nothing listening.
        (
            vec![
                "curl",
                "--base-url",
                "http://127.0.0.1:9",
                "--model",
                "m",
                "--print",
            ],
            0,
        ),
    ] {
        let o = tt_model(&tmp.0, &[hub], &args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
    }
}
