//! Loading an OCI layout into the real engine: export an image, remove it, load the layout
//! back (through a symlink farm, as in a Hugging Face snapshot) and get the same image id; a
//! corrupt blob is refused and loads nothing.
//!
//! Needs a Docker engine. Without one the tests print why and pass, unless
//! `TT_MODEL_REQUIRE_DOCKER=1` (CI sets it) turns that into a failure.

use std::path::Path;

use tt_model_engine::Client;
use tt_model_engine::oci_load::LoadError;
use tt_model_oci::LayoutError;
use tt_model_oci::OciLayout;

use tt_model_testkit::engine::engine_or_skip as engine;

/// A rootfs whose one file is unique to this run, so the image exists nowhere else and
/// removing its tag really deletes it.
fn unique_rootfs(label: &str) -> Vec<u8> {
    let stamp = format!(
        "{label} {} {:?}\n",
        std::process::id(),
        std::time::SystemTime::now()
    );
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_size(stamp.len() as u64);
    h.set_mtime(0);
    b.append_data(&mut h, "stamp.txt", stamp.as_bytes())
        .unwrap();
    b.into_inner().unwrap()
}

/// Imports a unique image as `repo:tag`, exports it as a layout under `dir`, removes it.
async fn exported_then_removed(c: &Client, repo: &str, tag: &str, dir: &Path) -> String {
    let body = futures_util::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(
        unique_rootfs(tag),
    ))]);
    let id = c
        .import_rootfs(body, repo, tag, &["CMD [\"/bin/sh\"]".into()])
        .await
        .unwrap();
    let reference = format!("{repo}:{tag}");
    let export = c
        .export_oci_layout(&reference, dir, &reference)
        .await
        .unwrap();
    assert_eq!(export.config_digest, id);
    c.remove_image(&reference).await.unwrap();
    assert!(c.image(&reference).await.unwrap().is_none());
    assert!(c.image(&id).await.unwrap().is_none(), "the image is gone");
    id
}

/// Replaces every blob by a symlink into a separate store (the HF snapshot shape).
fn symlink_farm(layout: &Path, store: &Path) {
    std::fs::create_dir_all(store).unwrap();
    let blobs = layout.join("blobs/sha256");
    for e in std::fs::read_dir(&blobs).unwrap() {
        let p = e.unwrap().path();
        let target = store.join(p.file_name().unwrap());
        std::fs::rename(&p, &target).unwrap();
        std::os::unix::fs::symlink(&target, &p).unwrap();
    }
}

#[tokio::test]
async fn an_exported_layout_loads_back_as_the_same_image() {
    let Some(c) = engine().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (repo, tag) = (
        "tt-model-test/oci-load",
        format!("rt-{}", std::process::id()),
    );
    let reference = format!("{repo}:{tag}");
    let layout_dir = dir.path().join("image");
    let id = exported_then_removed(&c, repo, &tag, &layout_dir).await;
    symlink_farm(&layout_dir, &dir.path().join("store"));

    let layout = OciLayout::open(&layout_dir).unwrap();
    assert_eq!(layout.image_id(), id);
    layout.expect(&id).unwrap();
    // Every byte streamed is reported, close to the layout's hint (manifest.json aside).
    let told = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = told.clone();
    let on_bytes = std::sync::Arc::new(move |n| {
        count.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    });
    let loaded = c
        .load_oci_layout_with(&layout, &reference, on_bytes)
        .await
        .unwrap();
    assert_eq!(loaded.id, id, "the very same image");
    assert!(loaded.bytes > 0);
    assert_eq!(
        told.load(std::sync::atomic::Ordering::Relaxed),
        loaded.bytes
    );
    // The progress total is the bytes the load streamed, exactly.
    assert_eq!(layout.archive_size(&reference), loaded.bytes);
    let facts = c.image(&reference).await.unwrap().expect("tagged again");
    assert_eq!(facts.id, id);

    // Loading again over the present image is a no-op with the same answer.
    let again = c.load_oci_layout(&layout, &reference).await.unwrap();
    assert_eq!(again.id, id);
    c.remove_image(&reference).await.unwrap();
}

#[tokio::test]
async fn a_corrupt_blob_is_refused_and_nothing_is_loaded() {
    let Some(c) = engine().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (repo, tag) = (
        "tt-model-test/oci-load",
        format!("bad-{}", std::process::id()),
    );
    let reference = format!("{repo}:{tag}");
    let layout_dir = dir.path().join("image");
    let id = exported_then_removed(&c, repo, &tag, &layout_dir).await;
    let layout = OciLayout::open(&layout_dir).unwrap();
    // Same size, one byte flipped: only the streaming hash notices.
    let layer = &layout.layers[0];
    let mut bytes = std::fs::read(&layer.path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&layer.path, &bytes).unwrap();

    let err = c.load_oci_layout(&layout, &reference).await.unwrap_err();
    assert!(
        matches!(&err, LoadError::Layout(LayoutError::BlobDigest { digest, .. }) if *digest == layer.digest),
        "{err}"
    );
    assert!(c.image(&reference).await.unwrap().is_none());
    assert!(c.image(&id).await.unwrap().is_none(), "nothing was loaded");
}
