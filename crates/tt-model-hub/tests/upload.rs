//! The upload side against the Hub-protocol test server, through the same client `push` uses:
//! a new private repo, a first push, a re-push with nothing changed (no file bytes, no commit),
//! a re-push with one file changed (that file only) and a stale file pruned in the same commit,
//! an interrupted upload resumed (the object uploaded before the cut is not sent again), the
//! download side reading back exactly what was pushed, visibility and refusals.

use crate::common;

use std::sync::Arc;

use tt_model_events::Silent;
use tt_model_hub::Downloader;
use tt_model_hub::hub::HubClient;
use tt_model_hub::upload::{LocalFile, upload};
use tt_model_testkit::hub::HubServer;

const REPO: &str = "acme/up";

fn files(layer: &[u8], code: &str) -> Vec<LocalFile> {
    vec![
        LocalFile::bytes(
            "README.md",
            b"---\ntags:\n- tt-model-cache\n---\n# up\n".to_vec(),
        ),
        LocalFile::bytes("code/app.py", code.as_bytes().to_vec()),
        LocalFile::bytes("image/blobs/sha256/layer", layer.to_vec()),
    ]
}

fn layer(seed: u8, n: usize) -> Vec<u8> {
    // Binary (a NUL byte in the sample): the Hub puts it in LFS.
    (0..n).map(|i| (i as u8).wrapping_mul(seed)).collect()
}

#[tokio::test]
async fn push_sends_only_what_the_hub_lacks_and_commits_atomically() {
    let server = HubServer::start(vec![]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let client = HubClient::new(common::env(&server, tmp.path()));

    assert_eq!(client.whoami().await.unwrap().name, "tester");
    assert!(client.repo_meta(REPO).await.unwrap().is_none());
    assert!(client.create_repo(REPO, true).await.unwrap());
    assert!(
        !client.create_repo(REPO, true).await.unwrap(),
        "409: it exists"
    );
    assert_eq!(server.is_private(REPO), Some(true));
    let initial = server.head(REPO).unwrap();

    // ── first push: everything ──
    let big = layer(7, 300_000);
    let all = files(&big, "print(1)\n");
    let first = upload(
        &client,
        REPO,
        &all,
        &["code/", "image/"],
        "push 1",
        Arc::new(Silent),
    )
    .await
    .unwrap();
    assert!(first.committed);
    assert_ne!(first.commit, initial);
    assert_eq!(first.bytes_sent, all.iter().map(|f| f.size).sum::<u64>());
    assert_eq!(first.sent.len(), 3);
    let stored = server.files(REPO, "main").unwrap();
    let lfs: Vec<_> = stored
        .iter()
        .filter(|f| f.lfs)
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(
        lfs,
        ["image/blobs/sha256/layer"],
        "binary blobs go to LFS, text inline"
    );
    assert!(server.consistent(REPO));

    // ── nothing changed: no file bytes, no commit ──
    let before = server.bytes_received();
    let again = upload(
        &client,
        REPO,
        &files(&big, "print(1)\n"),
        &["code/", "image/"],
        "push 2",
        Arc::new(Silent),
    )
    .await
    .unwrap();
    assert!(!again.committed);
    assert_eq!((again.bytes_sent, again.unchanged), (0, 3));
    assert_eq!(again.commit, first.commit);
    assert_eq!(server.bytes_received(), before, "only metadata requests");

    // ── one source file changed, one stale file: that file sent, the stale one pruned in the
    //    same commit ──
    let mut next = files(&big, "print(2)\n");
    next[1].path = "code/main.py".into();
    let third = upload(
        &client,
        REPO,
        &next,
        &["code/", "image/"],
        "push 3",
        Arc::new(Silent),
    )
    .await
    .unwrap();
    assert!(third.committed);
    assert_eq!(third.sent, ["code/main.py"]);
    assert_eq!(third.bytes_sent, 9);
    assert_eq!(third.deleted, ["code/app.py"]);
    let paths: Vec<String> = server
        .files(REPO, "main")
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(
        paths,
        [
            ".gitattributes",
            "README.md",
            "code/main.py",
            "image/blobs/sha256/layer"
        ]
    );
    // The previous commit is intact (readers of it are not affected).
    assert!(
        server
            .files(REPO, &first.commit)
            .unwrap()
            .iter()
            .any(|f| f.path == "code/app.py")
    );

    // ── a new layer whose object was uploaded by an interrupted push: not sent again ──
    let new_layer = layer(11, 200_000);
    let object = LocalFile::bytes("x", new_layer.clone());
    let answers = client
        .lfs_batch(REPO, "main", &[(object.sha256.clone(), object.size)])
        .await
        .unwrap();
    let up = answers[0].actions.as_ref().unwrap().upload.clone().unwrap();
    client
        .lfs_put(REPO, &up, object.size, new_layer.clone().into())
        .await
        .unwrap();
    assert!(server.lfs_objects(REPO).contains(&object.sha256));
    let head = server.head(REPO).unwrap();
    assert_eq!(head, third.commit, "an upload alone changes no commit");
    let resumed = upload(
        &client,
        REPO,
        &files(&new_layer, "print(2)\n"),
        &["code/", "image/"],
        "push 4",
        Arc::new(Silent),
    )
    .await
    .unwrap();
    assert_eq!(resumed.already_on_hub, 1);
    assert_eq!(
        resumed.bytes_sent, 9,
        "only code/app.py is sent, the layer was already there"
    );
    assert!(server.consistent(REPO));

    // ── the download side reads back exactly what was pushed ──
    let dl = Downloader::new(common::env(&server, tmp.path()));
    let snap = dl.snapshot(REPO, "main", &[], &[], &Silent).await.unwrap();
    assert_eq!(snap.commit, resumed.commit);
    assert_eq!(
        std::fs::read(snap.dir.join("image/blobs/sha256/layer")).unwrap(),
        new_layer
    );
    assert_eq!(
        std::fs::read_to_string(snap.dir.join("code/app.py")).unwrap(),
        "print(2)\n"
    );

    // ── visibility and refusals ──
    let meta = client.repo_meta(REPO).await.unwrap().unwrap();
    assert!(meta.private);
    assert_eq!(meta.tags, ["tt-model-cache"]);
    let anon = HubClient::new(tt_model_hub::env::HubEnv {
        token: None,
        ..common::env(&server, tmp.path())
    });
    assert!(
        anon.repo_meta(REPO).await.unwrap().is_none(),
        "a private repo is invisible anonymously"
    );
    assert!(
        anon.list_models(&["tt-model-cache"], None, 50)
            .await
            .unwrap()
            .is_empty()
    );
    client.set_private(REPO, false).await.unwrap();
    let rows = anon
        .list_models(&["tt-model-cache"], Some("up"), 50)
        .await
        .unwrap();
    assert_eq!(
        rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        [REPO]
    );
    let err = anon.create_repo("acme/other", true).await.unwrap_err();
    assert!(
        matches!(
            err,
            tt_model_hub::HubError::Unauthorized { status: 401, .. }
        ),
        "{err:?}"
    );
    let bad = HubClient::new(tt_model_hub::env::HubEnv {
        token: Some("hf_wrong".into()),
        ..common::env(&server, tmp.path())
    });
    assert!(matches!(
        bad.whoami().await.unwrap_err(),
        tt_model_hub::HubError::TokenRejected { .. }
    ));
    let err = client
        .create_repo("someone-else/x", false)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            tt_model_hub::HubError::Unauthorized { status: 403, .. }
        ),
        "{err:?}"
    );
    // A commit naming an LFS object the repo never received is refused whole.
    let err = client
        .commit(
            REPO,
            "main",
            "bad",
            None,
            &[
                tt_model_hub::hub::CommitOp::File {
                    path: "ok.txt".into(),
                    content: b"x".to_vec(),
                },
                tt_model_hub::hub::CommitOp::LfsFile {
                    path: "big".into(),
                    oid: "0".repeat(64),
                    size: 1,
                },
            ],
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("never uploaded"), "{err}");
    assert_eq!(server.head(REPO).unwrap(), resumed.commit);
    // A stale parent is refused.
    let err = client
        .commit(REPO, "main", "late", Some(&first.commit), &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("412"), "{err}");
}

