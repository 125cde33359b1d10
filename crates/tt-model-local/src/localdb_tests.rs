//! The database's files: the shape `tt` reads, migration, locking.

use super::*;
use serde_json::json;

fn entry(id: &str, image: &str, source: Source) -> Entry {
    Entry {
        repo_id: id.into(),
        name: id.rsplit('/').next().unwrap().into(),
        container: true,
        source,
        kind: "http-server".into(),
        image: image.into(),
        revision: None,
        manifest: PathBuf::from(format!("/out/{id}/tt_kernel_manifest.json")),
        arch: Some("blackhole".into()),
        image_digest: Some("sha256:aa".into()),
        image_loaded_id: Some("sha256:aa".into()),
        profile: "default".into(),
        profiles: vec!["default".into()],
    }
}

fn json_of(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

#[test]
fn record_get_remove_and_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = LocalDb::under(&dir.path().join("state"));
    assert!(db.all().unwrap().is_empty(), "no file is an empty database");
    db.record(entry("acme/b", "img:1", Source::Pulled)).unwrap();
    db.record(entry("a", "img:2", Source::Staged)).unwrap();
    let changed = entry("a", "img:3", Source::Staged);
    db.record(changed.clone()).unwrap();
    let ids: Vec<String> = db.all().unwrap().into_iter().map(|e| e.repo_id).collect();
    assert_eq!(ids, vec!["a", "acme/b"]);
    assert_eq!(db.get("a").unwrap(), Some(changed.clone()));
    assert!(
        db.set_loaded_id("a", Some("sha256:aa"), "sha256:m")
            .unwrap()
    );
    assert!(!db.set_loaded_id("zz", None, "sha256:m").unwrap());
    let a = db.get("a").unwrap().unwrap();
    assert_eq!(a.known_loaded_id(Some("sha256:aa")), Some("sha256:m"));
    assert_eq!(a.known_loaded_id(Some("sha256:bb")), None, "another build");
    assert_eq!(
        db.remove("a").unwrap().map(|e| e.image),
        Some("img:3".into())
    );
    assert_eq!(db.remove("a").unwrap(), None);
    assert_eq!(db.all().unwrap().len(), 1);
    let leftovers: Vec<_> = fs::read_dir(dir.path().join("state"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// `tt` (tenstorrent/modelhub/bundles.py) reads installed.json as one flat object keyed by the
/// lowercased repo id, with the original's field names; staged packages are not in it.
#[test]
fn installed_json_has_the_shape_tt_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = LocalDb::under(dir.path());
    let mut pulled = entry("Acme/GR00T-Tiny", "img:1", Source::Pulled);
    pulled.revision = Some("0123abcd".into());
    db.record(pulled.clone()).unwrap();
    db.record(entry("gr00t-tiny", "img:2", Source::Staged))
        .unwrap();
    assert_eq!(
        json_of(db.path()),
        json!({
            "acme/gr00t-tiny": {
                "repo_id": "Acme/GR00T-Tiny",
                "container": true,
                "image": "img:1",
                "revision": "0123abcd",
                "manifest": "/out/Acme/GR00T-Tiny/tt_kernel_manifest.json",
                "arch": "blackhole",
                "image_digest": "sha256:aa",
                "image_loaded_id": "sha256:aa",
                "profile": "default",
                "profiles": ["default"],
                "name": "GR00T-Tiny",
                "kind": "http-server",
            }
        })
    );
    assert_eq!(
        json_of(&db.staged_path())["gr00t-tiny"]["image"],
        "img:2",
        "staged packages are kept apart"
    );
    assert_eq!(
        db.get("acme/gr00t-TINY").unwrap(),
        Some(pulled),
        "ids are case-insensitive"
    );
    assert!(db.remove("ACME/gr00t-tiny").unwrap().is_some());
    assert_eq!(json_of(db.path()), json!({}));
}

/// The original's own entries (no `name`/`kind`, v5/v6 entries with no container) are read
/// where they can be and kept untouched on a rewrite.
#[test]
fn entries_the_original_wrote_are_read_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = LocalDb::under(dir.path());
    let manifest = dir.path().join("m.json");
    fs::write(&manifest, r#"{"name": "llama-8b", "container": {}}"#).unwrap();
    let v5 = json!({"repo_id": "Org/Old", "version": "5", "venv": "/x"});
    let original = json!({
        "org/old": v5,
        "org/llama": {
            "repo_id": "Org/Llama", "container": true, "image": "ghcr.io/o/l:1",
            "revision": "abc", "manifest": manifest, "arch": "blackhole",
            "image_digest": null, "image_loaded_id": null, "profile": "p150",
            "profiles": ["p150", "p150x4"]
        }
    });
    fs::write(db.path(), serde_json::to_vec(&original).unwrap()).unwrap();
    let all = db.all().unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].name, "llama-8b", "read from the manifest");
    assert_eq!(all[0].source, Source::Pulled);
    db.record(entry("x/y", "img", Source::Pulled)).unwrap();
    assert_eq!(json_of(db.path())["org/old"], v5, "kept byte for byte");
}

/// An earlier tt-model wrote `{"format": 1, "packages": {...}}`: the first read rewrites it.
#[test]
fn the_earlier_format_is_migrated_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = LocalDb::under(dir.path());
    let mut old_pulled = serde_json::to_value(entry("Acme/B", "img:1", Source::Pulled)).unwrap();
    old_pulled["source"] = json!("pulled");
    let mut old_staged = serde_json::to_value(entry("a", "img:2", Source::Staged)).unwrap();
    old_staged["source"] = json!("staged");
    let old = json!({"format": 1, "packages": {"Acme/B": old_pulled, "a": old_staged}});
    fs::write(db.path(), serde_json::to_vec(&old).unwrap()).unwrap();
    let all = db.all().unwrap();
    assert_eq!(
        all.iter()
            .map(|e| (e.repo_id.as_str(), e.source))
            .collect::<Vec<_>>(),
        vec![("Acme/B", Source::Pulled), ("a", Source::Staged)]
    );
    let now = json_of(db.path());
    assert!(now.get("format").is_none(), "{now}");
    assert_eq!(now["acme/b"]["image"], "img:1");
    assert!(now["acme/b"].get("source").is_none());
    assert_eq!(json_of(&db.staged_path())["a"]["image"], "img:2");
}

#[test]
fn a_corrupt_file_is_reported_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = LocalDb::under(dir.path());
    for bad in [&b"{ not json"[..], b"[1, 2]"] {
        fs::write(db.path(), bad).unwrap();
        let err = db.all().unwrap_err();
        assert!(matches!(err, LocalDbError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains(&db.path().display().to_string()));
        assert!(db.record(entry("a", "i", Source::Pulled)).is_err());
        assert_eq!(fs::read(db.path()).unwrap(), bad, "not overwritten");
    }
}

#[test]
fn concurrent_records_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let db = LocalDb::at(path.clone());
            std::thread::spawn(move || {
                for i in 0..25 {
                    let source = if i % 2 == 0 {
                        Source::Pulled
                    } else {
                        Source::Staged
                    };
                    db.record(entry(&format!("t{t}/p{i}"), "img:1", source))
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(LocalDb::at(path).all().unwrap().len(), 200);
}
