//! `tt-model ps`: the running tt-model containers with port, chips and uptime (`--json` too).

use std::time::{SystemTime, UNIX_EPOCH};

use tt_model_engine::containers::ContainerInfo;
use tt_model_oci::labels;

use crate::ExitStatus;
use crate::args::PsArgs;
use crate::printer::Printer;
use tt_model_local::containers;

/// Runs `tt-model ps`.
pub fn run(args: &PsArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    crate::block_on(async {
        let list = containers::listing(args.all).await?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        if args.json {
            let rows: Vec<serde_json::Value> = list.iter().map(|c| json_row(c, now)).collect();
            printer.out(&serde_json::to_string_pretty(&rows)?);
            return Ok(ExitStatus::Success);
        }
        if list.is_empty() {
            printer.skipped("no tt-model container is running", None);
            return Ok(ExitStatus::Success);
        }
        let rows: Vec<[String; 6]> = list
            .iter()
            .map(|c| {
                [
                    c.name.clone(),
                    c.label(labels::PROFILE).unwrap_or("-").to_string(),
                    if c.running {
                        "running".into()
                    } else {
                        format!("{} ({})", c.status, c.exit_code.unwrap_or(-1))
                    },
                    endpoint(c).unwrap_or_else(|| "-".into()),
                    c.label(labels::DEVICES)
                        .filter(|d| !d.is_empty())
                        .unwrap_or("none")
                        .to_string(),
                    uptime(c, now)
                        .map(human_duration)
                        .unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        let header = ["NAME", "PROFILE", "STATE", "ENDPOINT", "CHIPS", "UPTIME"].map(String::from);
        let mut widths = header.clone().map(|h| h.chars().count());
        for r in &rows {
            for (w, cell) in widths.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for r in std::iter::once(&header).chain(rows.iter()) {
            let line: Vec<String> = r
                .iter()
                .zip(widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            printer.out(line.join("  ").trim_end());
        }
        Ok(ExitStatus::Success)
    })
}

fn endpoint(c: &ContainerInfo) -> Option<String> {
    let port = c.label(labels::PORT)?;
    let ip = c.label(labels::HOST_IP).unwrap_or("127.0.0.1");
    Some(format!("http://{ip}:{port}"))
}

fn uptime(c: &ContainerInfo, now: i64) -> Option<u64> {
    if !c.running {
        return None;
    }
    let start = parse_rfc3339(c.started_at.as_deref()?)?;
    Some((now - start).max(0) as u64)
}

fn json_row(c: &ContainerInfo, now: i64) -> serde_json::Value {
    serde_json::json!({
        "name": c.name,
        "package": c.label(labels::PACKAGE),
        "profile": c.label(labels::PROFILE),
        "target": c.label(labels::TARGET),
        "kind": c.label(labels::KIND),
        "running": c.running,
        "status": c.status,
        "exit_code": c.exit_code,
        "port": c.label(labels::PORT).and_then(|p| p.parse::<u16>().ok()),
        "endpoint": endpoint(c),
        "chips": c.label(labels::DEVICES).and_then(labels::parse_devices).unwrap_or_default(),
        "image": c.image,
        "started_at": c.started_at,
        "uptime_s": uptime(c, now),
    })
}

/// `3h 04m`, `12m 05s`, `42s`.
pub fn human_duration(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Seconds since the epoch of an RFC 3339 UTC time as the engine writes it
/// (`2026-11-30T06:05:01.123456789Z`): the workspace's one parser.
pub use tt_model_manifest::timefmt::parse_rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(human_duration(42), "42s");
        assert_eq!(human_duration(725), "12m 05s");
        assert_eq!(human_duration(11040), "3h 04m");
    }
}
