//! The installed-packages database, `installed.json` under the tt-model state root.
//!
//! One entry per package id (`org/name` for a pulled package, the package name for a staged
//! one). It remembers what the engine alone cannot tell: which manifest a package came from,
//! the image digest it records, and the id this engine gave that image when it was loaded
//! (a containerd image store names images by manifest digest, the classic store by config
//! digest), so `serve`, `list` and `rm` can judge an image without re-hashing it.
//!
//! Several tt-model processes may record at once (a package and a serve): every change is a
//! read-modify-write under an exclusive `flock` on a sibling lock file, and the new file
//! replaces the old by rename, so a reader (which takes no lock) never sees half a file and
//! no entry is lost. A
//! file that is not valid JSON is reported with its path and never overwritten.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The database file name under the state root.
pub const FILE_NAME: &str = "installed.json";
/// The format version written in the file.
pub const FORMAT: u32 = 1;

/// Where a package came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Written by `tt-model package` (the manifest lives in the output directory).
    Staged,
    /// Fetched by `tt-model pull`.
    Pulled,
}

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The package id: `org/name` (pulled) or the package name (staged).
    pub repo_id: String,
    /// The package name (the container name's stem).
    pub name: String,
    /// Always true: tt-model installs container packages only.
    #[serde(default = "yes")]
    pub container: bool,
    /// Whether the package was staged locally or pulled from the Hub.
    pub source: Source,
    /// The runtime kind (`http-server`, `vllm-plugin`, …).
    #[serde(default)]
    pub kind: String,
    /// The image reference serve runs.
    pub image: String,
    /// The Hub revision a pulled package was fetched at.
    #[serde(default)]
    pub revision: Option<String>,
    /// The package's `tt_kernel_manifest.json`.
    pub manifest: PathBuf,
    /// The chip architecture the package targets (e.g. `blackhole`); `None` when not recorded.
    #[serde(default)]
    pub arch: Option<String>,
    /// The image digest the package records.
    #[serde(default)]
    pub image_digest: Option<String>,
    /// The id this engine gave the image when it was loaded.
    #[serde(default)]
    pub image_loaded_id: Option<String>,
    /// The default profile.
    #[serde(default)]
    pub profile: String,
    /// Every profile the package offers, by name.
    #[serde(default)]
    pub profiles: Vec<String>,
}

fn yes() -> bool {
    true
}

impl Entry {
    /// The id this engine is known to give the recorded digest: a loaded id counts only when it
    /// was recorded for the same digest the package records now.
    pub fn known_loaded_id(&self, digest: Option<&str>) -> Option<&str> {
        match (&self.image_digest, digest) {
            (Some(recorded), Some(d)) if recorded == d => self.image_loaded_id.as_deref(),
            _ => None,
        }
    }
}

/// The file's shape.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Document {
    format: u32,
    packages: BTreeMap<String, Entry>,
}

