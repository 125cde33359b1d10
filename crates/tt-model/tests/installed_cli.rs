//! The installed-packages database through the real binary: `package --container` records the
//! staged package; `list` shows it ready, then not loaded, then a different build; serve
//! refuses a wrong image it cannot heal (naming both digests), heals from the staged OCI
//! layout both a wrong and a removed image and gets ready; `rm` keeps an image another entry
//! uses, then removes it with the last user. Plus `list` over a corrupt database, a legacy
//! pulled manifest and an entry whose manifest is gone, without an engine.
//!
//! The engine test needs Docker: without one it prints why and passes, unless
//! `TT_MODEL_REQUIRE_DOCKER=1` (CI sets it) turns that into a failure.

use tt_model_local::localdb::{Entry, LocalDb, Source};
use tt_model_testkit::hub::HubServer;

use crate::common;

use common::*;

const NAME: &str = "heal-http";

#[tokio::test(flavor = "multi_thread")]
async fn staged_package_is_recorded_listed_healed_and_removed() {
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("installed-heal");
    let t = tmp.0.clone();
    let weights = example_weights_repo();
    let server = HubServer::start(vec![weights]).await.unwrap();
    let endpoint = server.endpoint();
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let run = |args: &[&str]| tokio::task::block_in_place(|| tt_model(&t, &env, args));
    let container = format!("tt-model-{NAME}-default");
    let _ = client.remove_container_force(&container).await;

    // ── package records a staged entry ──
    let staged = tokio::task::block_in_place(|| package_example(&t, &env, NAME));
    let manifest = staged
        .join("tt_kernel_manifest.json")
        .canonicalize()
        .unwrap();
    let wire: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let image = wire["container"]["built"]["image"]
        .as_str()
        .unwrap()
        .to_string();
    let digest = wire["container"]["image"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let db = LocalDb::under(&t.join("state"));
    let entry = db
        .get(NAME)
        .unwrap()
        .expect("package recorded the staged package");
    assert_eq!(entry.source, Source::Staged);
    assert_eq!(entry.manifest, manifest);
    assert_eq!(entry.image, image);
    assert_eq!(entry.image_digest.as_deref(), Some(digest.as_str()));
    assert_eq!(entry.image_loaded_id.as_deref(), Some(digest.as_str()));
    assert_eq!(entry.arch.as_deref(), Some("blackhole"));
    assert_eq!(
        (entry.profile.as_str(), entry.profiles.clone()),
        ("default", vec!["default".to_string()])
    );

    // ── list: ready, then not loaded, then a different build ──
    let tag = image.rsplit_once(':').unwrap().1.to_string();
    let list = run(&["list"]);
    assert!(
        stdout(&list).contains(&format!("✓ {NAME}  http-server  blackhole  image {tag}  ")),
        "{}",
        stdout(&list)
    );
    assert!(stdout(&list).contains("profile default"));
    let r = json(&run(&["list", "--json"]));
    assert_eq!(row(&r, NAME)["ready"], true);
    assert!(row(&r, NAME)["size"].as_i64().unwrap() > 0);

    client.remove_image(&image).await.unwrap();
    assert!(
        client.image(&digest).await.unwrap().is_none(),
        "the image is gone"
    );
    let list = run(&["list"]);
    assert!(
        stdout(&list).contains(&format!("✗ {NAME}  ")),
        "{}",
        stdout(&list)
    );
    assert!(
        stderr(&list).contains(&format!(
            "image {image} is not loaded; serve loads it from the staged layout"
        )),
        "{}",
        stderr(&list)
    );
    let (repo, tag_part) = image.rsplit_once(':').unwrap();
    client.tag_image(BASE, repo, tag_part).await.unwrap();
    let other = client.image(BASE).await.unwrap().unwrap().id;
    let list = run(&["list"]);
    assert!(
        stderr(&list).contains(&format!(
            "is a different build than recorded (expected {digest}, loaded {other})"
        )),
        "{}",
        stderr(&list)
    );

    // ── serve without the layout cannot heal: both digests are named ──
    let layout = staged.join("image");
    let away = staged.join("image.away");
    std::fs::rename(&layout, &away).unwrap();
    let port = free_port();
    let m = manifest.to_str().unwrap();
    let refused = run(&["serve", m, "--device", "none", "--port", &port]);
    std::fs::rename(&away, &layout).unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!("expected {digest}, loaded {other}")),
        "{}",
        stderr(&refused)
    );
    assert!(stderr(&refused).contains("tt-model pull <org>/heal-http"));

    // ── serve heals the wrong build from the layout and gets ready ──
    let served = run(&["serve", m, "--device", "none", "--port", &port]);
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(text.contains(&format!("loaded image {image}")), "{text}");
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert!(health(&port).contains(" 200 "));
    assert_eq!(client.image(&image).await.unwrap().unwrap().id, digest);
    let loaded = db.get(NAME).unwrap().unwrap().image_loaded_id;
    assert_eq!(loaded.as_deref(), Some(digest.as_str()));
    assert!(run(&["stop", m]).status.success());

    // ── and a removed image too ──
    client.remove_image(&image).await.unwrap();
    assert!(client.image(&digest).await.unwrap().is_none());
    let served = run(&["serve", m, "--device", "none", "--port", &port]);
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "image {image} is not loaded in docker; loading it from"
        )),
        "{text}"
    );
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert!(run(&["stop", m]).status.success());
    let list = run(&["list"]);
    assert!(
        stdout(&list).contains(&format!("✓ {NAME}  ")),
        "{}",
        stdout(&list)
    );

    // ── rm keeps an image another installed package uses, removes it with the last user ──
    let pulled = t.join("state/pulled/acme__heal-copy");
    std::fs::create_dir_all(&pulled).unwrap();
    let mut copy = wire.clone();
    copy["name"] = "heal-copy".into();
    std::fs::write(pulled.join("tt_kernel_manifest.json"), copy.to_string()).unwrap();
    db.record(Entry {
        repo_id: "acme/heal-copy".into(),
        name: "heal-copy".into(),
        source: Source::Pulled,
        revision: Some("main".into()),
        manifest: pulled
            .join("tt_kernel_manifest.json")
            .canonicalize()
            .unwrap(),
        ..entry.clone()
    })
    .unwrap();
    let r = json(&run(&["list", "--json"]));
    assert_eq!(row(&r, "acme/heal-copy")["ready"], true);
    assert_eq!(row(&r, "acme/heal-copy")["source"], "pulled");

    // By its installed id (a bare name): the entry leads to the manifest.
    let rm = run(&["rm", NAME]);
    assert!(rm.status.success(), "{}", stderr(&rm));
    assert!(
        stderr(&rm).contains(&format!("image {image} kept"))
            && stderr(&rm).contains("(acme/heal-copy)"),
        "{}",
        stderr(&rm)
    );
    assert!(
        stderr(&rm).contains(&format!("forgot {NAME}")),
        "{}",
        stderr(&rm)
    );
    assert!(db.get(NAME).unwrap().is_none());
    assert!(client.image(&image).await.unwrap().is_some());
    assert!(
        manifest.is_file(),
        "a staged package's files are the user's"
    );

    let rm = run(&["rm", "acme/heal-copy"]);
    assert!(rm.status.success(), "{}", stderr(&rm));
    assert!(
        stderr(&rm).contains(&format!("removed image {image}")),
        "{}",
        stderr(&rm)
    );
    assert!(
        stderr(&rm).contains("removed the pulled manifest"),
        "{}",
        stderr(&rm)
    );
    assert!(client.image(&image).await.unwrap().is_none());
    // The engine's own build (`package` keeps it as `<repository>:build` for its cache) goes
    // with the last user of the image.
    let (repository, _) = image.rsplit_once(':').expect("a tagged image");
    let provisional = format!("{repository}:build");
    assert!(
        client.image(&provisional).await.unwrap().is_none(),
        "{provisional} stayed behind: {}",
        stderr(&rm)
    );
    assert!(!pulled.exists());
    assert!(db.all().unwrap().is_empty());
    let list = run(&["list"]);
    assert!(
        stderr(&list).contains("No packages installed."),
        "{}",
        stderr(&list)
    );
}

