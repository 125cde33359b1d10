//! Layouts round-trip through docker-archives; corrupt, missing and symlinked blobs.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::convert::{OciExport, docker_archive_to_oci};
use crate::docker_archive::tar_header;
use crate::layout::{LayoutError, OciLayout};

fn add(builder: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
    let mut header = tar_header(data.len() as u64);
    builder.append_data(&mut header, name, data).unwrap();
}

/// A docker-archive with two layers (one listed twice) and its config.
fn saved_archive(dir: &Path) -> PathBuf {
    let (l1, l2) = (b"base-layer".to_vec(), b"top-layer".to_vec());
    let diff = |b: &[u8]| format!("sha256:{}", hex::encode(Sha256::digest(b)));
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [diff(&l1), diff(&l2), diff(&l1)]}
    }))
    .unwrap();
    let config_hex = hex::encode(Sha256::digest(&config));
    let mut b = tar::Builder::new(Vec::new());
    add(&mut b, "a/layer.tar", &l1);
    add(&mut b, "b/layer.tar", &l2);
    add(&mut b, &format!("{config_hex}.json"), &config);
    let manifest = json!([{"Config": format!("{config_hex}.json"), "RepoTags": ["x:y"],
        "Layers": ["a/layer.tar", "b/layer.tar", "a/layer.tar"]}]);
    add(&mut b, "manifest.json", manifest.to_string().as_bytes());
    let path = dir.join("save.tar");
    fs::write(&path, b.into_inner().unwrap()).unwrap();
    path
}

/// The test archive converted to an OCI layout at `dir/oci`.
fn saved_layout(dir: &Path) -> OciExport {
    docker_archive_to_oci(&saved_archive(dir), &dir.join("oci"), "x:y").unwrap()
}

#[test]
fn layout_round_trips_through_a_docker_archive() {
    let dir = tempfile::tempdir().unwrap();
    let first = saved_layout(dir.path());
    let layout = OciLayout::open(&dir.path().join("oci")).unwrap();
    assert_eq!(layout.manifest_digest, first.manifest_digest);
    assert_eq!(layout.image_id(), first.config_digest);
    assert_eq!(layout.ref_name.as_deref(), Some("x:y"));
    assert!(layout.is_image(&first.manifest_digest));
    assert!(layout.expect("sha256:00").is_err());

    let mut archive = Vec::new();
    let n = layout
        .write_docker_archive("tt-model/x:1", &mut archive)
        .unwrap();
    assert_eq!(n, archive.len() as u64);
    // The progress total is exact, manifest.json included, with a tag and without one.
    assert_eq!(n, layout.archive_size("tt-model/x:1"));
    let untagged = layout.write_docker_archive("", io::sink()).unwrap();
    assert_eq!(untagged, layout.archive_size(""));
    // The regenerated archive names the tag and converts back to the very same image.
    let again = dir.path().join("again.tar");
    fs::write(&again, &archive).unwrap();
    let second = docker_archive_to_oci(&again, &dir.path().join("oci2"), "x:y").unwrap();
    assert_eq!(second, first);
    let mut names = Vec::new();
    let mut manifest = Value::Null;
    for e in tar::Archive::new(archive.as_slice()).entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        if name == "manifest.json" {
            manifest = serde_json::from_reader(&mut e).unwrap();
        }
        names.push(name);
    }
    assert_eq!(
        names.len(),
        4,
        "config, two unique layers, manifest: {names:?}"
    );
    assert_eq!(
        names.last().unwrap(),
        "manifest.json",
        "manifest.json comes last"
    );
    assert_eq!(manifest[0]["RepoTags"], json!(["tt-model/x:1"]));
    assert_eq!(manifest[0]["Layers"].as_array().unwrap().len(), 3);
}

