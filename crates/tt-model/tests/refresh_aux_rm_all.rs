//! Reference §4.5, §4.12 and §5.4 against the local Hub-protocol server and the real engine:
//! `auxiliary_weights` are prefetched and verified like the primary weights and removed with
//! `rm --include-weights`; `serve --refresh` re-pulls a pulled package when the Hub's tip moved,
//! says it is up to date when it did not, and serves the installed package when the Hub cannot
//! be asked; `rm --all` never removes unasked and, with `--yes`, removes every package.
//!
//! Needs Docker: without one it prints why and passes, unless `TT_MODEL_REQUIRE_DOCKER=1`.

use crate::common;

use common::*;
use tt_model_local::localdb::LocalDb;
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

const NAME: &str = "aux-http";
const ID: &str = "acme/aux-http";
const AUX: &str = "acme/aux-drafter";
const AUX_COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";
const COMMIT_A: &str = "aaaaaaaa00000000000000000000000000000001";
const COMMIT_B: &str = "bbbbbbbb00000000000000000000000000000002";

/// The drafter the manifest names as auxiliary weights.
fn aux_repo() -> FakeRepo {
    let mut r = FakeRepo::new(
        AUX,
        vec![
            FakeFile::lfs("drafter.safetensors", vec![7u8; 8192]),
            FakeFile::regular("config.json", b"{\"drafter\": true}".to_vec()),
        ],
    );
    r.commit = AUX_COMMIT.into();
    r
}