#[test]
fn list_reports_a_corrupt_database_legacy_pulls_and_missing_manifests_without_an_engine() {
    let tmp = TempDir::new("installed-offline");
    let t = &tmp.0;
    let no_engine = [("DOCKER_HOST", "unix:///nonexistent/docker.sock")];
    let state = t.join("state");
    std::fs::create_dir_all(state.join("pulled/acme__old")).unwrap();
    let legacy = serde_json::json!({
        "schema_version": "5.1", "name": "old", "arch": "blackhole",
        "container": {"image": {"registry": "hf", "repository": "tt-model/old", "tag": "abc", "digest": "sha256:00"},
                      "kind": "http-server", "serve": {}, "serve_profiles": [{"name": "p150"}], "default_profile": "p150"}
    });
    std::fs::write(
        state.join("pulled/acme__old/tt_kernel_manifest.json"),
        legacy.to_string(),
    )
    .unwrap();

    // A corrupt database is named and left alone; the legacy pull is still listed.
    let db_path = state.join("installed.json");
    std::fs::write(&db_path, "{ half a file").unwrap();
    let list = tt_model(t, &no_engine, &["list"]);
    // The listing stands; whether each can serve is unknown without the engine: its
    // diagnosis card and exit 1, as every command that needs the engine.
    assert_eq!(list.status.code(), Some(1), "{}", stderr(&list));
    assert!(
        stderr(&list).contains("is not reachable") && stderr(&list).contains("Try:"),
        "{}",
        stderr(&list)
    );
    assert!(
        stderr(&list).contains(&db_path.display().to_string()),
        "{}",
        stderr(&list)
    );
    assert!(stderr(&list).contains("corrupt"));
    assert!(
        stdout(&list).contains("✗ acme/old  http-server  blackhole  image abc  -  profile p150"),
        "{}",
        stdout(&list)
    );
    assert!(stderr(&list).contains("the container engine is not reachable"));
    assert_eq!(std::fs::read_to_string(&db_path).unwrap(), "{ half a file");

    // An entry whose manifest is gone says so.
    std::fs::remove_file(&db_path).unwrap();
    LocalDb::under(&state)
        .record(Entry {
            repo_id: "gone".into(),
            name: "gone".into(),
            container: true,
            source: Source::Staged,
            kind: "http-server".into(),
            image: "tt-model/gone:1".into(),
            revision: None,
            manifest: t.join("nowhere/tt_kernel_manifest.json"),
            arch: None,
            image_digest: None,
            image_loaded_id: None,
            profile: "default".into(),
            profiles: vec!["default".into()],
        })
        .unwrap();
    let list = tt_model(t, &no_engine, &["list", "--json"]);
    assert_eq!(list.status.code(), Some(1), "{}", stderr(&list));
    let rows = json(&list);
    assert_eq!(rows.as_array().unwrap().len(), 2, "{rows}");
    let gone = row(&rows, "gone");
    assert_eq!(gone["ready"], false);
    assert!(
        gone["problems"][0].as_str().unwrap().contains("is missing"),
        "{gone}"
    );
    assert_eq!(row(&rows, "acme/old")["source"], "pulled");
}