/// `huggingface_hub`'s own client against the test server: `create_repo`, `upload_folder`
/// (preupload, LFS batch + PUT + verify, NDJSON commit), `list_repo_tree`, `model_info`,
/// `update_repo_settings`, `delete_file`, `hf_hub_download`. Runs when `TT_MODEL_HF_PYTHON`
/// names a Python with `huggingface_hub` installed (`python3 -m venv v && v/bin/pip install
/// huggingface_hub`); otherwise it says so and passes (CI does not install it).
#[tokio::test(flavor = "multi_thread")]
async fn huggingface_hub_python_client_works_against_the_server() {
    let Some(python) = std::env::var_os("TT_MODEL_HF_PYTHON") else {
        eprintln!("skipped: set TT_MODEL_HF_PYTHON to a Python with huggingface_hub installed");
        return;
    };
    let server = HubServer::start(vec![]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("pkg");
    std::fs::create_dir_all(folder.join("image/blobs/sha256")).unwrap();
    std::fs::write(
        folder.join("README.md"),
        "---\ntags:\n- tt-model-cache\n---\n# x\n",
    )
    .unwrap();
    std::fs::write(folder.join("image/blobs/sha256/layer"), layer(3, 100_000)).unwrap();
    std::fs::write(folder.join("stale.txt"), "old\n").unwrap();
    let script = r#"
import os, sys
from huggingface_hub import HfApi, hf_hub_download
api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token="hf_test")
assert api.whoami()["name"] == "tester"
url = api.create_repo("acme/py", private=True)
api.create_repo("acme/py", private=True, exist_ok=True)
c1 = api.upload_folder(repo_id="acme/py", folder_path=sys.argv[1])
files = sorted(f.path for f in api.list_repo_tree("acme/py", recursive=True) if hasattr(f, "lfs"))
assert files == [".gitattributes", "README.md", "image/blobs/sha256/layer", "stale.txt"], files
info = api.model_info("acme/py", files_metadata=True)
assert info.private and "tt-model-cache" in info.tags, info
lfs = [s for s in info.siblings if s.rfilename == "image/blobs/sha256/layer"][0].lfs
assert lfs is not None and lfs.size == 100000, lfs
api.delete_file("stale.txt", repo_id="acme/py")
api.update_repo_settings("acme/py", private=False)
p = hf_hub_download("acme/py", "image/blobs/sha256/layer", cache_dir=sys.argv[2])
assert open(p, "rb").read() == open(os.path.join(sys.argv[1], "image/blobs/sha256/layer"), "rb").read()
print("ok", c1.oid)
"#;
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(python)
            .args([
                "-c",
                script,
                folder.to_str().unwrap(),
                tmp.path().join("cache").to_str().unwrap(),
            ])
            .env("HF_ENDPOINT", server.endpoint())
            .env("HF_HUB_DISABLE_TELEMETRY", "1")
            .env("HF_HUB_ENABLE_HF_TRANSFER", "0")
            .output()
            .unwrap()
    });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.starts_with("ok "), "{text}");
    let paths: Vec<String> = server
        .files("acme/py", "main")
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(
        paths,
        [".gitattributes", "README.md", "image/blobs/sha256/layer"]
    );
    assert_eq!(server.is_private("acme/py"), Some(false));
}
