//! `login` / `logout` against the Hub-protocol test server: the token is read from stdin (or
//! `--token`, the non-interactive form `tt model login --token` runs), checked with `whoami`, stored at `$HF_HOME/token` with mode 0600, never printed; a
//! token the Hub rejects is not stored; `logout` removes it.

use crate::common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use common::*;
use tt_model_testkit::hub::{HubServer, TEST_TOKEN};

fn login(t: &std::path::Path, endpoint: &str, token: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .arg("login")
        .env("NO_COLOR", "1")
        .env("HF_HOME", t.join("hf"))
        .env("HF_ENDPOINT", endpoint)
        .env_remove("HF_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{token}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn login_stores_the_token_privately_and_logout_removes_it() {
    let server = HubServer::start(vec![]).await.unwrap();
    let tmp = TempDir::new("login");
    let t = tmp.0.clone();
    let endpoint = server.endpoint();
    let token_file = t.join("hf/token");

    let bad = tokio::task::block_in_place(|| login(&t, &endpoint, "hf_wrong"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(!token_file.exists(), "a rejected token is not stored");
    assert!(!stderr(&bad).contains("hf_wrong"), "{}", stderr(&bad));

    let ok = tokio::task::block_in_place(|| login(&t, &endpoint, TEST_TOKEN));
    let text = format!("{}{}", stdout(&ok), stderr(&ok));
    assert!(ok.status.success(), "{text}");
    assert!(text.contains("Logged in as tester"), "{text}");
    assert!(
        !text.contains(TEST_TOKEN),
        "the token is never printed: {text}"
    );
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), TEST_TOKEN);
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let out = tokio::task::block_in_place(|| {
        tt_model(&t, &[("HF_ENDPOINT", endpoint.as_str())], &["logout"])
    });
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!token_file.exists());
    let again = tokio::task::block_in_place(|| tt_model(&t, &[], &["logout"]));
    assert!(
        stderr(&again).contains("not logged in"),
        "{}",
        stderr(&again)
    );
}

/// `login --token T` (what `tt model login --token T` runs): no prompt, no stdin; the original's
/// `Logged in as <name>` and exit 0, or exit 1 and nothing stored for a rejected token.
#[tokio::test(flavor = "multi_thread")]
async fn login_takes_the_token_as_an_option() {
    let server = HubServer::start(vec![]).await.unwrap();
    let tmp = TempDir::new("login-token");
    let t = tmp.0.clone();
    let endpoint = server.endpoint();
    let run = |token: &str| {
        Command::new(env!("CARGO_BIN_EXE_tt-model"))
            .args(["login", "--token", token])
            .env("NO_COLOR", "1")
            .env("HF_HOME", t.join("hf"))
            .env("HF_ENDPOINT", &endpoint)
            .env_remove("HF_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let bad = tokio::task::block_in_place(|| run("hf_wrong"));
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(!t.join("hf/token").exists());
    let ok = tokio::task::block_in_place(|| run(TEST_TOKEN));
    let text = format!("{}{}", stdout(&ok), stderr(&ok));
    assert_eq!(ok.status.code(), Some(0), "{text}");
    assert!(text.contains("Logged in as tester"), "{text}");
    assert!(!text.contains(TEST_TOKEN), "{text}");
    assert_eq!(
        std::fs::read_to_string(t.join("hf/token")).unwrap(),
        TEST_TOKEN
    );
}
