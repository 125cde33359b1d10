//! Whole-repo snapshot of a PACKAGE repo (what `tt-model pull` fetches): wire manifest, README,
//! lock file, `code/**` and an OCI image layout under `image/`, many files, nested paths,
//! identical contents, with and without LFS.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Count, env};
use tt_model_events::Silent;
use tt_model_hub::Downloader;
use tt_model_hub::verify::{git_blob_id, sha256_hex};
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

const CODE_FILES: usize = 40;

/// Deterministic bytes that do not compress into each other.
fn noise(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| ((i ^ seed).wrapping_mul(2654435761) >> 11) as u8)
        .collect()
}

/// The files of a package repo; `lfs_layer` stores the big layer in LFS as the Hub would.
fn package_files(lfs_layer: bool) -> Vec<FakeFile> {
    let config = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers"}}"#.to_vec();
    let small_layer = noise(1, 3_000);
    let big_layer = noise(2, 250_000);
    let digest = |b: &[u8]| format!("sha256:{}", sha256_hex(b));
    let manifest = format!(
        r#"{{"schemaVersion":2,"config":{{"digest":"{}","size":{}}},"layers":[{{"digest":"{}"}},{{"digest":"{}"}}]}}"#,
        digest(&config),
        config.len(),
        digest(&small_layer),
        digest(&big_layer)
    )
    .into_bytes();
    let index = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"digest":"{}","size":{}}}]}}"#,
        digest(&manifest),
        manifest.len()
    )
    .into_bytes();
    let blob = |b: &[u8]| format!("image/blobs/sha256/{}", sha256_hex(b));

    let mut files = vec![
        FakeFile::regular(".gitattributes", b"*.tar filter=lfs\n".to_vec()),
        FakeFile::regular(
            "tt_kernel_manifest.json",
            br#"{"schema":"5.1","name":"acme/pkg"}"#.to_vec(),
        ),
        FakeFile::regular("README.md", b"# acme/pkg\n".to_vec()),
        FakeFile::regular("requirements.lock", b"numpy==2.1.0\n".to_vec()),
        // Identical contents share one blob.
        FakeFile::regular("code/acme/__init__.py", Vec::new()),
        FakeFile::regular("code/acme/sub/__init__.py", Vec::new()),
        FakeFile::regular(
            "image/oci-layout",
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
        ),
        FakeFile::regular("image/index.json", index),
        FakeFile::regular(&blob(&manifest), manifest.clone()),
        FakeFile::regular(&blob(&config), config.clone()),
        FakeFile::regular(&blob(&small_layer), small_layer.clone()),
    ];
    files.push(if lfs_layer {
        FakeFile::lfs(&blob(&big_layer), big_layer.clone())
    } else {
        FakeFile::regular(&blob(&big_layer), big_layer.clone())
    });
    for i in 0..CODE_FILES {
        files.push(FakeFile::regular(
            &format!("code/acme/m{:02}/mod_{i}.py", i % 7),
            format!("def f{i}():\n    return {i}\n").into_bytes(),
        ));
    }
    files
}

fn package_repo(lfs_layer: bool) -> FakeRepo {
    FakeRepo::new("acme/pkg", package_files(lfs_layer))
}

/// path → content of every file in the repo.
fn contents(r: &FakeRepo) -> BTreeMap<String, Vec<u8>> {
    r.files
        .iter()
        .map(|f| (f.path.clone(), f.content.clone()))
        .collect()
}

