//! Weights before boot: download the pinned revision into the host HF cache (resumable,
//! every file verified: LFS sha256, git blob id), or, with `--no-weights`/`--local-only`, say what the cache holds.

use tt_model_hub::download::{DownloadPlan, LocalStatus, local_status};
use tt_model_hub::{Downloader, HubCache, HubError};

use crate::event::Event;
use crate::package::{Package, WeightsRef};
use crate::progress::{Progress, human_bytes};
use crate::{Local, LocalError};

/// How serve should mount the cache afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsOutcome {
    /// Complete on the host: mount read-only, run offline.
    OnHost,
    /// Not (fully) on the host: the container downloads, so the cache is mounted writable.
    InContainer,
}

impl WeightsOutcome {
    /// Whether the run spec mounts the hub cache read-only and sets `HF_HUB_OFFLINE=1`; serve
    /// composes the container from this very flag.
    pub fn weights_on_host(self) -> bool {
        self == WeightsOutcome::OnHost
    }

    /// What will happen inside the container about the weights, in the words the run spec
    /// bears out (the test composes one and checks).
    pub fn container_note(self) -> &'static str {
        match self {
            WeightsOutcome::OnHost => {
                "the container gets the HF cache read-only and runs offline (HF_HUB_OFFLINE=1)"
            }
            WeightsOutcome::InContainer => {
                "the container gets the HF cache writable and online, so the model downloads the missing files itself at first load (slower, and no progress is shown here)"
            }
        }
    }
}

impl WeightsOutcome {
    /// Several repositories share the one hub-cache mount: it is read-only and offline only
    /// when every one of them is complete on the host.
    pub fn combine(self, other: WeightsOutcome) -> WeightsOutcome {
        if self.weights_on_host() && other.weights_on_host() {
            WeightsOutcome::OnHost
        } else {
            WeightsOutcome::InContainer
        }
    }
}

/// Makes sure every weights repository of the package (the primary, then each of
/// `auxiliary_weights`) is in the host cache, or reports why not; one outcome for the mount.
pub async fn ensure_all(
    local: &Local,
    pkg: &Package,
    no_weights: bool,
    local_only: bool,
    printer: &dyn Progress,
) -> Result<WeightsOutcome, LocalError> {
    let mut outcome = WeightsOutcome::OnHost;
    for w in pkg.all_weights() {
        outcome = outcome.combine(ensure(local, w, no_weights, local_only, printer).await?);
    }
    Ok(outcome)
}

/// Make sure the weights are in the host cache (or report why not).
pub async fn ensure(
    local: &Local,
    w: &WeightsRef,
    no_weights: bool,
    local_only: bool,
    printer: &dyn Progress,
) -> Result<WeightsOutcome, LocalError> {
    let env = local.hub().clone();
    let cache = HubCache::new(env.hub_cache.clone());
    let short = &w.revision[..w.revision.len().min(8)];
    if no_weights || local_only {
        return match local_status(&cache, &w.repo_id, &w.revision)? {
            LocalStatus::Complete { .. } => {
                printer.emit(Event::step_done(
                    "weights",
                    format!("weights {}@{short}", w.repo_id),
                    Some("in the local HF cache".into()),
                ));
                Ok(WeightsOutcome::OnHost)
            }
            other => {
                let partial = match other {
                    LocalStatus::Partial { bytes } => {
                        format!(" ({} already on disk, resumable)", human_bytes(bytes))
                    }
                    _ => String::new(),
                };
                printer.emit(Event::Warning(format!(
                    "weights {}@{short} are not in your local HF cache{partial}; {}",
                    w.repo_id,
                    WeightsOutcome::InContainer.container_note()
                )));
                printer.emit(Event::Next(format!(
                    "prefetch them: serve without --no-weights, or hf download {} --revision {}",
                    w.repo_id, w.revision
                )));
                Ok(WeightsOutcome::InContainer)
            }
        };
    }
    match fetch(local, w, printer).await {
        Ok(_plan) => Ok(WeightsOutcome::OnHost),
        Err(e) if e.is_no_space() => Err(LocalError::refused(
            "weights",
            format!(
                "ran out of disk space downloading the weights {}: {e}",
                w.repo_id
            ),
        )),
        Err(
            e @ (HubError::ShaMismatch { .. }
            | HubError::SizeMismatch { .. }
            | HubError::CommitMismatch { .. }
            | HubError::BadFileName(_)
            | HubError::BadRevision(_)
            | HubError::BadRepoId(_)),
        ) => Err(LocalError::refused(
            "weights",
            format!("weights {}: {e}", w.repo_id),
        )),
        Err(e) => {
            printer.emit(Event::Warning(format!(
                "could not prefetch the weights {}@{short}: {e}",
                w.repo_id
            )));
            printer.emit(Event::Note(
                WeightsOutcome::InContainer.container_note().to_string(),
            ));
            Ok(WeightsOutcome::InContainer)
        }
    }
}

