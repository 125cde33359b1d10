//! `pull` and `serve <org/name>` against the local Hub-protocol server, with the real engine:
//! a packaged example is published as a Hub repo (its OCI layout blobs in LFS, as the Python
//! tool publishes them); `pull` loads the image from it, installs the manifest and records the
//! package (installed.json in the shape `tt` reads, golden); a second pull finds the image
//! loaded and `pull --force` loads it again; serve re-pulls the recorded revision when the
//! image is gone; `serve org/name` of a package that is not installed pulls it first; a
//! missing repo fails naming it.
//!
//! Needs Docker: without one it prints why and passes, unless `TT_MODEL_REQUIRE_DOCKER=1`.

use crate::common;

use common::*;
use tt_model_local::localdb::{LocalDb, Source};
use tt_model_testkit::hub::{FakeRepo, HubServer};

const NAME: &str = "pull-http";
const ID: &str = "acme/pull-http";
const COMMIT: &str = "fedcba9876543210fedcba9876543210fedcba98";

#[tokio::test(flavor = "multi_thread")]
async fn pull_installs_and_serve_pulls_and_repulls_from_the_hub() {
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("pull");
    let t = tmp.0.clone();
    let container = format!("tt-model-{NAME}-default");
    let _ = client.remove_container_force(&container).await;

    // ── a package, published as a Hub repo, then nothing of it left locally ──
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
    let mut files = vec![];
    repo_files(&staged, "", &mut files);
    assert!(files.iter().any(|f| f.path == "image/oci-layout"));
    assert!(files.iter().any(|f| f.lfs));
    let mut repo = FakeRepo::new(ID, files);
    repo.commit = COMMIT.into();
    let weights = example_weights_repo();
    let server = HubServer::start(vec![repo, weights]).await.unwrap();
    let endpoint = server.endpoint();
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let run = |args: &[&str]| tokio::task::block_in_place(|| tt_model(&t, &env, args));
    assert!(run(&["rm", NAME]).status.success());
    std::fs::remove_dir_all(staged.parent().unwrap()).unwrap();
    assert!(client.image(&image).await.unwrap().is_none());

    // ── pull: image loaded from the repo's layout, manifest installed, package recorded ──
    let pull = run(&["pull", ID]);
    let text = stderr(&pull);
    assert!(pull.status.success(), "{text}");
    assert!(text.contains(&format!("fetched {ID}@fedcba98")), "{text}");
    assert!(
        text.contains(&format!("fetched the image layout of {ID}@fedcba98")),
        "{text}"
    );
    assert!(text.contains(&format!("loaded image {image}")), "{text}");
    assert!(text.contains(&format!("pulled {ID}")), "{text}");
    assert!(text.contains(&format!("tt-model serve {ID}")), "{text}");
    assert_eq!(client.image(&image).await.unwrap().unwrap().id, digest);
    let installed = t.join("state/pulled/acme__pull-http/tt_kernel_manifest.json");
    assert!(installed.is_file());
    let db = LocalDb::under(&t.join("state"));
    let entry = db.get(ID).unwrap().expect("pull recorded the package");
    assert_eq!(entry.source, Source::Pulled);
    assert_eq!(entry.revision.as_deref(), Some(COMMIT));
    assert_eq!(entry.image_loaded_id.as_deref(), Some(digest.as_str()));
    assert_eq!(entry.manifest, installed.canonicalize().unwrap());
    assert!(
        !t.join("state/pull-cache/models--acme--pull-http").exists(),
        "the downloaded layout is dropped once the engine has the image"
    );
    let r = json(&run(&["list", "--json"]));
    assert_eq!(row(&r, ID)["ready"], true);
    // installed.json as `tt` reads it (tenstorrent/modelhub/bundles.py): one flat object keyed
    // by the lowercased id, the original's fields; golden, with this run's paths and digests
    // replaced.
    let text = std::fs::read_to_string(t.join("state/installed.json"))
        .unwrap()
        .replace(
            &installed.canonicalize().unwrap().display().to_string(),
            "<manifest>",
        )
        .replace(&digest, "<digest>")
        .replace(&image, "<image>");
    let golden = include_str!("golden/installed-pull-http.json");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        serde_json::from_str::<serde_json::Value>(golden).unwrap(),
        "{text}"
    );

    // ── a second pull finds the recorded build loaded ──
    let again = run(&["pull", ID]);
    let text = stderr(&again);
    assert!(again.status.success(), "{text}");
    assert!(
        text.contains(&format!("image {image} already loaded")),
        "{text}"
    );
    assert!(
        !text.contains("image layout") && !text.contains("loading it from"),
        "{text}"
    );

    // ── pull --force reinstalls: the layout is fetched and loaded again ──
    let ndjson = [env[0], ("TT_MODEL_PROGRESS", "ndjson")];
    let forced = tokio::task::block_in_place(|| tt_model(&t, &ndjson, &["pull", ID, "--force"]));
    let text = stderr(&forced);
    assert_eq!(forced.status.code(), Some(0), "{text}");
    // The image step's bytes, as tt reads them: the layout's download, then its load into
    // the engine (a second series, counted to its own total).
    let image_totals: Vec<u64> = String::from_utf8_lossy(&forced.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "progress" && v["key"] == "image")
        .map(|v| v["total"].as_u64().unwrap())
        .collect();
    let mut series = image_totals.clone();
    series.dedup();
    assert_eq!(series.len(), 2, "{image_totals:?}");
    assert!(
        text.contains(&format!("fetched the image layout of {ID}@fedcba98")),
        "{text}"
    );
    assert!(text.contains(&format!("loaded image {image}")), "{text}");
    assert_eq!(client.image(&image).await.unwrap().unwrap().id, digest);
    assert_eq!(
        db.get(ID).unwrap().unwrap().revision.as_deref(),
        Some(COMMIT)
    );

    // ── serve re-pulls the recorded revision when the image is gone ──
    client.remove_image(&image).await.unwrap();
    let port = free_port();
    let served = run(&["serve", ID, "--device", "none", "--port", &port]);
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(
        text.contains(&format!("re-pulling {ID}@fedcba98")),
        "{text}"
    );
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert!(health(&port).contains(" 200 "));
    assert!(run(&["stop", ID]).status.success());

    // ── serve of a package that is not installed pulls it first ──
    let rm = run(&["rm", ID]);
    assert!(rm.status.success(), "{}", stderr(&rm));
    assert!(db.get(ID).unwrap().is_none() && !installed.exists());
    assert!(client.image(&image).await.unwrap().is_none());
    let served = run(&["serve", ID, "--device", "none", "--port", &port]);
    let text = stderr(&served);
    assert!(served.status.success(), "{text}");
    assert!(
        text.contains(&format!("{ID} is not installed: pulling it")),
        "{text}"
    );
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert!(run(&["stop", ID]).status.success());
    assert!(run(&["rm", ID]).status.success());

    // ── --local-only never reaches the Hub; a missing repo is named ──
    let local = run(&["serve", ID, "--local-only", "--device", "none", "--print"]);
    assert!(!local.status.success());
    assert!(
        stderr(&local).contains(&format!("Pull it first:  tt-model pull {ID}")),
        "{}",
        stderr(&local)
    );
    let missing = run(&["pull", "acme/nope"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("acme/nope"),
        "{}",
        stderr(&missing)
    );
    assert!(db.get("acme/nope").unwrap().is_none());
}
