//! `search` against the Hub-protocol test server: the Hub is asked for the newest first (the
//! server, like the Hub, orders nothing unless asked), `--arch` ANDs the arch tag, `--catalog`
//! swaps the base tag, and `--json` keeps the original's row contract, which `tt model search`
//! parses (`id`, `private`, `downloads`, `last_modified` as Python prints a datetime).

use crate::common;

use std::sync::Arc;

use common::*;
use tt_model_hub::env::HubEnv;
use tt_model_hub::hub::HubClient;
use tt_model_hub::upload::{LocalFile, upload};
use tt_model_local::progress::Silent;
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer, TEST_TOKEN};

fn repo(id: &str, tags: &[&str]) -> FakeRepo {
    let front: String = tags.iter().map(|t| format!("- {t}\n")).collect();
    FakeRepo::new(
        id,
        vec![FakeFile::regular(
            "README.md",
            format!("---\ntags:\n{front}---\n# {id}\n"),
        )],
    )
}

fn ids(rows: &serde_json::Value) -> Vec<&str> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn search_asks_for_the_newest_first_and_keeps_the_row_contract() {
    // Created in this order: `old` first, so without a sort the server lists it first.
    let server = HubServer::start(vec![
        repo(
            "acme/old",
            &["tt-model-cache", "blackhole", "tt-model-catalog"],
        ),
        repo("acme/mid", &["tt-model-cache", "wormhole_b0"]),
        repo("acme/new", &["tt-model-cache", "blackhole"]),
        repo("acme/weights", &["llama"]),
    ])
    .await
    .unwrap();
    let tmp = TempDir::new("search");
    let t = tmp.0.clone();
    let endpoint = server.endpoint();
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let search = |args: &[&str]| {
        let mut argv = vec!["search"];
        argv.extend_from_slice(args);
        let out = tokio::task::block_in_place(|| tt_model(&t, &env, &argv));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        out
    };

    // `tt` runs exactly this (an empty query included).
    let rows = json(&search(&["", "--limit", "50", "--json"]));
    assert_eq!(ids(&rows), ["acme/new", "acme/mid", "acme/old"]);
    let first = rows[0].as_object().unwrap();
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        ["id", "private", "downloads", "last_modified"]
    );
    assert_eq!(
        (first["private"].clone(), first["downloads"].clone()),
        (false.into(), 0.into())
    );
    let stamp = first["last_modified"].as_str().unwrap();
    assert!(
        stamp.len() == 25 && stamp.as_bytes()[10] == b' ' && stamp.ends_with("+00:00"),
        "Python's str(datetime): {stamp}"
    );
    let asked = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/models")
        .count();
    assert_eq!(asked, 1);

    // A later commit to `old` makes it the newest.
    let client = HubClient::new(HubEnv {
        endpoint: endpoint.clone(),
        token: Some(TEST_TOKEN.into()),
        ..HubEnv::from_env()
    });
    let readme = "---\ntags:\n- blackhole\n- tt-model-cache\n- tt-model-catalog\n---\n# v2\n";
    upload(
        &client,
        "acme/old",
        &[LocalFile::bytes("README.md", readme.as_bytes().to_vec())],
        &[],
        "v2",
        Arc::new(Silent),
    )
    .await
    .unwrap();
    let rows = json(&search(&["--json"]));
    assert_eq!(ids(&rows), ["acme/old", "acme/new", "acme/mid"]);
    let rows = json(&search(&["--json", "--limit", "1"]));
    assert_eq!(ids(&rows), ["acme/old"], "the limit keeps the newest");

    // Filters: the arch tag ANDed, the catalog tag instead of the package tag, the query.
    let rows = json(&search(&["--arch", "blackhole", "--json"]));
    assert_eq!(ids(&rows), ["acme/old", "acme/new"]);
    let rows = json(&search(&["--catalog", "--json"]));
    assert_eq!(ids(&rows), ["acme/old"]);
    let rows = json(&search(&["mi", "--json"]));
    assert_eq!(ids(&rows), ["acme/mid"]);

    // The text form: the original's `<id>  [public|private]  downloads=N`.
    let text = stdout(&search(&["--arch", "wormhole_b0"]));
    assert_eq!(text.trim_end(), "acme/mid  [public]  downloads=0");
}
