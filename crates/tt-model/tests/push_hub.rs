//! The sharing round trip against the Hub-protocol test server, with the real engine:
//! package `examples/minimal-http` → push (a new private repo) → re-push with nothing changed
//! (no file bytes) → re-push with one source file changed (that file only) → `info` → pull on
//! a clean state dir and HF cache → serve `--device none` → ready → stop; the card gate of
//! `push --publish` and `publish`, `search`, `unpublish`; a push killed mid-upload, whose
//! re-run completes without re-sending what was uploaded, the remote repo consistent at every
//! moment; a blob corrupted on the Hub refused at pull, naming the file.
//!
//! Prints the bytes each push sent (for docs/benchmarks.md). Needs Docker: without one it
//! prints why and passes, unless `TT_MODEL_REQUIRE_DOCKER=1`.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use tt_model_testkit::hub::{HubServer, TEST_TOKEN};

const NAME: &str = "push-http";
const ID: &str = "acme/push-http";

fn set_card_field(staged: &Path, key: &str, value: Option<&str>) {
    let p = staged.join("tt_kernel_manifest.json");
    let mut wire: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    let card = wire["container"]["card"].as_object_mut().unwrap();
    match value {
        Some(v) => card.insert(key.into(), v.into()),
        None => card.remove(key),
    };
    std::fs::write(&p, serde_json::to_string_pretty(&wire).unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn push_info_pull_serve_publish_and_an_interrupted_push() {
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("push");
    let t = tmp.0.clone();
    let _ = client
        .remove_container_force(&format!("tt-model-{NAME}-default"))
        .await;

    let staged = tokio::task::block_in_place(|| package_example(&t, &[], NAME));
    let wire: serde_json::Value =
        serde_json::from_slice(&std::fs::read(staged.join("tt_kernel_manifest.json")).unwrap())
            .unwrap();
    let image = wire["container"]["built"]["image"]
        .as_str()
        .unwrap()
        .to_string();
    let digest = wire["container"]["image"]["digest"]
        .as_str()
        .unwrap()
        .to_string();

    let server = HubServer::start(vec![example_weights_repo()])
        .await
        .unwrap();
    let endpoint = server.endpoint();
    let env = [("HF_ENDPOINT", endpoint.as_str()), ("HF_TOKEN", TEST_TOKEN)];
    let run = |dir: &Path, args: &[&str]| tokio::task::block_in_place(|| tt_model(dir, &env, args));
    let staged_s = staged.to_str().unwrap();

    // ── refusals before anything is sent ──
    let not_staged = run(&t, &["push", t.to_str().unwrap()]);
    assert_eq!(not_staged.status.code(), Some(1));
    assert!(
        stderr(&not_staged).contains("is not a staged container package"),
        "{}",
        stderr(&not_staged)
    );
    assert!(stderr(&not_staged).contains("tt-model package --container"));
    let no_token = tokio::task::block_in_place(|| {
        tt_model(
            &t,
            &[("HF_ENDPOINT", endpoint.as_str())],
            &["push", staged_s],
        )
    });
    assert_eq!(no_token.status.code(), Some(1));
    assert!(
        stderr(&no_token).contains("tt-model login"),
        "{}",
        stderr(&no_token)
    );
    assert_eq!(server.bytes_received(), 0);

    // ── first push: a new private repo, everything sent, the commit printed and recorded ──
    let first = run(&t, &["push", staged_s, "--repo", ID]);
    let text = stderr(&first);
    assert!(first.status.success(), "{text}");
    assert!(text.contains(&format!("created {ID}  private")), "{text}");
    assert!(text.contains(&format!("pushed {ID}")), "{text}");
    assert!(
        text.contains(&format!("consumers:  tt-model serve {ID}")),
        "{text}"
    );
    let commit = stdout(&first).trim().to_string();
    assert_eq!(server.head(ID).as_deref(), Some(commit.as_str()));
    assert_eq!(server.is_private(ID), Some(true));
    assert!(server.consistent(ID));
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(t.join("state/pushed/acme__push-http.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["commit"], commit.as_str());
    let files = server.files(ID, "main").unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    for want in [
        "README.md",
        "tt_kernel_manifest.json",
        "image/oci-layout",
        "image/index.json",
    ] {
        assert!(paths.contains(&want), "{want} in {paths:?}");
    }
    assert!(paths.iter().any(|p| p.starts_with("code/")), "{paths:?}");
    assert!(
        files
            .iter()
            .any(|f| f.lfs && f.path.starts_with("image/blobs/"))
    );
    let tags = server.tags(ID);
    assert!(
        tags.contains(&"tt-model-cache".to_string())
            && !tags.contains(&"tt-model-catalog".to_string()),
        "{tags:?}"
    );
    // The tags `tt` classifies bundles by: container, arch, kind, each profile's hardware.
    let mut want = vec![
        "tt-model-container".to_string(),
        wire["arch"].as_str().unwrap().to_string(),
        wire["container"]["kind"].as_str().unwrap().to_string(),
    ];
    want.extend(
        wire["container"]["serve"]["hardware"]
            .as_str()
            .map(str::to_lowercase),
    );
    for w in &want {
        assert!(tags.contains(w), "{w} in {tags:?}");
    }
    let first_bytes = server.bytes_received();

    // ── nothing changed: only metadata ──
    let again = run(&t, &["push", staged_s, "--repo", ID]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("nothing to upload"),
        "{}",
        stderr(&again)
    );
    assert!(
        stderr(&again).contains("leaving its visibility unchanged"),
        "{}",
        stderr(&again)
    );
    assert_eq!(stdout(&again).trim(), commit);
    let unchanged_bytes = server.bytes_received() - first_bytes;
    assert_eq!(unchanged_bytes, 0);

    // ── one source file changed: that file (and the commit payload) only; a stale file is
    //    pruned in the same commit ──
    let code_file = files
        .iter()
        .find(|f| f.path.starts_with("code/") && !f.lfs)
        .unwrap()
        .path
        .clone();
    std::fs::write(staged.join(&code_file), b"changed\n").unwrap();
    let before = server.bytes_received();
    let changed = run(&t, &["push", staged_s, "--repo", ID]);
    assert!(changed.status.success(), "{}", stderr(&changed));
    assert!(
        stderr(&changed).contains("1 files sent (8 B)"),
        "{}",
        stderr(&changed)
    );
    let changed_bytes = server.bytes_received() - before;
    eprintln!(
        "BYTES first push: {first_bytes} · re-push unchanged: {unchanged_bytes} · re-push one source file changed: {changed_bytes} (commit payload, base64)"
    );

    // ── info ──
    let info = run(&t, &["info", ID, "--json"]);
    assert!(info.status.success(), "{}", stderr(&info));
    let f = json(&info);
    assert_eq!(f["kind"], "http-server");
    assert_eq!(f["private"], true);
    assert_eq!(f["listed"], false);
    assert_eq!(f["image_digest"], digest.as_str());
    assert_eq!(f["weights"]["repo"], "acme/minimal-http-weights");
    assert!(f["image_bytes"].as_u64().unwrap() > 0);

    // ── pull on a clean state dir and HF cache, serve, stop ──
    assert!(run(&t, &["rm", NAME]).status.success());
    assert!(client.image(&image).await.unwrap().is_none());
    let clean = TempDir::new("push-pull");
    let c = clean.0.clone();
    let pull = run(&c, &["pull", ID]);
    let text = stderr(&pull);
    assert!(pull.status.success(), "{text}");
    assert!(text.contains(&format!("loaded image {image}")), "{text}");
    assert_eq!(client.image(&image).await.unwrap().unwrap().id, digest);
    let port = free_port();
    let served = run(&c, &["serve", ID, "--device", "none", "--port", &port]);
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert!(health(&port).contains(" 200 "));
    assert!(run(&c, &["stop", ID]).status.success());

    // ── the card gate: --publish refused before any byte while the card lacks a section ──
    set_card_field(&staged, "performance", None);
    let before = (server.bytes_received(), server.head(ID));
    let gated = run(&t, &["push", staged_s, "--repo", ID, "--publish"]);
    assert_eq!(gated.status.code(), Some(1));
    assert!(
        stderr(&gated).contains("lacks performance"),
        "{}",
        stderr(&gated)
    );
    assert_eq!(
        (server.bytes_received(), server.head(ID)),
        before,
        "nothing sent, nothing committed"
    );
    // Pushed privately it goes; `publish` then refuses it, and accepts it once complete.
    assert!(run(&t, &["push", staged_s, "--repo", ID]).status.success());
    let refused = run(&t, &["publish", ID]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("lacks performance"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        server.is_private(ID),
        Some(true),
        "fail closed: still private"
    );
    set_card_field(
        &staged,
        "performance",
        Some("Not applicable (no model compute)."),
    );
    assert!(run(&t, &["push", staged_s, "--repo", ID]).status.success());
    let published = run(&t, &["publish", ID]);
    let text = stderr(&published);
    assert!(published.status.success(), "{text}");
    assert!(text.contains("made it public"), "{text}");
    assert_eq!(server.is_private(ID), Some(false));
    assert!(server.tags(ID).contains(&"tt-model-catalog".to_string()));
    let found = json(&run(&t, &["search", "push", "--catalog", "--json"]));
    assert_eq!(found[0]["id"], ID, "{found}");
    // A re-push keeps the listing.
    std::fs::write(staged.join(&code_file), b"changed again\n").unwrap();
    let kept = run(&t, &["push", staged_s, "--repo", ID]);
    assert!(
        stderr(&kept).contains(&format!("kept {ID} listed")),
        "{}",
        stderr(&kept)
    );
    assert!(server.tags(ID).contains(&"tt-model-catalog".to_string()));
    let delisted = run(&t, &["unpublish", ID]);
    assert!(delisted.status.success(), "{}", stderr(&delisted));
    assert!(!server.tags(ID).contains(&"tt-model-catalog".to_string()));
    assert_eq!(
        server.is_private(ID),
        Some(false),
        "unpublish leaves visibility alone"
    );

    // ── a push killed mid-upload: the repo stays at its last commit, consistent; the re-run
    //    completes and does not re-send the object uploaded before the kill ──
    let small: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let big: Vec<u8> = (0..16_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(staged.join("code/small.bin"), &small).unwrap();
    std::fs::write(staged.join("code/big.bin"), &big).unwrap();
    let head = server.head(ID).unwrap();
    let start = server.bytes_received();
    let small_sha = tt_model_hub::verify::sha256_hex(&small);
    // Uploads run side by side: the big one stalls at 8 MB, the small one completes.
    server.cut_uploads_after(8_000_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tt-model"));
    child
        .current_dir(&t)
        .args(["push", staged_s, "--repo", ID])
        .env("NO_COLOR", "1")
        .env("TT_MODEL_HOME", t.join("state"))
        .env("HF_HOME", t.join("hf"))
        .env("HF_ENDPOINT", &endpoint)
        .env("HF_TOKEN", TEST_TOKEN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = child.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while server.bytes_received() < start + small.len() as u64 + 8_000_000
        || !server.lfs_objects(ID).contains(&small_sha)
    {
        assert!(Instant::now() < deadline, "the push never reached the cut");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the push ended before the cut"
        );
        assert_eq!(
            server.head(ID).unwrap(),
            head,
            "no commit before the uploads finish"
        );
        assert!(server.consistent(ID));
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    server.cut_uploads_after(u64::MAX);
    assert_eq!(server.head(ID).unwrap(), head);
    assert!(server.consistent(ID));
    assert!(
        !server
            .files(ID, "main")
            .unwrap()
            .iter()
            .any(|f| f.path == "code/big.bin")
    );
    assert!(
        server.lfs_objects(ID).contains(&small_sha),
        "the small object made it before the kill"
    );
    // The stalled handler drains what the dead client had already written into the socket;
    // wait for that to settle before counting what the re-run sends.
    let mut before = server.bytes_received();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = server.bytes_received();
        if now == before {
            break;
        }
        before = now;
    }
    let resumed = run(&t, &["push", staged_s, "--repo", ID]);
    let text = stderr(&resumed);
    assert!(resumed.status.success(), "{text}");
    assert!(text.contains("1 already on the Hub"), "{text}");
    let resumed_bytes = server.bytes_received() - before;
    assert!(
        resumed_bytes < big.len() as u64 + 100_000,
        "only the big object again: {resumed_bytes}"
    );
    assert!(
        server
            .files(ID, "main")
            .unwrap()
            .iter()
            .any(|f| f.path == "code/big.bin")
    );
    assert!(server.consistent(ID));
    eprintln!(
        "BYTES resumed push after a kill: {resumed_bytes} (the 16 MB object whole; the 1 MB one was kept)"
    );

    // ── a blob corrupted on the Hub is refused at pull, naming the file ──
    std::fs::remove_file(staged.join("code/big.bin")).unwrap();
    std::fs::remove_file(staged.join("code/small.bin")).unwrap();
    assert!(run(&c, &["rm", ID]).status.success());
    assert!(client.image(&image).await.unwrap().is_none());
    let layer = server
        .files(ID, "main")
        .unwrap()
        .into_iter()
        .find(|f| f.lfs && f.path.starts_with("image/blobs/"))
        .unwrap();
    server
        .corrupt(ID, &layer.path, &vec![0u8; layer.size as usize])
        .unwrap();
    let fresh = TempDir::new("push-corrupt");
    let bad = run(&fresh.0, &["pull", ID]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains(&layer.path), "{}", stderr(&bad));
    assert!(
        client.image(&image).await.unwrap().is_none(),
        "nothing loaded from a bad blob"
    );
}
