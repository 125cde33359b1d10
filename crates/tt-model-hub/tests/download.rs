//! Weights download against the local Hub-protocol server: layout, patterns, resume, sha mismatch.

use crate::common;

use common::{Count, env};
use tt_model_events::Silent;
use tt_model_hub::download::{LocalStatus, local_status};
use tt_model_hub::verify::sha256_hex;
use tt_model_hub::{Downloader, HashKind, HubCache, HubError};
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

fn weights() -> Vec<u8> {
    (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

fn repo() -> FakeRepo {
    FakeRepo::new(
        "acme/tiny-model",
        vec![
            FakeFile::regular("config.json", br#"{"hidden": 8}"#.to_vec()),
            FakeFile::lfs("model.safetensors", weights()),
            FakeFile::regular("tokenizer/vocab.txt", b"a\nb\n".to_vec()),
            FakeFile::lfs("original/consolidated.pth", vec![7u8; 1000]),
        ],
    )
}

#[tokio::test]
async fn downloads_into_the_python_layout_with_refs() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let count = Count::default();
    let snap = d
        .snapshot(
            "acme/tiny-model",
            "main",
            &[],
            &["original/".into()],
            &count,
        )
        .await
        .unwrap();

    let r = repo();
    assert_eq!(snap.commit, r.commit);
    let snap = snap.dir;
    assert_eq!(
        snap,
        tmp.path().join(format!(
            "hub/models--acme--tiny-model/snapshots/{}",
            r.commit
        ))
    );
    assert_eq!(
        std::fs::read(snap.join("model.safetensors")).unwrap(),
        weights()
    );
    assert_eq!(
        std::fs::read(snap.join("tokenizer/vocab.txt")).unwrap(),
        b"a\nb\n"
    );
    assert!(!snap.join("original").exists(), "ignore_patterns honoured");
    // Snapshot entries are relative symlinks into blobs/, LFS blobs named by their sha256.
    let link = std::fs::read_link(snap.join("model.safetensors")).unwrap();
    assert!(link.starts_with("../../blobs/"), "{link:?}");
    let oid = link.file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(oid.len(), 64);
    let refs = tmp.path().join("hub/models--acme--tiny-model/refs/main");
    assert_eq!(std::fs::read_to_string(refs).unwrap(), r.commit);
    assert_eq!(count.get(), weights().len() as u64 + 13 + 4);
    // The token was sent; the LFS file went through the CDN redirect.
    let seen = server.requests();
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer hf_test"))
    );
    assert!(
        seen.iter()
            .any(|s| s.path.starts_with("/cdn-lfs/acme/tiny-model/"))
    );

    // A second run is a metadata no-op: only the listing is fetched.
    let before = server.requests().len();
    d.snapshot(
        "acme/tiny-model",
        "main",
        &[],
        &["original/".into()],
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(server.requests().len(), before + 1);
}

#[tokio::test]
async fn allow_patterns_select_files() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let snap = d
        .snapshot("acme/tiny-model", "main", &["*.json".into()], &[], &Silent)
        .await
        .unwrap()
        .dir;
    let names: Vec<_> = std::fs::read_dir(&snap)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("config.json")]);
}