/// Why the database could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalDbError {
    /// The file exists but could not be read.
    #[error("Cannot read {path}")]
    Read {
        /// The database file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The file exists but is not a database; it is left as it is for the user to inspect.
    #[error(
        "{path} is corrupt ({detail}); it was left untouched — move it aside to start a new one"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What is wrong: the JSON error, or a format newer than this tt-model reads.
        detail: String,
    },
    /// The new database could not be written or renamed into place.
    #[error("Cannot write {path}")]
    Write {
        /// The database file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The sibling lock file (`installed.json.lock`) could not be opened or locked.
    #[error("Cannot lock {path}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

/// A handle on `installed.json`; each call opens, locks and closes it.
#[derive(Debug, Clone)]
pub struct LocalDb {
    path: PathBuf,
}

impl LocalDb {
    /// The database under `state_root` (`<root>/installed.json`).
    pub fn under(state_root: &Path) -> Self {
        Self::at(state_root.join(FILE_NAME))
    }

    /// The database at an explicit path.
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// The database file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry, sorted by id. A missing file is an empty database. Reads take no lock:
    /// writers replace the file by rename, so a reader sees the old or the new file whole.
    pub fn all(&self) -> Result<Vec<Entry>, LocalDbError> {
        Ok(self.read()?.packages.into_values().collect())
    }

    /// The entry for `id`.
    pub fn get(&self, id: &str) -> Result<Option<Entry>, LocalDbError> {
        Ok(self.read()?.packages.remove(id))
    }

    /// Adds or replaces the entry for `entry.repo_id`.
    pub fn record(&self, entry: Entry) -> Result<(), LocalDbError> {
        self.change(|doc| {
            doc.packages.insert(entry.repo_id.clone(), entry);
        })
    }

    /// Removes the entry for `id`, returning it.
    pub fn remove(&self, id: &str) -> Result<Option<Entry>, LocalDbError> {
        let mut removed = None;
        self.change(|doc| removed = doc.packages.remove(id))?;
        Ok(removed)
    }

    /// Records the id this engine gave `digest` for the entry `id` (after a load). Returns
    /// false when there is no such entry.
    pub fn set_loaded_id(
        &self,
        id: &str,
        digest: Option<&str>,
        loaded_id: &str,
    ) -> Result<bool, LocalDbError> {
        let mut found = false;
        self.change(|doc| {
            if let Some(e) = doc.packages.get_mut(id) {
                found = true;
                if digest.is_some() {
                    e.image_digest = digest.map(str::to_string);
                }
                e.image_loaded_id = Some(loaded_id.to_string());
            }
        })?;
        Ok(found)
    }

    /// Read, change and atomically replace, under the exclusive lock.
    fn change(&self, f: impl FnOnce(&mut Document)) -> Result<(), LocalDbError> {
        let _lock = self.lock()?;
        let mut doc = self.read()?;
        f(&mut doc);
        doc.format = FORMAT;
        self.write(&doc)
    }

    fn read(&self) -> Result<Document, LocalDbError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Document::default()),
            Err(source) => {
                return Err(LocalDbError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let doc: Document = serde_json::from_slice(&bytes).map_err(|e| LocalDbError::Corrupt {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        if doc.format > FORMAT {
            return Err(LocalDbError::Corrupt {
                path: self.path.clone(),
                detail: format!(
                    "format {} is newer than this tt-model's {FORMAT}",
                    doc.format
                ),
            });
        }
        Ok(doc)
    }

    /// Temp file in the same directory, fsync, rename: all or nothing.
    fn write(&self, doc: &Document) -> Result<(), LocalDbError> {
        let err = |source| LocalDbError::Write {
            path: self.path.clone(),
            source,
        };
        let tmp = self.sibling(&format!(".tmp.{}", std::process::id()));
        let mut bytes = serde_json::to_vec_pretty(doc).expect("entries serialize");
        bytes.push(b'\n');
        let mut file = fs::File::create(&tmp).map_err(err)?;
        let written = file.write_all(&bytes).and_then(|_| file.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(err(e));
        }
        fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            err(e)
        })
    }

    /// `installed.json<suffix>` beside the database.
    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        self.path.with_file_name(name)
    }

    /// A blocking exclusive `flock` on `installed.json.lock` (a stable inode: the database
    /// itself is replaced by rename). Released when the returned file closes.
    fn lock(&self) -> Result<fs::File, LocalDbError> {
        let path = self.sibling(".lock");
        let err = |source| LocalDbError::Lock {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(err)?;
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(err)?;
        // An exclusive advisory lock (flock on Unix), released when the file is closed.
        file.lock().map_err(err)?;
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn entry(id: &str, image: &str) -> Entry {
        Entry {
            repo_id: id.into(),
            name: id.rsplit('/').next().unwrap().into(),
            container: true,
            source: Source::Staged,
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

    #[test]
    fn record_get_remove_and_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = LocalDb::under(&dir.path().join("state"));
        assert!(db.all().unwrap().is_empty(), "no file is an empty database");
        db.record(entry("acme/b", "img:1")).unwrap();
        db.record(entry("a", "img:2")).unwrap();
        let mut changed = entry("a", "img:3");
        changed.source = Source::Pulled;
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
        let text = fs::read_to_string(db.path()).unwrap();
        assert!(text.contains("\"source\": \"staged\""), "{text}");
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("state"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_corrupt_file_is_reported_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let db = LocalDb::under(dir.path());
        fs::write(db.path(), b"{ not json").unwrap();
        let err = db.all().unwrap_err();
        assert!(matches!(err, LocalDbError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains(&db.path().display().to_string()));
        assert!(db.record(entry("a", "i")).is_err());
        assert_eq!(
            fs::read(db.path()).unwrap(),
            b"{ not json",
            "not overwritten"
        );
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
                        db.record(entry(&format!("t{t}/p{i}"), "img:1")).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(LocalDb::at(path).all().unwrap().len(), 200);
    }
}
