//! The installed-packages database: `installed.json` (pulled packages) and `staged.json`
//! (packages `tt-model package` staged here), both under the tt-model state root.
//!
//! `installed.json` is a contract with other programs: Tenstorrent's `tt` CLI reads it
//! directly (`tenstorrent/modelhub/bundles.py`) to know which bundles are pulled, where their
//! manifests are and which arch they target. So it has the original tt-model's shape: one flat
//! JSON object keyed by the **lowercased** repo id, each value an entry with the original's
//! fields (`repo_id` in its real case, `container`, `image`, `revision`, `manifest`, `arch`,
//! `image_digest`, `image_loaded_id`, `profile`, `profiles`), to which we add `name` and
//! `kind`. Staged packages have no repo id, and an entry keyed by a bare package name would
//! show up in `tt model list` as a bundle that cannot be served by id, so they live in
//! `staged.json` beside it (same shape, keyed by package name).
//!
//! Files written by an earlier tt-model (`{"format": 1, "packages": {...}}`, both kinds in
//! one file) are migrated on first read. Entries this tt-model cannot read (the original's
//! v5/v6 bundles, which have no container) are skipped when listing and kept byte for byte
//! when the file is rewritten.
//!
//! Several tt-model processes may record at once (a package and a serve): every change is a
//! read-modify-write under an exclusive `flock` on a sibling lock file, and each new file
//! replaces the old by rename, so a reader (which takes no lock, like `tt`) never sees half a
//! file and no entry is lost. A file that is not a JSON object is reported with its path and
//! never overwritten.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The pulled-packages file name under the state root (the name `tt` reads).
pub const FILE_NAME: &str = "installed.json";
/// The staged-packages file name under the state root.
pub const STAGED_FILE_NAME: &str = "staged.json";

/// Where a package came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Written by `tt-model package` (the manifest lives in the output directory).
    Staged,
    /// Fetched by `tt-model pull`.
    #[default]
    Pulled,
}

/// One installed package. The field order is the file's: the original's fields first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The package id: `org/name` (pulled, in the Hub's case) or the package name (staged).
    pub repo_id: String,
    /// Always true: tt-model installs container packages only (`tt` reads it as the kind).
    #[serde(default = "yes")]
    pub container: bool,
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
    /// The package name (the container name's stem). An entry the original wrote has none;
    /// it is then read from the manifest, else the repo id's last segment.
    #[serde(default)]
    pub name: String,
    /// The runtime kind (`http-server`, `vllm-plugin`, …).
    #[serde(default)]
    pub kind: String,
    /// Which file the entry lives in; not written (the file says it).
    #[serde(skip)]
    pub source: Source,
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

    /// The entry read from `raw` in the file of `source`; `None` for what is not a container
    /// package entry (the original's v5/v6 bundles).
    fn from_value(raw: &Value, source: Source) -> Option<Entry> {
        let mut e: Entry = serde_json::from_value(raw.clone()).ok()?;
        if !e.container {
            return None;
        }
        e.source = source;
        if e.name.is_empty() {
            e.name = manifest_name(&e.manifest)
                .unwrap_or_else(|| e.repo_id.rsplit('/').next().unwrap_or_default().to_string());
        }
        Some(e)
    }
}

/// The `name` a wire manifest records, when the file can be read.
fn manifest_name(path: &Path) -> Option<String> {
    let v: Value = serde_json::from_slice(&fs::read(path).ok()?).ok()?;
    v.get("name")?.as_str().map(str::to_string)
}

/// The key an entry is filed under: the lowercased id for a pulled package (the Hub's ids are
/// case-insensitive, and `tt` looks them up lowercased), the name as given for a staged one.
fn key(id: &str, source: Source) -> String {
    match source {
        Source::Pulled => id.to_lowercase(),
        Source::Staged => id.to_string(),
    }
}

/// Both files' contents, entries kept as raw JSON so unknown ones survive a rewrite.
#[derive(Debug, Default)]
struct Document {
    pulled: BTreeMap<String, Value>,
    staged: BTreeMap<String, Value>,
    /// Read from an earlier tt-model's single-file format: rewrite both files.
    legacy: bool,
}

impl Document {
    fn map(&mut self, source: Source) -> &mut BTreeMap<String, Value> {
        match source {
            Source::Pulled => &mut self.pulled,
            Source::Staged => &mut self.staged,
        }
    }

    fn entries(&self) -> Vec<Entry> {
        let pulled = self
            .pulled
            .values()
            .filter_map(|v| Entry::from_value(v, Source::Pulled));
        let staged = self
            .staged
            .values()
            .filter_map(|v| Entry::from_value(v, Source::Staged));
        let mut all: Vec<Entry> = pulled.chain(staged).collect();
        all.sort_by(|a, b| a.repo_id.cmp(&b.repo_id));
        all
    }

    /// The entry for `id` and the file it is in: a pulled id (case-insensitive) first.
    fn find(&self, id: &str) -> Option<(Source, Entry)> {
        [Source::Pulled, Source::Staged].into_iter().find_map(|s| {
            let map = match s {
                Source::Pulled => &self.pulled,
                Source::Staged => &self.staged,
            };
            let e = Entry::from_value(map.get(&key(id, s))?, s)?;
            Some((s, e))
        })
    }
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
        /// What is wrong: the JSON error, or a value that is not an object.
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

/// A handle on `installed.json` and `staged.json`; each call opens, locks and closes them.
#[derive(Debug, Clone)]
pub struct LocalDb {
    path: PathBuf,
}

impl LocalDb {
    /// The database under `state_root` (`<root>/installed.json`, `<root>/staged.json`).
    pub fn under(state_root: &Path) -> Self {
        Self::at(state_root.join(FILE_NAME))
    }