async fn whole_repo_round_trip(lfs_layer: bool) {
    let r = package_repo(lfs_layer);
    let server = HubServer::start(vec![r.clone()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let count = Count::default();
    let snap = d
        .snapshot("acme/pkg", "main", &[], &[], &count)
        .await
        .unwrap();

    assert_eq!(snap.commit, r.commit);
    assert_eq!(
        snap.dir,
        tmp.path()
            .join("hub/models--acme--pkg/snapshots")
            .join(&r.commit)
    );
    assert_eq!(snap.plan.files.len(), r.files.len());

    // Every file is there, through a relative link into blobs/ named by its content id.
    let want = contents(&r);
    for f in &r.files {
        let path = snap.dir.join(&f.path);
        assert_eq!(std::fs::read(&path).unwrap(), f.content, "{}", f.path);
        let link = std::fs::read_link(&path).unwrap();
        assert!(link.is_relative(), "{link:?}");
        let id = if f.lfs {
            sha256_hex(&f.content)
        } else {
            git_blob_id(&f.content)
        };
        assert_eq!(
            link.file_name().unwrap().to_str().unwrap(),
            id,
            "{}",
            f.path
        );
    }
    // The snapshot holds exactly the repo's files, nothing more.
    let mut found = BTreeSet::new();
    let mut stack = vec![snap.dir.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&snap.dir).unwrap();
                found.insert(rel.to_str().unwrap().to_string());
            }
        }
    }
    assert_eq!(found, want.keys().cloned().collect::<BTreeSet<_>>());

    // The OCI layout is intact: each image blob hashes to its own name.
    let blobs_dir = snap.dir.join("image/blobs/sha256");
    let mut oci_blobs = 0;
    for e in std::fs::read_dir(&blobs_dir).unwrap() {
        let e = e.unwrap();
        let bytes = std::fs::read(e.path()).unwrap();
        assert_eq!(sha256_hex(&bytes), e.file_name().to_str().unwrap());
        oci_blobs += 1;
    }
    assert_eq!(oci_blobs, 4);

    // One cache blob per distinct content; every byte fetched once.
    let distinct: BTreeMap<String, usize> = r
        .files
        .iter()
        .map(|f| (f.blob_id(), f.content.len()))
        .collect();
    let rc = d.cache().repo("acme/pkg").unwrap();
    let cached = std::fs::read_dir(rc.blobs_dir()).unwrap().count();
    assert_eq!(cached, distinct.len());
    assert!(
        cached < r.files.len(),
        "the two empty __init__.py share a blob"
    );
    assert_eq!(rc.incomplete_bytes(), 0);
    let total: u64 = distinct.values().map(|&n| n as u64).sum();
    assert_eq!(count.get(), total);
    assert_eq!(snap.plan.bytes_to_fetch(), total);
    assert_eq!(rc.read_ref("main"), Some(r.commit.clone()));

    // One listing, then one download per distinct blob (LFS ones via the CDN redirect).
    let seen = server.requests();
    let listings = seen.iter().filter(|s| s.path.starts_with("/api/")).count();
    let resolves = seen.iter().filter(|s| s.path.contains("/resolve/")).count();
    let cdn = seen
        .iter()
        .filter(|s| s.path.starts_with("/cdn-lfs/"))
        .count();
    assert_eq!(listings, 1);
    assert_eq!(resolves, distinct.len());
    assert_eq!(cdn, usize::from(lfs_layer));

    // A second run only lists.
    let before = server.requests().len();
    let again = d
        .snapshot("acme/pkg", "main", &[], &[], &Silent)
        .await
        .unwrap();
    assert_eq!(again.dir, snap.dir);
    assert_eq!(again.plan.bytes_to_fetch(), 0);
    assert_eq!(server.requests().len(), before + 1);
}

#[tokio::test]
async fn package_repo_without_lfs_downloads_every_file() {
    whole_repo_round_trip(false).await;
}

#[tokio::test]
async fn package_repo_with_an_lfs_layer_downloads_every_file() {
    whole_repo_round_trip(true).await;
}

#[tokio::test]
async fn patterns_select_part_of_a_package_and_a_sha_pin_resolves() {
    let r = package_repo(true);
    let server = HubServer::start(vec![r.clone()]).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = Downloader::new(env(&server, tmp.path()));
    let snap = d
        .snapshot(
            "acme/pkg",
            &r.commit,
            &["image/".into(), "tt_kernel_manifest.json".into()],
            &["image/blobs/*".into()],
            &Silent,
        )
        .await
        .unwrap();
    assert_eq!(snap.commit, r.commit);
    let names: BTreeSet<_> = snap.plan.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "image/index.json",
            "image/oci-layout",
            "tt_kernel_manifest.json"
        ])
    );
    assert!(snap.dir.join("image/index.json").is_file());
    assert!(!snap.dir.join("image/blobs").exists());
    assert!(!snap.dir.join("code").exists());
}
