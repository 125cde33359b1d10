//! The `stop` use case: SIGTERM with a grace period; a SIGKILL (exit 137) leaves the mesh
//! dirty, so the chips are reset with `tt-smi -r` from the same image unless another
//! container has reclaimed them meanwhile. Every container's outcome is reported.

use std::time::Duration;

use tt_model_engine::Client;
use tt_model_engine::containers::ContainerInfo;
use tt_model_oci::labels;

use crate::event::Event;
use crate::progress::Progress;
use crate::{Local, LocalError, containers, devices, host, target};

/// Bound on the reset container.
const RESET_TIMEOUT: Duration = Duration::from_secs(180);

/// What to stop.
#[derive(Debug, Clone, Copy)]
pub struct StopRequest<'a> {
    /// The package: a staged manifest, a pulled repo id or an installed package's id.
    pub target: &'a str,
    /// Only this profile's containers.
    pub profile: Option<&'a str>,
    /// How long a container gets between SIGTERM and SIGKILL.
    pub grace: Duration,
}

/// What happened to the chips after a stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reset {
    /// A clean shutdown: nothing to reset.
    NotNeeded,
    /// Killed; the reset ran.
    Ran,
    /// Killed; the reset did not complete (why).
    Failed(String),
    /// Killed; another container holds the chips now, and resetting would break it.
    Skipped,
}

/// What `stop` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stopped {
    /// The containers stopped, with what happened to their chips.
    pub containers: Vec<(String, Reset)>,
}

impl Stopped {
    /// Whether a killed container's reset did not complete (the command then fails).
    pub fn reset_failed(&self) -> bool {
        self.containers
            .iter()
            .any(|(_, r)| matches!(r, Reset::Failed(_)))
    }
}

/// Stops the package's containers (one profile's when asked), each reported as it goes.
pub async fn stop(
    local: &Local,
    req: &StopRequest<'_>,
    progress: &dyn Progress,
) -> Result<Stopped, LocalError> {
    let (package, _) = target::resolve_name(local, req.target)?;
    let client = host::engine().await?;
    let targets = containers::of_package(&client, &package, req.profile, false).await?;
    let mut stopped = Stopped::default();
    if targets.is_empty() {
        progress.emit(Event::skipped("nothing running", Some(package)));
        return Ok(stopped);
    }
    for c in &targets {
        let outcome = client.stop_with_grace(&c.name, req.grace).await?;
        client.remove_container_force(&c.name).await?;
        let reset = if outcome.dirty() {
            reset_after_kill(&client, c).await
        } else {
            Reset::NotNeeded
        };
        let detail = match &reset {
            Reset::NotNeeded => "clean shutdown".to_string(),
            Reset::Ran => "killed — mesh reset ran".to_string(),
            Reset::Failed(why) => format!("killed — mesh reset did NOT complete: {why}"),
            Reset::Skipped => "killed — reset skipped (chips reclaimed)".to_string(),
        };
        progress.emit(Event::done(format!("stopped {}", c.name), Some(detail)));
        if reset != Reset::NotNeeded {
            progress.emit(Event::Warning("the server was killed after the grace period; `tt-smi -r` after a force-kill may not recover the device, and a HOST reboot can be needed (dmesg: `could only pin N of M pages`)".into()));
        }
        stopped.containers.push((c.name.clone(), reset));
    }
    progress.emit(Event::done(
        format!("stopped {} container(s)", targets.len()),
        None,
    ));
    Ok(stopped)
}

/// Scoped reset after a SIGKILL, unless another container claims any of the chips now.
async fn reset_after_kill(client: &Client, c: &ContainerInfo) -> Reset {
    let Some(label) = c.label(labels::DEVICES) else {
        // It had no device: nothing to reset.
        return Reset::NotNeeded;
    };
    // A malformed label resets the whole directory: over-broad, never under-broad.
    let chips = labels::parse_devices(label);
    let inventory = devices::inventory(std::path::Path::new(
        tt_model_engine::run_spec::DEV_TENSTORRENT,
    ))
    .unwrap_or_default();
    let claims = match client.scan_claims().await {
        Ok(c) => c,
        Err(e) => return Reset::Failed(format!("cannot scan containers: {e}")),
    };
    let claimed = devices::claimed_chips(&claims, &inventory);
    let ours = chips.clone().unwrap_or_else(|| inventory.clone());
    if ours.iter().any(|i| claimed.contains(i)) {
        return Reset::Skipped;
    }
    match client
        .reset_chips(&c.image, chips.as_deref(), RESET_TIMEOUT)
        .await
    {
        Ok((0, _)) => Reset::Ran,
        Ok((code, out)) => Reset::Failed(reset_failure(Some(code), &out, chips.as_deref())),
        Err(e) => Reset::Failed(reset_failure(None, &e.to_string(), chips.as_deref())),
    }
}

/// Why the reset did not complete, and what to do when the image has no `tt-smi` (an
/// http-server image without a Python environment: every Python-kind image carries it).
fn reset_failure(code: Option<i64>, output: &str, chips: Option<&[u32]>) -> String {
    let missing = code == Some(127)
        || output.contains("executable file not found")
        || output.contains("tt-smi: not found");
    if missing {
        let ids = match chips {
            Some(ids) if !ids.is_empty() => labels::format_devices(ids),
            _ => "all".to_string(),
        };
        return format!(
            "the image carries no tt-smi (an http-server image without a Python environment); reset from the host: tt-smi -r {ids}"
        );
    }
    let last = output.lines().last().unwrap_or("");
    match code {
        Some(code) => format!("tt-smi exited {code}: {last}"),
        None => output.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tt_smi_names_the_host_side_reset() {
        let engine = "failed to create task: exec: \"tt-smi\": executable file not found in $PATH";
        for (code, out) in [(None, engine), (Some(127), "sh: tt-smi: not found")] {
            let why = reset_failure(code, out, Some(&[0, 2]));
            assert!(why.contains("carries no tt-smi"), "{why}");
            assert!(why.ends_with("tt-smi -r 0,2"), "{why}");
        }
        assert_eq!(
            reset_failure(Some(1), "resetting\nboard 0 timed out", None),
            "tt-smi exited 1: board 0 timed out"
        );
    }
}