/// The staged package as a Hub repo at `commit`.
fn package_repo(staged: &std::path::Path, commit: &str) -> FakeRepo {
    let mut files = vec![];
    repo_files(staged, "", &mut files);
    let mut r = FakeRepo::new(ID, files);
    r.commit = commit.into();
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn auxiliary_weights_refresh_and_rm_all() {
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("refresh-aux");
    let t = tmp.0.clone();
    let _ = client
        .remove_container_force(&format!("tt-model-{NAME}-default"))
        .await;

    // ── a manifest with a drafter as auxiliary weights ──
    let yaml = example_yaml(&t, NAME);
    let text = std::fs::read_to_string(&yaml).unwrap().replace(
        "\nkind: http-server",
        &format!(
            "\nauxiliary_weights:\n  - repo: {AUX}\n    revision: {AUX_COMMIT}\n\nkind: http-server"
        ),
    );
    std::fs::write(&yaml, text).unwrap();
    let out_dir = t.join("out");
    let pkg = tokio::task::block_in_place(|| package(&t, &[], &yaml, &out_dir));
    assert!(pkg.status.success(), "{}", stderr(&pkg));
    let staged = out_dir.join(NAME);
    let wire: serde_json::Value =
        serde_json::from_slice(&std::fs::read(staged.join("tt_kernel_manifest.json")).unwrap())
            .unwrap();
    assert_eq!(wire["auxiliary_weights"][0]["repo_id"], AUX, "{wire}");
    let image = wire["container"]["built"]["image"]
        .as_str()
        .unwrap()
        .to_string();

    let hub_a = HubServer::start(vec![
        package_repo(&staged, COMMIT_A),
        example_weights_repo(),
        aux_repo(),
    ])
    .await
    .unwrap();
    let hub_b = HubServer::start(vec![
        package_repo(&staged, COMMIT_B),
        example_weights_repo(),
        aux_repo(),
    ])
    .await
    .unwrap();
    let (a, b) = (hub_a.endpoint(), hub_b.endpoint());
    let run = |endpoint: &str, args: &[&str]| {
        tokio::task::block_in_place(|| tt_model(&t, &[("HF_ENDPOINT", endpoint)], args))
    };
    let port = free_port();
    let manifest = staged.join("tt_kernel_manifest.json");
    let manifest = manifest.to_str().unwrap();

    // ── serve prefetches and verifies both repos ──
    let served = run(
        &a,
        &["serve", manifest, "--device", "none", "--port", &port],
    );
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(
        text.contains("weights acme/minimal-http-weights@01234567"),
        "{text}"
    );
    assert!(text.contains(&format!("weights {AUX}@89abcdef")), "{text}");
    assert!(
        !text.contains("not in your local HF cache") && !text.contains("could not prefetch"),
        "{text}"
    );
    let aux_dir = t.join("hub/models--acme--aux-drafter");
    let primary_dir = t.join("hub/models--acme--minimal-http-weights");
    assert!(
        aux_dir
            .join(format!("snapshots/{AUX_COMMIT}/drafter.safetensors"))
            .is_file()
    );
    assert!(run(&a, &["stop", manifest]).status.success());

    // ── --local-only with the drafter gone: a warning that it downloads in the container ──
    std::fs::remove_dir_all(&aux_dir).unwrap();
    let print = run(
        &a,
        &[
            "serve",
            manifest,
            "--device",
            "none",
            "--local-only",
            "--port",
            &port,
        ],
    );
    let text = stderr(&print);
    assert!(print.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "weights {AUX}@89abcdef are not in your local HF cache"
        )),
        "{text}"
    );
    assert!(run(&a, &["stop", manifest]).status.success());

    // ── rm keeps both weights unless --include-weights ──
    let rm = run(&a, &["rm", NAME]);
    let text = stderr(&rm);
    assert!(rm.status.success(), "{text}");
    assert!(
        text.contains("weights kept (acme/minimal-http-weights"),
        "{text}"
    );
    assert!(primary_dir.exists());
    assert!(client.image(&image).await.unwrap().is_none());

    // ── pulled at A; the Hub moves to B; --refresh re-pulls, the image (same digest) stays ──
    let pull = run(&a, &["pull", ID, "--with-weights"]);
    assert!(pull.status.success(), "{}", stderr(&pull));
    assert!(aux_dir.exists(), "pull --with-weights fetches the drafter");
    let db = LocalDb::under(&t.join("state"));
    assert_eq!(
        db.get(ID).unwrap().unwrap().revision.as_deref(),
        Some(COMMIT_A)
    );
    let served = run(
        &b,
        &[
            "serve",
            ID,
            "--refresh",
            "--device",
            "none",
            "--port",
            &port,
        ],
    );
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(
        text.contains(&format!("refreshing {ID}: aaaaaaaa → bbbbbbbb")),
        "{text}"
    );
    assert!(
        text.contains(&format!("image {image} already loaded")),
        "{text}"
    );
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert_eq!(
        db.get(ID).unwrap().unwrap().revision.as_deref(),
        Some(COMMIT_B)
    );
    assert!(run(&b, &["stop", ID]).status.success());

    // ── nothing new: up to date; the Hub unreachable: the installed package is served ──
    let served = run(
        &b,
        &[
            "serve",
            ID,
            "--refresh",
            "--device",
            "none",
            "--port",
            &port,
        ],
    );
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(text.contains(&format!("{ID} is up to date")), "{text}");
    assert!(run(&b, &["stop", ID]).status.success());
    let closed = format!("http://127.0.0.1:{}", free_port());
    let served = run(
        &closed,
        &[
            "serve",
            ID,
            "--refresh",
            "--no-weights",
            "--device",
            "none",
            "--port",
            &port,
        ],
    );
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(
        text.contains("refresh failed (")
            && text.contains("serving the installed package unchanged"),
        "{text}"
    );
    assert!(run(&b, &["stop", ID]).status.success());

    // ── rm --all never removes unasked; --yes removes every package and, asked, the weights ──
    let refused = run(&b, &["rm", "--all"]);
    let text = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{text}");
    assert!(text.contains("tt-model rm --all --yes"), "{text}");
    assert!(db.get(ID).unwrap().is_some(), "nothing was removed");
    let usage = run(&b, &["rm", "--yes", ID]);
    assert_eq!(usage.status.code(), Some(2), "--yes belongs to --all");
    let all = run(&b, &["rm", "--all", "--yes", "--include-weights"]);
    let text = stderr(&all);
    assert!(all.status.success(), "{text}");
    assert!(text.contains("removed 1 package(s)"), "{text}");
    assert!(text.contains(&format!("removed weights {AUX}")), "{text}");
    assert!(db.get(ID).unwrap().is_none());
    assert!(!aux_dir.exists() && !primary_dir.exists());
    assert!(client.image(&image).await.unwrap().is_none());
    let none = run(&b, &["rm", "--all"]);
    assert!(none.status.success(), "{}", stderr(&none));
    assert!(stderr(&none).contains("nothing to remove"));
}