    /// The database at an explicit path (`staged.json` is its sibling).
    pub fn at(path: PathBuf) -> Self {
        Self { path }
    }

    /// The pulled-packages file's path (`installed.json`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The staged-packages file's path (`staged.json` beside `installed.json`).
    pub fn staged_path(&self) -> PathBuf {
        self.path.with_file_name(STAGED_FILE_NAME)
    }

    /// Every entry, sorted by id. A missing file is an empty database. Reads take no lock:
    /// writers replace the files by rename, so a reader sees the old or the new file whole.
    pub fn all(&self) -> Result<Vec<Entry>, LocalDbError> {
        Ok(self.read_migrating()?.entries())
    }

    /// The entry for `id` (a pulled id matches in any case).
    pub fn get(&self, id: &str) -> Result<Option<Entry>, LocalDbError> {
        Ok(self.read_migrating()?.find(id).map(|(_, e)| e))
    }

    /// Adds or replaces the entry for `entry.repo_id`, in the file of `entry.source`.
    pub fn record(&self, entry: Entry) -> Result<(), LocalDbError> {
        let value = serde_json::to_value(&entry).expect("entries serialize");
        self.change(|doc| {
            doc.map(entry.source)
                .insert(key(&entry.repo_id, entry.source), value);
        })
    }

    /// Removes the entry for `id`, returning it.
    pub fn remove(&self, id: &str) -> Result<Option<Entry>, LocalDbError> {
        let mut removed = None;
        self.change(|doc| {
            if let Some((source, e)) = doc.find(id) {
                doc.map(source).remove(&key(id, source));
                removed = Some(e);
            }
        })?;
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
            let Some((source, mut e)) = doc.find(id) else {
                return;
            };
            found = true;
            if digest.is_some() {
                e.image_digest = digest.map(str::to_string);
            }
            e.image_loaded_id = Some(loaded_id.to_string());
            let value = serde_json::to_value(&e).expect("entries serialize");
            doc.map(source).insert(key(id, source), value);
        })?;
        Ok(found)
    }

    /// Read, change and atomically replace both files, under the exclusive lock.
    fn change(&self, f: impl FnOnce(&mut Document)) -> Result<(), LocalDbError> {
        let _lock = self.lock()?;
        let mut doc = self.read()?;
        f(&mut doc);
        self.write(&self.path, &doc.pulled)?;
        let staged = self.staged_path();
        if doc.staged.is_empty() && !staged.exists() {
            return Ok(());
        }
        self.write(&staged, &doc.staged)
    }

    /// [`Self::read`], rewriting an earlier tt-model's file in the current format first so
    /// that `tt` (which reads `installed.json` itself) sees it as the original writes it. A
    /// failed rewrite (a read-only state root) still answers from what was read.
    fn read_migrating(&self) -> Result<Document, LocalDbError> {
        let doc = self.read()?;
        if doc.legacy && self.change(|_| {}).is_ok() {
            return self.read();
        }
        Ok(doc)
    }

    fn read(&self) -> Result<Document, LocalDbError> {
        let mut doc = Document::default();
        let Some(top) = read_object(&self.path)? else {
            doc.staged = read_object(&self.staged_path())?.unwrap_or_default();
            return Ok(doc);
        };
        // An earlier tt-model's format: `{"format": N, "packages": {id: entry with source}}`.
        if let (Some(Value::Number(_)), Some(Value::Object(packages))) =
            (top.get("format"), top.get("packages"))
        {
            doc.legacy = true;
            for (id, v) in packages {
                let source = match v.get("source").and_then(Value::as_str) {
                    Some("staged") => Source::Staged,
                    _ => Source::Pulled,
                };
                let mut v = v.clone();
                if let Value::Object(m) = &mut v {
                    m.remove("source");
                }
                doc.map(source).insert(key(id, source), v);
            }
        } else {
            doc.pulled = top;
        }
        let staged = read_object(&self.staged_path())?.unwrap_or_default();
        for (k, v) in staged {
            doc.staged.entry(k).or_insert(v);
        }
        Ok(doc)
    }

    /// Temp file in the same directory, fsync, rename: all or nothing.
    fn write(&self, path: &Path, map: &BTreeMap<String, Value>) -> Result<(), LocalDbError> {
        let err = |source| LocalDbError::Write {
            path: path.to_path_buf(),
            source,
        };
        let tmp = sibling(path, &format!(".tmp.{}", std::process::id()));
        let mut bytes = serde_json::to_vec_pretty(map).expect("entries serialize");
        bytes.push(b'\n');
        let mut file = fs::File::create(&tmp).map_err(err)?;
        let written = file.write_all(&bytes).and_then(|_| file.sync_all());
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(err(e));
        }
        fs::rename(&tmp, path).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            err(e)
        })
    }

    /// A blocking exclusive `flock` on `installed.json.lock` (a stable inode: the files
    /// themselves are replaced by rename). Released when the returned file closes.
    fn lock(&self) -> Result<fs::File, LocalDbError> {
        let path = sibling(&self.path, ".lock");
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

/// `<path><suffix>` in the same directory.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The JSON object in `path`; `None` when the file does not exist.
fn read_object(path: &Path) -> Result<Option<BTreeMap<String, Value>>, LocalDbError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(LocalDbError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let corrupt = |detail: String| LocalDbError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    match serde_json::from_slice::<Value>(&bytes).map_err(|e| corrupt(e.to_string()))? {
        Value::Object(m) => Ok(Some(m.into_iter().collect())),
        other => Err(corrupt(format!(
            "expected a JSON object keyed by package id, found {}",
            match other {
                Value::Array(_) => "an array",
                Value::Null => "null",
                _ => "a scalar",
            }
        ))),
    }
}

#[cfg(test)]
#[path = "localdb_tests.rs"]
mod tests;