/// Download `w` at its pinned revision into the cache: the plan from the Hub's listing of that
/// revision (a commit pin must be the commit the Hub lists), its allow/ignore patterns, a
/// disk-space check, then every missing file fetched and verified. Reports the step; returns
/// the plan carried out. The one downloader of serve's prefetch and `tt-model weights`.
pub(crate) async fn fetch(
    local: &Local,
    w: &WeightsRef,
    printer: &dyn Progress,
) -> Result<DownloadPlan, HubError> {
    let d = Downloader::new(local.hub().clone());
    let started = std::time::Instant::now();
    let short = &w.revision[..w.revision.len().min(8)];
    printer.emit(Event::step_start(
        "weights",
        format!("weights {}@{short}", w.repo_id),
    ));
    let plan = d.plan(&w.repo_id, &w.revision, &w.allow, &w.ignore).await?;
    d.check_space(&plan)?;
    let bar = printer.transfer("weights", &format!("weights {}", w.repo_id));
    let r = d.download(&plan, bar.as_ref()).await;
    bar.finish();
    r?;
    let fetched = plan.bytes_to_fetch();
    let detail = if fetched == 0 {
        format!("{} files already in the HF cache", plan.files.len())
    } else {
        format!(
            "{} · {} files · {:.1}s",
            human_bytes(fetched),
            plan.files.len(),
            started.elapsed().as_secs_f64()
        )
    };
    printer.emit(Event::step_done(
        "weights",
        format!("weights {}@{}", w.repo_id, &plan.commit[..8]),
        Some(detail),
    ));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tt_model_engine::run_spec::{Chips, HostFacts, ServeRequest, compose};

    use super::*;

    /// The hub cache bind and `HF_HUB_OFFLINE` of the container serve would start.
    fn mount_of(outcome: WeightsOutcome) -> (bool, bool) {
        let req = ServeRequest {
            package: "p".into(),
            profile: "default".into(),
            image: "i".into(),
            target: "t".into(),
            kind: "http-server".into(),
            port: 20000,
            expose: false,
            health_path: "/health".into(),
            chips: Chips::None,
            weights_on_host: outcome.weights_on_host(),
            env: BTreeMap::new(),
            labels: BTreeMap::new(),
            cmd: vec![],
            network: None,
        };
        let host = HostFacts {
            uid: 1000,
            gid: 1000,
            rootless: false,
            hub_cache: "/hub".into(),
            state_dir: "/state".into(),
            hf_token_set: false,
            hugepages_1g: false,
        };
        let spec = compose(&req, &host);
        let bind = spec
            .binds
            .iter()
            .find(|b| b.src == std::path::Path::new("/hub"))
            .expect("the hub cache is mounted");
        let offline = spec
            .env
            .iter()
            .any(|e| e.key == "HF_HUB_OFFLINE" && e.value.as_deref() == Some("1"));
        (bind.read_only, offline)
    }

    /// One hub-cache mount for every repository: read-only only when all are on the host.
    #[test]
    fn one_missing_repository_makes_the_shared_mount_writable() {
        use WeightsOutcome::*;
        assert_eq!(OnHost.combine(OnHost), OnHost);
        assert_eq!(OnHost.combine(InContainer), InContainer);
        assert_eq!(InContainer.combine(OnHost), InContainer);
        assert_eq!(mount_of(OnHost.combine(InContainer)), (false, false));
    }

    /// The notice says what the composed container really gets.
    #[test]
    fn the_weights_notice_matches_the_container_serve_starts() {
        for outcome in [WeightsOutcome::OnHost, WeightsOutcome::InContainer] {
            let note = outcome.container_note();
            let (read_only, offline) = mount_of(outcome);
            assert_eq!(note.contains("read-only"), read_only, "{outcome:?}: {note}");
            assert_eq!(note.contains("writable"), !read_only, "{outcome:?}: {note}");
            assert_eq!(note.contains("offline"), offline, "{outcome:?}: {note}");
            assert_eq!(
                note.contains("downloads"),
                !offline && !read_only,
                "{outcome:?}: {note}"
            );
        }
    }
}
