//! Whether each installed package can serve now (`list`): its manifest is there, its image is
//! loaded and the recorded build, and how many of its containers run.

use tt_model_engine::Client;
use tt_model_engine::images::{ImageState, judge};

use crate::localdb::{Entry, Source};
use crate::package::Package;
use crate::{Local, LocalError, host, installed};

/// Every installed package's readiness, and the engine's failure when it could not be asked
/// (then each package lists that among its problems).
pub struct Listing {
    /// One per installed package.
    pub packages: Vec<Readiness>,
    /// Why the engine could not be reached, if it could not.
    pub engine: Option<LocalError>,
}

/// Checks every installed package (`warn` hears about database entries that do not read).
pub async fn listing(local: &Local, warn: &mut dyn FnMut(String)) -> Listing {
    let entries = installed::all(local, warn);
    let (client, engine) = match host::engine().await {
        Ok(c) => (Some(c), None),
        Err(e) => (None, Some(e)),
    };
    let mut packages = Vec::new();
    for e in entries {
        packages.push(check(e, client.as_ref()).await);
    }
    Listing { packages, engine }
}

/// One installed package, with why it cannot serve.
#[derive(Debug, Clone)]
pub struct Readiness {
    /// Its database entry, updated from its manifest (the truth for what serve runs).
    pub entry: Entry,
    /// Its image's size in the engine, when the image is there and the recorded build.
    pub size: Option<i64>,
    /// How many of its containers are running.
    pub running: usize,
    /// Why it cannot serve now (empty: it can).
    pub problems: Vec<String>,
}

/// Checks one entry against its manifest and the engine (`None`: engine unreachable).
async fn check(mut entry: Entry, client: Option<&Client>) -> Readiness {
    let mut problems = Vec::new();
    let manifest_ok = entry.manifest.is_file();
    if manifest_ok {
        // The manifest is the truth for what serve will run; the entry may be older.
        if let Ok(pkg) = Package::load(&entry.manifest) {
            entry.image = pkg.image.clone();
            entry.kind = pkg.kind.clone();
            entry.profile = pkg.default_profile.clone();
            if let Some(d) = pkg.recorded_digest() {
                entry.image_digest = Some(d);
            }
        }
    } else {
        problems.push(format!(
            "manifest {} is missing (install dir removed); forget it: tt-model rm {}",
            entry.manifest.display(),
            entry.repo_id
        ));
    }
    let (mut size, mut running) = (None, 0);
    match client {
        None => problems.push(
            "the container engine is not reachable, so the image could not be checked".into(),
        ),
        Some(c) => {
            let digest = entry.image_digest.clone();
            let known = entry.known_loaded_id(digest.as_deref());
            match c.image(&entry.image).await.map(|f| judge(f, digest.as_deref(), known)) {
                Err(e) => problems.push(format!("cannot inspect image {}: {e}", entry.image)),
                Ok(ImageState::Matches(f)) => size = Some(f.size),
                Ok(ImageState::Missing) => problems.push(format!(
                    "image {} is not loaded; {}",
                    entry.image,
                    reload_hint(&entry)
                )),
                Ok(ImageState::Different { facts, expected }) => problems.push(format!(
                    "image {} is a different build than recorded (expected {expected}, loaded {}); {}",
                    entry.image,
                    facts.id,
                    reload_hint(&entry)
                )),
            }
            running = crate::containers::of_package(c, &entry.name, None, false)
                .await
                .map(|v| v.len())
                .unwrap_or(0);
        }
    }
    Readiness {
        entry,
        size,
        running,
        problems,
    }
}

/// How to get the recorded image back.
fn reload_hint(e: &Entry) -> String {
    let staged_layout = e
        .manifest
        .parent()
        .is_some_and(|d| d.join("image/oci-layout").is_file());
    if staged_layout {
        return format!(
            "serve loads it from the staged layout: tt-model serve {}",
            e.manifest.display()
        );
    }
    match e.source {
        Source::Pulled => format!("re-pull: tt-model pull {}", e.repo_id),
        Source::Staged => "re-build: tt-model package --container <tt-model.yaml>".into(),
    }
}
