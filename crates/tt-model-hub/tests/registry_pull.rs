//! Pulling an image by digest from an OCI registry on loopback (the crate's own
//! distribution-protocol server, no Docker): every manifest and blob is checked against the
//! digest that names it, by the registry client itself, not later by the engine's loader.
//! Each corrupt answer has the right length, so only the hash can tell.

use tt_model_events::Silent;
use tt_model_hub::registry::pull::pull_layout;
use tt_model_hub::registry::{OCI_MANIFEST, Registry, RegistryError, RegistryTarget};
use tt_model_hub::verify::sha256_hex;
use tt_model_testkit::registry::RegistryServer;

const NAMESPACE: &str = "tt";
const NAME: &str = "demo";

/// A registry holding one image (config + two layers); returns it with the manifest digest
/// and the layers' digests and bytes.
async fn registry_with_an_image() -> (RegistryServer, String, Vec<(String, Vec<u8>)>) {
    let server = RegistryServer::start(&format!("{NAMESPACE}/{NAME}"))
        .await
        .unwrap();
    let layers: Vec<Vec<u8>> = vec![
        (0..70_000u32).map(|i| (i * 7 % 251) as u8).collect(),
        b"a second, small layer\n".to_vec(),
    ];
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|l| format!("sha256:{}", sha256_hex(l))).collect::<Vec<_>>(),
        },
    }))
    .unwrap();
    let config_digest = server.put_blob(&config);
    let mut stored = Vec::new();
    for l in &layers {
        stored.push((server.put_blob(l), l.clone()));
    }
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config.len(),
        },
        "layers": stored.iter().map(|(d, l)| serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": d,
            "size": l.len(),
        })).collect::<Vec<_>>(),
    }))
    .unwrap();
    let manifest_digest = server.put_manifest(&manifest, OCI_MANIFEST);
    (server, manifest_digest, stored)
}

async fn connect(server: &RegistryServer) -> Registry {
    let target = RegistryTarget::new(&format!("{}/{NAMESPACE}", server.host()), NAME).unwrap();
    Registry::connect(target, false, &[]).await.unwrap()
}

/// `bytes` with one byte flipped: same length, other hash.
fn flipped(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at] ^= 0x01;
    b
}

/// Entries of `dir` (a pull's temp directories are siblings of its destination).
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The honest registry first: the pull writes a complete layout, so the refusals below are
/// the digest checks at work and not a server the client cannot talk to.
#[tokio::test]
async fn an_intact_image_pulls_into_a_layout() {
    let (server, manifest_digest, layers) = registry_with_an_image().await;
    let registry = connect(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("layout");
    let report = pull_layout(&registry, &manifest_digest, "demo:latest", &dest, &Silent)
        .await
        .unwrap();
    assert_eq!(report.blobs, 3, "config and two layers");
    for (digest, bytes) in &layers {
        let path = dest
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"));
        assert_eq!(&std::fs::read(path).unwrap(), bytes, "{digest}");
    }
    let index = std::fs::read_to_string(dest.join("index.json")).unwrap();
    assert!(index.contains(&manifest_digest), "{index}");
    assert!(dest.join("oci-layout").is_file());
}

/// A blob whose bytes hash to another digest: `DigestMismatch` names it and what it hashed
/// to, the file written is deleted, and a pull leaves no layout and no temp directory.
#[tokio::test]
async fn a_blob_that_does_not_hash_to_its_digest_is_refused_and_deleted() {
    let (server, manifest_digest, layers) = registry_with_an_image().await;
    let (digest, bytes) = &layers[0];
    let bad = flipped(bytes, 4321);
    server.corrupt(digest, &bad);
    let registry = connect(&server).await;
    let tmp = tempfile::tempdir().unwrap();

    let dest = tmp.path().join("blob");
    let err = registry
        .get_blob(digest, bytes.len() as u64, &dest, &Silent)
        .await
        .expect_err("a blob that does not hash to its digest was accepted");
    match &err {
        RegistryError::DigestMismatch {
            what,
            digest: named,
            actual,
            ..
        } => {
            assert_eq!(*what, "blob");
            assert_eq!(named, digest);
            assert_eq!(actual, &format!("sha256:{}", sha256_hex(&bad)));
        }
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    assert!(err.to_string().contains(digest.as_str()), "{err}");
    assert!(!dest.exists(), "the corrupt blob is deleted");

    let layout = tmp.path().join("layout");
    let err = pull_layout(&registry, &manifest_digest, "demo:latest", &layout, &Silent)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RegistryError::DigestMismatch { what: "blob", digest: d, .. } if d == digest),
        "{err:?}"
    );
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "nothing left");
}

/// A manifest whose bytes hash to another digest (here still a well-formed manifest, so
/// nothing but the hash can tell) is refused before any blob is fetched.
#[tokio::test]
async fn a_manifest_that_does_not_hash_to_its_digest_is_refused() {
    let (server, manifest_digest, _) = registry_with_an_image().await;
    let registry = connect(&server).await;
    let (good, _) = registry.get_manifest(&manifest_digest).await.unwrap();
    let text = String::from_utf8(good).unwrap();
    // Same length, same structure: the layer's media type loses its `.tar` for `.taR`.
    let forged = text.replacen("layer.v1.tar", "layer.v1.taR", 1);
    assert_ne!(forged, text);
    server.corrupt(&manifest_digest, forged.as_bytes());

    let err = match registry.get_manifest(&manifest_digest).await {
        Ok((bytes, _)) => panic!(
            "a manifest that does not hash to its digest was accepted: {}",
            String::from_utf8_lossy(&bytes)
        ),
        Err(e) => e,
    };
    match &err {
        RegistryError::DigestMismatch {
            what,
            digest,
            actual,
            ..
        } => {
            assert_eq!(*what, "manifest");
            assert_eq!(digest, &manifest_digest);
            assert_eq!(actual, &format!("sha256:{}", sha256_hex(forged.as_bytes())));
        }
        other => panic!("expected DigestMismatch, got {other:?}"),
    }

    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let blob_requests = |s: &RegistryServer| {
        s.requests()
            .iter()
            .filter(|r| r.contains("/blobs/"))
            .count()
    };
    let before = blob_requests(&server);
    let err = pull_layout(&registry, &manifest_digest, "demo:latest", &layout, &Silent)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::DigestMismatch {
                what: "manifest",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(blob_requests(&server), before, "no blob fetched");
    assert_eq!(entries(tmp.path()), Vec::<String>::new(), "nothing left");
}
