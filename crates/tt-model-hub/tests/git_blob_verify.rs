//! Regular (non-LFS) files: named and verified by their git blob id, as the Hub publishes it
//! (`blobId` in the listing, `ETag` of `/resolve`).

use crate::common;

use common::{Count, env};
use tt_model_events::Silent;
use tt_model_hub::download::{LocalStatus, local_status};
use tt_model_hub::verify::git_blob_id;
use tt_model_hub::{Downloader, HashKind, HubError};
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

const README: &[u8] = b"# acme/pkg\n\nA package repo with no LFS files.\n";

fn code() -> Vec<u8> {
    (0..50_000u32)
        .flat_map(|i| format!("x{i} = {}\n", i % 97).into_bytes())
        .collect()
}

fn repo() -> FakeRepo {
    FakeRepo::new(
        "acme/pkg",
        vec![
            FakeFile::regular("README.md", README.to_vec()),
            FakeFile::regular("code/big.py", code()),
        ],
    )
}

#[tokio::test]
async fn server_speaks_git_blob_ids_like_the_hub() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let http = reqwest::Client::new();
    let listing: serde_json::Value = http
        .get(format!(
            "{}/api/models/acme/pkg/revision/main?blobs=true",
            server.endpoint()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listing["siblings"][0]["rfilename"], "README.md");
    assert_eq!(listing["siblings"][0]["blobId"], git_blob_id(README));
    assert!(listing["siblings"][0].get("lfs").is_none());
    let resp = http
        .get(format!(
            "{}/acme/pkg/resolve/main/README.md",
            server.endpoint()
        ))
        .send()
        .await
        .unwrap();
    let etag = resp.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(etag, format!("\"{}\"", git_blob_id(README)));
    assert_eq!(resp.bytes().await.unwrap(), README);
    // Without `blobs=true` the Hub lists names only; the client always asks for the ids.
    let bare: serde_json::Value = http
        .get(format!(
            "{}/api/models/acme/pkg/revision/main",
            server.endpoint()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(bare["siblings"][0].get("blobId").is_none());
}

#[tokio::test]
async fn regular_blobs_are_named_by_their_git_blob_id() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let snap = d
        .snapshot("acme/pkg", "main", &[], &[], &Silent)
        .await
        .unwrap();
    for (path, content) in [("README.md", README.to_vec()), ("code/big.py", code())] {
        let link = std::fs::read_link(snap.dir.join(path)).unwrap();
        assert_eq!(
            link.file_name().unwrap().to_str().unwrap(),
            git_blob_id(&content),
            "{path}"
        );
        assert_eq!(std::fs::read(snap.dir.join(path)).unwrap(), content);
    }
}

#[tokio::test]
async fn git_blob_mismatch_is_fatal_names_the_file_and_recovers() {
    let mut r = repo();
    let mut bad = README.to_vec();
    bad[2] = b'X'; // same length: only the hash can tell
    r.files[0].corrupt_with = Some(bad.clone());
    let server = HubServer::start(vec![r]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let err = d
        .snapshot("acme/pkg", "main", &[], &[], &Silent)
        .await
        .unwrap_err();
    match &err {
        HubError::ShaMismatch {
            file,
            kind,
            expected,
            actual,
        } => {
            assert_eq!(file, "README.md");
            assert_eq!(*kind, HashKind::GitBlobSha1);
            assert_eq!(expected, &git_blob_id(README));
            assert_eq!(actual, &git_blob_id(&bad));
        }
        other => panic!("expected ShaMismatch, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.starts_with("git blob sha1 mismatch for README.md: the Hub's blob id is"),
        "{msg}"
    );
    let rc = d.cache().repo("acme/pkg").unwrap();
    assert!(!rc.blob_path(&git_blob_id(README)).exists());
    assert_eq!(rc.incomplete_bytes(), 0, "the corrupt partial is deleted");
    assert_eq!(
        local_status(d.cache(), "acme/pkg", "main").unwrap(),
        LocalStatus::Missing,
        "no snapshot or ref is written for a failed download"
    );

    // The same cache against a healthy Hub completes.
    drop(server);
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let snap = d
        .snapshot("acme/pkg", "main", &[], &[], &Silent)
        .await
        .unwrap();
    assert_eq!(std::fs::read(snap.dir.join("README.md")).unwrap(), README);
}

#[tokio::test]
async fn regular_partial_is_resumed_and_the_hash_covers_the_old_bytes() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let rc = d.cache().repo("acme/pkg").unwrap();
    let id = git_blob_id(&code());
    std::fs::create_dir_all(rc.blobs_dir()).unwrap();
    let allow = ["code/*".to_string()];

    // A good partial: resumed with a Range request, verified over old + new bytes.
    std::fs::write(rc.incomplete_path(&id), &code()[..100_000]).unwrap();
    let plan = d.plan("acme/pkg", "main", &allow, &[]).await.unwrap();
    assert_eq!(plan.files[0].partial, 100_000);
    let count = Count::default();
    let snap = d.download(&plan, &count).await.unwrap();
    assert_eq!(std::fs::read(snap.join("code/big.py")).unwrap(), code());
    assert_eq!(count.get(), code().len() as u64 - 100_000);
    assert!(
        server
            .requests()
            .iter()
            .any(|s| s.range.as_deref() == Some("bytes=100000-"))
    );

    // A corrupt partial (bit rot, or a different file): the resumed blob fails its git id.
    std::fs::remove_file(rc.blob_path(&id)).unwrap();
    let mut rotten = code()[..100_000].to_vec();
    rotten[10] ^= 1;
    std::fs::write(rc.incomplete_path(&id), &rotten).unwrap();
    let err = d
        .snapshot("acme/pkg", "main", &allow, &[], &Silent)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HubError::ShaMismatch { file, kind: HashKind::GitBlobSha1, .. } if file == "code/big.py"),
        "{err:?}"
    );
    assert!(!rc.incomplete_path(&id).exists());
    // The next run starts over and succeeds.
    d.snapshot("acme/pkg", "main", &allow, &[], &Silent)
        .await
        .unwrap();
    assert!(rc.blob_path(&id).is_file());
}
