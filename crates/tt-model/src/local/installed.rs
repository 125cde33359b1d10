//! The CLI's view of the installed-packages database (`tt_model_engine::localdb`): where it
//! lives, how a package becomes an entry, and which entry a served package is.

use std::path::{Path, PathBuf};

use tt_model_engine::localdb::{Entry, LocalDb, Source};

use super::package::Package;

/// `installed.json` under the tt-model state root.
pub(crate) fn db() -> LocalDb {
    LocalDb::under(&super::state_root())
}

/// An absolute, symlink-free path when it exists, so entries compare by path.
pub(crate) fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// The entry describing `pkg`, installed from `source` under `id`.
pub(crate) fn entry_for(pkg: &Package, id: &str, source: Source) -> Entry {
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
pub(crate) fn find<'e>(entries: &'e [Entry], pkg: &Package) -> Option<&'e Entry> {
    let path = canonical(&pkg.manifest_path);
    entries.iter().find(|e| e.manifest == path).or_else(|| {
        entries
            .iter()
            .find(|e| e.source == Source::Staged && e.repo_id == pkg.name)
    })
}

/// For a package installed by `pull`: its id and the revision it was pulled at.
pub(crate) fn pulled_revision(pkg: &Package) -> Option<(String, String)> {
    let entries = db().all().ok()?;
    let e = find(&entries, pkg)?;
    match (&e.source, &e.revision) {
        (Source::Pulled, Some(rev)) => Some((e.repo_id.clone(), rev.clone())),
        _ => None,
    }
}

/// Records a package `tt-model package` just staged: the engine built the image, so the id it
/// has is the recorded digest.
pub(crate) fn record_staged(manifest: &Path) -> anyhow::Result<Entry> {
    let pkg = Package::load(manifest)?;
    let mut entry = entry_for(&pkg, &pkg.name, Source::Staged);
    entry.image_loaded_id = entry.image_digest.clone();
    db().record(entry.clone())?;
    Ok(entry)
}