#[tokio::test]
async fn partial_blob_is_resumed_with_a_range_request() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let plan = d
        .plan(
            "acme/tiny-model",
            "main",
            &["model.safetensors".into()],
            &[],
        )
        .await
        .unwrap();
    let f = &plan.files[0];
    let rc = d.cache().repo("acme/tiny-model").unwrap();
    std::fs::create_dir_all(rc.blobs_dir()).unwrap();
    std::fs::write(rc.incomplete_path(&f.etag), &weights()[..123_456]).unwrap();
    assert_eq!(
        local_status(d.cache(), "acme/tiny-model", "main").unwrap(),
        LocalStatus::Partial { bytes: 123_456 }
    );

    let plan = d
        .plan(
            "acme/tiny-model",
            "main",
            &["model.safetensors".into()],
            &[],
        )
        .await
        .unwrap();
    assert_eq!(plan.files[0].partial, 123_456);
    assert_eq!(plan.bytes_to_fetch(), weights().len() as u64 - 123_456);
    let count = Count::default();
    let snap = d.download(&plan, &count).await.unwrap();
    assert_eq!(
        std::fs::read(snap.join("model.safetensors")).unwrap(),
        weights()
    );
    assert_eq!(count.get(), weights().len() as u64 - 123_456);
    assert!(
        server
            .requests()
            .iter()
            .any(|s| s.range.as_deref() == Some("bytes=123456-"))
    );
    assert!(!rc.incomplete_path(&f.etag).exists());
    assert!(matches!(
        local_status(d.cache(), "acme/tiny-model", "main").unwrap(),
        LocalStatus::Complete { .. }
    ));
}

