use std::path::Path;

use super::*;
use crate::convert::docker_archive_to_oci;

const EPOCH: u64 = 1_700_000_000;

fn layer_tar(entries: &[(&str, &[u8], u64)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data, mtime) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        h.set_mtime(*mtime);
        h.set_username("root").unwrap();
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn sha(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// An OCI layout as `export_oci_layout` writes one: the base layer (built long ago) and one
/// layer a build wrote at `build_time`, with a config stamped with that time.
fn exported(dir: &Path, build_time: u64) -> (String, String) {
    let base = layer_tar(&[("bin/sh", b"busybox", EPOCH + 99_999_999)]);
    let built = layer_tar(&[("etc/passwd", b"tt:x:1000", build_time)]);
    let config = format!(
        r#"{{"architecture":"amd64","config":{{"Image":"sha256:{build_time}"}},"container":"c{build_time}","created":"{}","history":[{{"created":"{}"}}],"os":"linux","rootfs":{{"type":"layers","diff_ids":["{}","{}"]}}}}"#,
        tt_model_manifest::timefmt::rfc3339(build_time, false),
        tt_model_manifest::timefmt::rfc3339(build_time, false),
        sha(&base),
        sha(&built)
    );
    let mut archive = tar::Builder::new(Vec::new());
    let config_name = format!("{}.json", &sha(config.as_bytes())[7..]);
    for (name, data) in [
        ("base/layer.tar", base.as_slice()),
        ("built/layer.tar", built.as_slice()),
        (config_name.as_str(), config.as_bytes()),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        archive.append_data(&mut h, name, data).unwrap();
    }
    let manifest = format!(
        r#"[{{"Config":"{config_name}","RepoTags":null,"Layers":["base/layer.tar","built/layer.tar"]}}]"#
    );
    let mut h = tar::Header::new_gnu();
    h.set_size(manifest.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    archive
        .append_data(&mut h, "manifest.json", manifest.as_bytes())
        .unwrap();
    let saved = dir.join("save.tar");
    fs::write(&saved, archive.into_inner().unwrap()).unwrap();
    let out = dir.join("layout");
    docker_archive_to_oci(&saved, &out, "").unwrap();
    (sha(&base), sha(config.as_bytes()))
}

fn normalize(dir: &Path, build_time: u64) -> (Reproduced, String, String) {
    let (base, raw_id) = exported(dir, build_time);
    let done = normalize_layout(
        &dir.join("layout"),
        std::slice::from_ref(&base),
        EPOCH,
        &raw_id,
        |id| format!("tt-model/x:{}", &id[7..19]),
    )
    .unwrap();
    (done, base, raw_id)
}

#[test]
fn two_builds_of_the_same_inputs_give_one_image() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, base, raw_a) = normalize(a_dir.path(), EPOCH + 60);
    let (b, _, raw_b) = normalize(b_dir.path(), EPOCH + 3_600);
    assert_ne!(raw_a, raw_b, "the raw builds differ");
    assert_eq!(a.id, b.id);
    assert_eq!(a.manifest_digest, b.manifest_digest);
    assert_eq!(a.layers_rewritten, 1);
    assert_eq!(a.clamped, 1);
    assert_eq!(a.reference, format!("tt-model/x:{}", &a.id[7..19]));

    // The result is a valid layout (every blob verified by digest) whose base layer is the
    // base's, untouched, though its file is newer than the epoch.
    let layout = OciLayout::open(&a_dir.path().join("layout")).unwrap();
    assert_eq!(layout.config.digest, a.id);
    assert_eq!(layout.layers[0].digest, base);
    assert_eq!(layout.ref_name.as_deref(), Some(a.reference.as_str()));
    assert_eq!(
        recorded_build_id(&a_dir.path().join("layout")).as_deref(),
        Some(raw_a.as_str())
    );
    let config: serde_json::Value =
        serde_json::from_slice(&fs::read(&layout.config.path).unwrap()).unwrap();
    assert_eq!(
        config["rootfs"]["diff_ids"][1],
        layout.layers[1].digest.as_str()
    );
    assert_eq!(
        config["created"],
        tt_model_manifest::timefmt::rfc3339(EPOCH, false)
    );

    // Only what the manifest names (and the manifest) is left.
    let names: Vec<String> = fs::read_dir(a_dir.path().join("layout/blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(
        a.bytes,
        names
            .iter()
            .map(
                |n| fs::metadata(a_dir.path().join("layout/blobs/sha256").join(n))
                    .unwrap()
                    .len()
            )
            .sum::<u64>()
    );
}

#[test]
fn without_a_common_base_every_layer_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let (_, raw_id) = exported(dir.path(), EPOCH + 60);
    let done = normalize_layout(&dir.path().join("layout"), &[], EPOCH, &raw_id, |id| {
        id.to_string()
    })
    .unwrap();
    assert_eq!(done.layers_rewritten, 2);
    assert_eq!(done.clamped, 2);
}
