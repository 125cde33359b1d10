//! Packages as the installed-packages database ([`crate::localdb`]) records them: how a
//! package becomes an entry, and which entry a served package is.

use std::path::{Path, PathBuf};

use crate::LocalError;
use crate::localdb::{Entry, Source};
use crate::package::{Package, WIRE_MANIFEST};
use crate::state::Local;

/// An absolute, symlink-free path when it exists, so entries compare by path.
pub fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// The entry describing `pkg`, installed from `source` under `id`.
pub fn entry_for(pkg: &Package, id: &str, source: Source) -> Entry {
    Entry {
        repo_id: id.to_string(),
        name: pkg.name.clone(),
        container: true,
        source,
        kind: pkg.kind.clone(),
        image: pkg.image.clone(),
        revision: None,
        manifest: canonical(&pkg.manifest_path),
        arch: pkg.arch(),
        image_digest: pkg.recorded_digest(),
        image_loaded_id: None,
        profile: pkg.default_profile.clone(),
        profiles: pkg.profile_names(),
    }
}

/// The entry for a served package: the one recording its manifest, else a staged entry under
/// its name (the package was staged elsewhere and moved).
pub fn find<'e>(entries: &'e [Entry], pkg: &Package) -> Option<&'e Entry> {
    let path = canonical(&pkg.manifest_path);
    entries.iter().find(|e| e.manifest == path).or_else(|| {
        entries
            .iter()
            .find(|e| e.source == Source::Staged && e.repo_id == pkg.name)
    })
}

/// Every installed package: the database's entries, then `pulled/<org>__<name>/` manifests
/// it does not know (installed before it existed), sorted by id. A database that cannot be
/// read is reported through `warn` and skipped, never rewritten.
pub fn all(local: &Local, warn: &mut dyn FnMut(String)) -> Vec<Entry> {
    let mut entries = local.db().all().unwrap_or_else(|e| {
        warn(e.to_string());
        Vec::new()
    });
    let dir = local.root().join("pulled");
    let mut legacy: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path().join(WIRE_MANIFEST))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    legacy.sort();
    for path in legacy {
        let canonical = canonical(&path);
        if entries.iter().any(|e| e.manifest == canonical) {
            continue;
        }
        let id = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().replacen("__", "/", 1))
            .unwrap_or_default();
        match Package::load(&path) {
            Ok(pkg) => entries.push(entry_for(&pkg, &id, Source::Pulled)),
            Err(e) => warn(format!("{id}: {e}")),
        }
    }
    entries.sort_by(|a, b| a.repo_id.cmp(&b.repo_id));
    entries
}

/// Installs a package `pull` fetched: its manifest `fetched` copied to
/// `pulled/<org>__<name>/tt_kernel_manifest.json` (temp file + rename, so a reader never sees
/// half a file) and its entry recorded with the `commit` it was pulled at and the id the engine
/// gave its image. Call it only once the image is loaded.
pub fn install_pulled(
    local: &Local,
    id: &str,
    fetched: &Path,
    commit: &str,
    loaded_id: &str,
) -> Result<Package, LocalError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |detail| LocalError::Io {
            action,
            path,
            detail,
        }
    };
    let path = local.pulled_manifest(id);
    let bytes = std::fs::read(fetched).map_err(io("read", fetched))?;
    let dir = path.parent().expect("an installed manifest has a parent");
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let tmp = dir.join(format!(".{WIRE_MANIFEST}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io("write", &path)(e)
        })?;
    let pkg = Package::load(&path)?;
    let mut entry = entry_for(&pkg, id, Source::Pulled);
    entry.revision = Some(commit.to_string());
    entry.image_loaded_id = Some(loaded_id.to_string());
    local.db().record(entry)?;
    Ok(pkg)
}

/// For a package installed by `pull`: its id and the revision it was pulled at.
pub fn pulled_revision(local: &Local, pkg: &Package) -> Option<(String, String)> {
    let entries = local.db().all().ok()?;
    let e = find(&entries, pkg)?;
    match (&e.source, &e.revision) {
        (Source::Pulled, Some(rev)) => Some((e.repo_id.clone(), rev.clone())),
        _ => None,
    }
}

/// Records a package `tt-model package` just staged: the engine built the image, so the id it
/// has is the recorded digest.
pub fn record_staged(local: &Local, manifest: &Path) -> Result<Entry, LocalError> {
    let pkg = Package::load(manifest)?;
    let mut entry = entry_for(&pkg, &pkg.name, Source::Staged);
    entry.image_loaded_id = entry.image_digest.clone();
    local.db().record(entry.clone())?;
    Ok(entry)
}