#[test]
fn symlinked_blobs_are_dereferenced() {
    let dir = tempfile::tempdir().unwrap();
    let out = saved_layout(dir.path());
    // Rebuild the layout as an HF-style symlink farm pointing into a content store.
    let store = dir.path().join("store");
    fs::create_dir_all(&store).unwrap();
    let blobs = dir.path().join("oci/blobs/sha256");
    for e in fs::read_dir(&blobs).unwrap() {
        let p = e.unwrap().path();
        let target = store.join(p.file_name().unwrap());
        fs::rename(&p, &target).unwrap();
        std::os::unix::fs::symlink(&target, &p).unwrap();
    }
    let layout = OciLayout::open(&dir.path().join("oci")).unwrap();
    let mut archive = Vec::new();
    layout.write_docker_archive("", &mut archive).unwrap();
    let mut kinds = Vec::new();
    for e in tar::Archive::new(archive.as_slice()).entries().unwrap() {
        let e = e.unwrap();
        kinds.push((e.header().entry_type(), e.size()));
    }
    assert!(kinds.iter().all(|(k, _)| k.is_file()), "{kinds:?}");
    assert_eq!(
        kinds[0].1,
        fs::metadata(store.join(out.config_digest.trim_start_matches("sha256:")))
            .unwrap()
            .len()
    );
}

/// Flips one byte of `path` in place (same size): `needle`'s first byte becomes `to`,
/// so JSON stays JSON and only a hash can tell.
fn flip_in_place(path: &Path, needle: &[u8], to: u8) {
    let mut bytes = fs::read(path).unwrap();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle present");
    bytes[at] = to;
    fs::write(path, &bytes).unwrap();
}

fn blob_path(dir: &Path, digest: &str) -> PathBuf {
    dir.join("oci/blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

#[test]
fn a_same_size_corrupt_config_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let out = saved_layout(dir.path());
    flip_in_place(&blob_path(dir.path(), &out.config_digest), b"amd64", b'b');
    let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
    assert!(
        matches!(&err, LayoutError::BlobDigest { digest, .. } if *digest == out.config_digest),
        "{err}"
    );
    assert!(err.to_string().contains(&out.config_digest), "{err}");
}

#[test]
fn a_same_size_corrupt_manifest_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let out = saved_layout(dir.path());
    let manifest = blob_path(dir.path(), &out.manifest_digest);
    flip_in_place(&manifest, b"application", b'b');
    // Still a well-formed manifest: only its digest betrays it.
    let text: Value = serde_json::from_slice(&fs::read(&manifest).unwrap()).unwrap();
    assert!(text.get("config").is_some());
    let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
    assert!(
        matches!(&err, LayoutError::BlobDigest { digest, .. } if *digest == out.manifest_digest),
        "{err}"
    );
    assert!(err.to_string().contains(&out.manifest_digest), "{err}");
}

#[test]
fn corrupt_and_missing_blobs_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = saved_layout(dir.path());
    let layer = dir
        .path()
        .join("oci/blobs/sha256")
        .join(out.layers[1].trim_start_matches("sha256:"));
    // Same size, other bytes: only the streaming hash can tell.
    let mut bytes = fs::read(&layer).unwrap();
    bytes[0] ^= 0xff;
    fs::write(&layer, &bytes).unwrap();
    let layout = OciLayout::open(&dir.path().join("oci")).unwrap();
    let mut archive = Vec::new();
    let err = layout
        .write_docker_archive("x:y", &mut archive)
        .unwrap_err();
    assert!(
        matches!(err, LayoutError::BlobDigest { ref digest, .. } if *digest == out.layers[1]),
        "{err}"
    );
    // The archive stops before manifest.json, so an engine would load nothing.
    let names: Vec<String> = tar::Archive::new(archive.as_slice())
        .entries()
        .unwrap()
        .filter_map(|e| {
            e.ok()
                .map(|e| e.path().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    assert!(!names.iter().any(|n| n == "manifest.json"), "{names:?}");

    fs::write(&layer, b"short").unwrap();
    let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
    assert!(
        matches!(err, LayoutError::BlobSize { found: 5, .. }),
        "{err}"
    );
    fs::remove_file(&layer).unwrap();
    let err = OciLayout::open(&dir.path().join("oci")).unwrap_err();
    assert!(matches!(err, LayoutError::Read { .. }), "{err}");
    let err = OciLayout::open(dir.path()).unwrap_err();
    assert!(matches!(err, LayoutError::NotALayout { .. }), "{err}");
}
