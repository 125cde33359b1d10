//! `serve --refresh` (reference §5.4): re-pull a pulled, unpinned package when the Hub's tip
//! moved.

use std::time::Duration;

use super::plan::ServeOptions;
use crate::event::Event;
use crate::package::Package;
use crate::progress::Progress;
use crate::pull::{self, PullRequest};
use crate::{Local, LocalError, installed, target};

/// How long `--refresh` waits for the Hub to say which commit is newest.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(3);

/// `serve --refresh` (reference §5.4): a pulled, unpinned package is re-pulled (manifest and,
/// when its digest changed, the image; not the weights) when the Hub's tip moved. Anything
/// that goes wrong is a warning: the installed package is served unchanged.
pub async fn refresh(
    o: &ServeOptions,
    pkg: Package,
    local: &Local,
    progress: &dyn Progress,
) -> Package {
    if o.local_only {
        progress.emit(Event::skipped(
            "--refresh",
            Some("--local-only never asks the Hub".into()),
        ));
        return pkg;
    }
    let Some((id, installed_rev)) = installed::pulled_revision(local, &pkg) else {
        progress.emit(Event::skipped(
            "--refresh",
            Some(format!("{} is not a pulled package", o.target)),
        ));
        return pkg;
    };
    if let Some((_, Some(pin))) = target::split_repo(&o.target) {
        progress.emit(Event::skipped(
            "--refresh",
            Some(format!("{id} is pinned to {pin}")),
        ));
        return pkg;
    }
    let dl = tt_model_hub::Downloader::new(local.hub().clone());
    let short = |r: &str| r[..r.len().min(8)].to_string();
    let latest = match tokio::time::timeout(REFRESH_TIMEOUT, dl.resolve_revision(&id, "main")).await
    {
        Ok(Ok(sha)) => sha,
        Ok(Err(e)) => {
            progress.emit(Event::Warning(format!(
                "refresh failed ({e}); serving the installed package unchanged"
            )));
            return pkg;
        }
        Err(_) => {
            progress.emit(Event::Warning(format!(
                "refresh failed (the Hub did not answer within {}s); serving the installed package unchanged",
                REFRESH_TIMEOUT.as_secs()
            )));
            return pkg;
        }
    };
    if latest == installed_rev {
        progress.emit(Event::done(
            format!("{id} is up to date"),
            Some(format!("revision {}", short(&latest))),
        ));
        return pkg;
    }
    progress.emit(Event::Note(format!(
        "refreshing {id}: {} → {}",
        short(&installed_rev),
        short(&latest)
    )));
    let target = format!("{id}@{latest}");
    let req = PullRequest {
        target: &target,
        ..PullRequest::default()
    };
    match pull::pull(local, &req, progress, async |_| Ok::<(), LocalError>(())).await {
        Ok(new) => new,
        Err(e) => {
            progress.emit(Event::Warning(format!(
                "refresh failed ({}); serving the installed package unchanged",
                super::start::chain(&e).lines().next().unwrap_or_default()
            )));
            pkg
        }
    }
}

/// The original's update advisory: a pulled, unpinned package (`target` as the user named
/// it) whose Hub tip moved since it was installed gets one `!` line naming both revisions and
/// the command that updates it. One request bounded by [`REFRESH_TIMEOUT`]; offline, slow or
/// failing, it says nothing (a serve must not depend on the Hub).
pub async fn advise(target: &str, pkg: &Package, local: &Local, progress: &dyn Progress) {
    let Some((id, installed_rev)) = installed::pulled_revision(local, pkg) else {
        return;
    };
    if matches!(target::split_repo(target), Some((_, Some(_)))) {
        return;
    }
    let dl = tt_model_hub::Downloader::new(local.hub().clone());
    let latest = tokio::time::timeout(REFRESH_TIMEOUT, dl.resolve_revision(&id, "main")).await;
    if let Some(line) = advisory(&id, &installed_rev, latest.ok().and_then(Result::ok)) {
        progress.emit(Event::Warning(line));
    }
}

/// The advisory for `installed` against the Hub's `latest` (none when unknown or the same).
fn advisory(id: &str, installed: &str, latest: Option<String>) -> Option<String> {
    let latest = latest.filter(|l| l != installed)?;
    let short = |r: &str| r[..r.len().min(8)].to_string();
    Some(format!(
        "There is an update to {id} (installed {}, latest {}). You should consider pulling:  tt-model serve {id} --refresh",
        short(installed),
        short(&latest)
    ))
}

#[cfg(test)]
mod tests {
    use super::advisory;

    #[test]
    fn the_advisory_names_both_revisions_and_is_silent_otherwise() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        assert_eq!(
            advisory("acme/x", &a, Some(b)).as_deref(),
            Some(
                "There is an update to acme/x (installed aaaaaaaa, latest bbbbbbbb). You should consider pulling:  tt-model serve acme/x --refresh"
            )
        );
        assert_eq!(advisory("acme/x", &a, Some(a.clone())), None, "up to date");
        assert_eq!(advisory("acme/x", &a, None), None, "offline");
    }
}