#[tokio::test]
async fn sha256_mismatch_is_fatal_and_names_the_file() {
    let mut r = repo();
    let mut bad = weights();
    bad[1000] ^= 0xff;
    r.files[1].corrupt_with = Some(bad);
    let server = HubServer::start(vec![r]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let err = d
        .snapshot("acme/tiny-model", "main", &[], &[], &Silent)
        .await
        .unwrap_err();
    match &err {
        HubError::ShaMismatch {
            file,
            kind,
            expected,
            actual,
        } => {
            assert_eq!(file, "model.safetensors");
            assert_eq!(*kind, HashKind::LfsSha256);
            assert_ne!(expected, actual);
        }
        other => panic!("expected ShaMismatch, got {other:?}"),
    }
    assert!(err.to_string().contains("model.safetensors"));
    let rc = d.cache().repo("acme/tiny-model").unwrap();
    assert_eq!(rc.incomplete_bytes(), 0, "the corrupt partial is deleted");
    assert!(
        !rc.blob_path(&sha256_hex(&weights())).exists(),
        "no blob named by the advertised LFS sha"
    );
}

#[tokio::test]
async fn pinned_sha_writes_refs_main_once() {
    let r = repo();
    let server = HubServer::start(vec![r.clone()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    d.snapshot(
        "acme/tiny-model",
        &r.commit,
        &["config.json".into()],
        &[],
        &Silent,
    )
    .await
    .unwrap();
    let rc = d.cache().repo("acme/tiny-model").unwrap();
    assert_eq!(rc.read_ref("main"), Some(r.commit.clone()));
    // An existing refs/main (a real branch) is not overwritten by a pinned download.
    let other = "f".repeat(40);
    rc.write_ref("main", &other).unwrap();
    d.snapshot(
        "acme/tiny-model",
        &r.commit,
        &["config.json".into()],
        &[],
        &Silent,
    )
    .await
    .unwrap();
    assert_eq!(rc.read_ref("main"), Some(other));
}

#[tokio::test]
async fn unknown_repo_and_no_space_are_clear_errors() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let err = d
        .snapshot("acme/nope", "main", &[], &[], &Silent)
        .await
        .unwrap_err();
    assert!(matches!(err, HubError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("acme/nope@main"));

    let mut plan = d.plan("acme/tiny-model", "main", &[], &[]).await.unwrap();
    plan.files[0].size = u64::MAX / 2;
    let err = d.check_space(&plan).unwrap_err();
    assert!(err.is_no_space(), "{err:?}");
    assert!(err.to_string().contains("not enough disk space"));
    assert_eq!(
        local_status(
            &HubCache::new(tmp.path().join("hub")),
            "acme/tiny-model",
            "main"
        )
        .unwrap(),
        LocalStatus::Missing
    );
}

/// A partial of exactly the file's size (left by a kill between the last byte and the rename)
/// is hashed like any other download: a flipped byte is fatal, names the file, and the partial
/// is deleted instead of being promoted to a blob.
#[tokio::test]
async fn full_size_corrupt_partial_is_hashed_and_deleted() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let only = ["model.safetensors".to_string()];
    let plan = d.plan("acme/tiny-model", "main", &only, &[]).await.unwrap();
    let f = &plan.files[0];
    let rc = d.cache().repo("acme/tiny-model").unwrap();
    std::fs::create_dir_all(rc.blobs_dir()).unwrap();
    let mut flipped = weights();
    flipped[4242] ^= 0x01;
    std::fs::write(rc.incomplete_path(&f.etag), &flipped).unwrap();

    let plan = d.plan("acme/tiny-model", "main", &only, &[]).await.unwrap();
    let err = d.download(&plan, &Silent).await.unwrap_err();
    match &err {
        HubError::ShaMismatch { file, kind, .. } => {
            assert_eq!(file, "model.safetensors");
            assert_eq!(*kind, HashKind::LfsSha256);
        }
        other => panic!("expected ShaMismatch, got {other:?}"),
    }
    assert!(err.to_string().contains("model.safetensors"));
    assert!(
        !rc.blob_path(&f.etag).exists(),
        "no blob from a corrupt partial"
    );
    assert!(
        !rc.incomplete_path(&f.etag).exists(),
        "the corrupt partial is deleted"
    );
}

/// huggingface.co answers an anonymous request for a repo that does not exist with 401 and
/// `X-Error-Code: RepoNotFound`, as for a private one: that is "no such repo, or no access",
/// not "gated".
#[tokio::test]
async fn anonymous_401_repo_not_found_is_not_called_gated() {
    let server = HubServer::start(vec![repo()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut anonymous = env(&server, tmp.path());
    anonymous.token = None;
    let d = Downloader::new(anonymous);
    let err = d
        .snapshot("acme/nope", "main", &[], &[], &Silent)
        .await
        .unwrap_err();
    assert!(
        matches!(err, HubError::NotFound { status: 401, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("no such repo, or no access"), "{text}");
    assert!(!text.contains("gated"), "{text}");
}

/// A resolve that says it served another commit than the one the plan pinned is refused by
/// name, before a byte is kept, even though the bytes themselves still hash right: the content
/// check would let them through, the commit check says what went wrong.
#[tokio::test]
async fn a_resolve_from_another_commit_is_a_commit_mismatch() {
    let r = repo();
    let server = HubServer::start(vec![r.clone()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    // A regular file: its resolve answers directly (an LFS file's bytes come from the CDN,
    // whose answer carries no X-Repo-Commit).
    let only = ["config.json".to_string()];
    let plan = d.plan("acme/tiny-model", "main", &only, &[]).await.unwrap();
    assert_eq!(plan.commit, r.commit);
    let moved = "c".repeat(40);
    server.claim_repo_commit(Some(&moved));

    let err = d.download(&plan, &Silent).await.unwrap_err();
    match &err {
        HubError::CommitMismatch {
            file,
            expected,
            got,
        } => {
            assert_eq!(file, "config.json");
            assert_eq!(expected, &r.commit);
            assert_eq!(got, &moved);
        }
        other => panic!("expected CommitMismatch, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(&moved) && text.contains(&r.commit), "{text}");
    let rc = d.cache().repo("acme/tiny-model").unwrap();
    let f = &plan.files[0];
    assert!(!rc.blob_path(&f.etag).exists(), "nothing kept as a blob");
    assert!(!rc.snapshot_dir(&r.commit).exists(), "no snapshot linked");
    assert_eq!(rc.read_ref("main"), None, "no ref written");

    // The same plan downloads once the Hub tells the truth again.
    server.claim_repo_commit(None);
    let snap = d.download(&plan, &Silent).await.unwrap();
    assert_eq!(
        std::fs::read(snap.join("config.json")).unwrap(),
        br#"{"hidden": 8}"#
    );
}
