//! The `logs` use case: the log of a package's container, running or exited (a crashed boot
//! is exactly when the log matters).

use tt_model_engine::containers::ContainerInfo;
use tt_model_engine::logs::LogLines;

use crate::{Local, LocalError, containers, host, target};

/// Whose log, and how much of it.
#[derive(Debug, Clone, Copy)]
pub struct LogsRequest<'a> {
    /// The package: a staged manifest, a pulled repo id or an installed package's id.
    pub target: &'a str,
    /// Only this profile's containers.
    pub profile: Option<&'a str>,
    /// Keep streaming new lines while the container runs.
    pub follow: bool,
    /// Only the last this many lines (all when `None`).
    pub tail: Option<usize>,
}

/// A container's log, open.
pub struct ContainerLog {
    /// The container whose log it is.
    pub container: ContainerInfo,
    /// Its lines, as the engine gives them.
    pub lines: LogLines,
}

/// Opens the log of the package's container: a running one, else the most recent exited one.
pub async fn open(local: &Local, req: &LogsRequest<'_>) -> Result<ContainerLog, LocalError> {
    let (package, _) = target::resolve_name(local, req.target)?;
    let client = host::engine().await?;
    let all = containers::of_package(&client, &package, req.profile, true).await?;
    let Some(c) = pick(&all) else {
        return Err(LocalError::refused(
            "target",
            format!(
                "no container for {package}. Start it:  tt-model serve {}",
                req.target
            ),
        ));
    };
    let lines = LogLines::new(&client, &c.name, req.follow && c.running, req.tail);
    Ok(ContainerLog {
        container: c.clone(),
        lines,
    })
}

/// The container whose log to show: a running one (the list's order: default profile
/// first), else the most recent exited one by the engine's clock (finished time, or created
/// time for one that never ran), never by name.
fn pick(containers: &[ContainerInfo]) -> Option<&ContainerInfo> {
    if let Some(c) = containers.iter().find(|c| c.running) {
        return Some(c);
    }
    containers.iter().max_by(|a, b| {
        let key = |c: &ContainerInfo| {
            time_key(
                c.finished_at
                    .as_deref()
                    .or(c.created_at.as_deref())
                    .unwrap_or(""),
            )
        };
        key(a).cmp(&key(b))
    })
}

/// An RFC 3339 UTC time (`2026-01-02T03:04:05.123456789Z`, as the engine reports it) as a
/// sortable key: the whole seconds, then the fraction as nanoseconds (the engine trims
/// trailing zeros, so the raw strings do not sort). Unparsable times sort first.
fn time_key(t: &str) -> (String, u32) {
    let t = t.trim_end_matches('Z');
    let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits: String = frac
        .chars()
        .take_while(char::is_ascii_digit)
        .take(9)
        .collect();
    let nanos = format!("{digits:0<9}").parse().unwrap_or(0);
    (secs.to_string(), nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, running: bool, finished: Option<&str>, created: &str) -> ContainerInfo {
        ContainerInfo {
            id: name.into(),
            name: name.into(),
            image: "i".into(),
            status: if running { "running" } else { "exited" }.into(),
            running,
            exit_code: (!running).then_some(1),
            oom_killed: false,
            started_at: None,
            finished_at: finished.map(Into::into),
            created_at: Some(created.into()),
            labels: Default::default(),
        }
    }

    #[test]
    fn logs_picks_running_then_most_recent_exited_by_time_not_name() {
        let a = c(
            "tt-model-x-a",
            false,
            Some("2026-01-02T10:00:00.5Z"),
            "2026-01-01T00:00:00Z",
        );
        let b = c(
            "tt-model-x-b",
            false,
            Some("2026-01-02T10:00:00Z"),
            "2026-01-01T00:00:00Z",
        );
        // `a` finished later although its name sorts first; `b`'s raw string sorts higher.
        assert_eq!(pick(&[a.clone(), b.clone()]).unwrap().name, "tt-model-x-a");
        assert_eq!(pick(&[b.clone(), a.clone()]).unwrap().name, "tt-model-x-a");
        // Never started: its created time stands in.
        let fresh = c("tt-model-x-0", false, None, "2026-01-03T00:00:00Z");
        assert_eq!(
            pick(&[a.clone(), fresh.clone()]).unwrap().name,
            "tt-model-x-0"
        );
        // A running container wins over any exited one.
        let r = c("tt-model-x-z", true, None, "2025-01-01T00:00:00Z");
        assert_eq!(pick(&[a, fresh, r]).unwrap().name, "tt-model-x-z");
        assert!(pick(&[]).is_none());
    }

    #[test]
    fn time_keys_compare_fractions_as_numbers() {
        assert!(time_key("2026-01-02T10:00:00.5Z") > time_key("2026-01-02T10:00:00.123456789Z"));
        assert!(time_key("2026-01-02T10:00:00Z") < time_key("2026-01-02T10:00:00.000000001Z"));
        assert!(time_key("") < time_key("2026-01-02T10:00:00Z"));
    }
}
