//! What the user named: a staged manifest, a pulled `org/name[@rev]`, or (for stop/logs/rm) a
//! package name that only running containers know.

use std::path::Path;

use crate::LocalError;
use crate::package::{Package, WIRE_MANIFEST};
use crate::state::Local;

/// `org/name[@rev]` → (`org/name`, rev).
pub fn split_repo(target: &str) -> Option<(String, Option<String>)> {
    let (id, rev) = match target.split_once('@') {
        Some((i, r)) => (i, Some(r.to_string())),
        None => (target, None),
    };
    let parts: Vec<&str> = id.split('/').collect();
    let ok = parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        });
    ok.then(|| (id.to_string(), rev))
}

fn is_authoring_yaml(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
}

fn authoring_hint(p: &str) -> LocalError {
    LocalError::refused(
        "target",
        format!(
            "{p} is the AUTHORING manifest, which describes how to BUILD the image — serve needs the built package.\n  \
         → build it:            tt-model package --container {p}\n  \
         → serve the result:    tt-model serve <out-dir>/<name>/{WIRE_MANIFEST}\n  \
         → or a pulled package: tt-model serve <org>/<name>\n  \
         → see its argv now:    tt-model serve {p} --print"
        ),
    )
}

/// `org/name[@rev]` that names no path and is not installed (serve pulls it first).
pub fn is_unpulled_repo(local: &Local, target: &str) -> bool {
    !Path::new(target).exists()
        && split_repo(target).is_some_and(|(id, _)| !local.pulled_manifest(&id).is_file())
}

/// For `serve --print`: an authoring manifest (`tt-model.yaml`, or a directory holding one
/// and no staged package) prints the argv of the package it would make; anything else
/// resolves as [`resolve`] does.
pub fn resolve_for_print(local: &Local, target: &str) -> Result<Package, LocalError> {
    let path = Path::new(target);
    let authoring = if is_authoring_yaml(path) {
        Some(path.to_path_buf())
    } else if path.is_dir() && !path.join(WIRE_MANIFEST).is_file() {
        Some(path.join("tt-model.yaml")).filter(|p| p.is_file())
    } else {
        None
    };
    match authoring {
        Some(yaml) => Package::from_authoring(&yaml),
        None => resolve(local, target),
    }
}

/// Resolve a serve target to its package manifest.
pub fn resolve(local: &Local, target: &str) -> Result<Package, LocalError> {
    let path = Path::new(target);
    if is_authoring_yaml(path) {
        return Err(authoring_hint(target));
    }
    if path.is_dir() {
        let m = path.join(WIRE_MANIFEST);
        if m.is_file() {
            return Package::load(&m);
        }
        if path.join("tt-model.yaml").is_file() {
            return Err(authoring_hint(
                &path.join("tt-model.yaml").display().to_string(),
            ));
        }
        return Err(LocalError::refused(
            "target",
            format!("{target} holds no {WIRE_MANIFEST}; point serve at a staged package"),
        ));
    }
    if path.is_file() {
        return Package::load(path);
    }
    if let Some((id, _rev)) = split_repo(target) {
        let m = local.pulled_manifest(&id);
        if m.is_file() {
            return Package::load(&m);
        }
        return Err(LocalError::refused(
            "target",
            format!(
                "{target} is not a pulled container package (nor a container manifest path). Pull it first:  tt-model pull {id}"
            ),
        ));
    }
    Err(LocalError::refused(
        "target",
        format!("{target}: no such file, and not an org/name package id"),
    ))
}

/// For stop/logs/rm: the package name and (when known) its manifest. A bare name is accepted
/// when containers carry it, so a package whose manifest is gone can still be stopped.
pub fn resolve_name(local: &Local, target: &str) -> Result<(String, Option<Package>), LocalError> {
    match resolve(local, target) {
        Ok(p) => Ok((p.name.clone(), Some(p))),
        Err(e) => {
            let bare = !target.contains('/')
                && !target.is_empty()
                && target
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if bare && !Path::new(target).exists() {
                Ok((target.to_string(), None))
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_and_authoring_yaml() {
        assert_eq!(
            split_repo("acme/m@v1"),
            Some(("acme/m".into(), Some("v1".into())))
        );
        assert_eq!(split_repo("acme/m"), Some(("acme/m".into(), None)));
        assert_eq!(split_repo("a/b/c"), None);
        let local = Local::new(
            "/nonexistent".into(),
            tt_model_hub::env::HubEnv::from_lookup(|_| None),
        );
        let err = resolve(&local, "models/tt-model.yaml").unwrap_err();
        assert!(
            matches!(
                err,
                LocalError::Refused {
                    field: "target",
                    ..
                }
            ),
            "a refusal names the input it refuses: {err:?}"
        );
        let e = err.to_string();
        assert!(e.contains("is the AUTHORING manifest"), "{e}");
        assert!(
            e.contains("tt-model package --container models/tt-model.yaml"),
            "{e}"
        );
    }
}
