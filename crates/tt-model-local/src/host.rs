//! Host preflight (engine, card, hugepages, rootless device permissions), host facts for the
//! run spec, and the free-port walk.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tt_model_engine::Client;
use tt_model_engine::run_spec::{DEV_TENSTORRENT, HostFacts};

use crate::LocalError;
use crate::devices;

/// The first port tried when `--port` is not given.
pub const FIRST_PORT: u16 = 20000;
/// How many ports the walk tries.
pub const PORT_TRIES: u16 = 100;

/// uid and gid of this process (`/proc/self` belongs to them; no libc call needed).
pub fn ids() -> (u32, u32) {
    std::fs::metadata("/proc/self")
        .map(|m| (m.uid(), m.gid()))
        .unwrap_or((0, 0))
}

/// What the card check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardFacts {
    /// The chip numbers under `/dev/tenstorrent`.
    pub chips: Vec<u32>,
    /// A 1 GiB hugetlbfs is mounted where the card's runtime expects it.
    pub hugepages_1g: bool,
}

/// Look for the card: numbered nodes under `/dev/tenstorrent` and the exact hugepages mount.
pub fn card_facts(dev_root: &Path, proc_mounts: &str) -> CardFacts {
    CardFacts {
        chips: devices::inventory(dev_root).unwrap_or_default(),
        hugepages_1g: devices::hugepages_1g_mounted(proc_mounts),
    }
}

/// Refuse a card serve on a host without what the card needs, naming what is missing.
pub fn require_card(c: &CardFacts) -> Result<(), LocalError> {
    let mut missing = Vec::new();
    if c.chips.is_empty() {
        missing.push(format!("{DEV_TENSTORRENT}/*: no Tenstorrent device node (is tt-kmd loaded? `lsmod | grep tenstorrent`)"));
    }
    if !c.hugepages_1g {
        missing.push("/dev/hugepages-1G: no hugetlbfs mounted there (tt-system-tools hugepages-setup; unit dev-hugepages\\x2d1G.mount)".into());
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(LocalError::refused(
        "card",
        format!(
            "this host cannot serve on a Tenstorrent card:\n  {}\n  → a CPU/emulation runtime can run without it: tt-model serve --device none <target>",
            missing.join("\n  ")
        ),
    ))
}

/// Under a rootless engine every chosen node must be rw for the user's uid or primary gid
/// (supplementary groups do not map into the user namespace).
pub fn rootless_device_problems(chips: &[u32], uid: u32, gid: u32) -> Vec<String> {
    chips
        .iter()
        .filter_map(|c| {
            let p = PathBuf::from(format!("{DEV_TENSTORRENT}/{c}"));
            let m = std::fs::metadata(&p).ok()?;
            let mode = m.permissions().mode();
            let ok = (m.uid() == uid && mode & 0o600 == 0o600)
                || (m.gid() == gid && mode & 0o060 == 0o060)
                || mode & 0o006 == 0o006;
            (!ok).then(|| {
                format!(
                    "{} is not rw for uid {uid}: setfacl -m u:$USER:rw {DEV_TENSTORRENT}/*",
                    p.display()
                )
            })
        })
        .collect()
}

/// Host facts for the run spec; `hf_token_set`: a token is in the environment to pass on.
pub fn host_facts(
    rootless: bool,
    hub_cache: PathBuf,
    state_dir: PathBuf,
    hugepages_1g: bool,
    hf_token_set: bool,
) -> HostFacts {
    let (uid, gid) = ids();
    HostFacts {
        uid,
        gid,
        rootless,
        hub_cache,
        state_dir,
        hf_token_set,
        hugepages_1g,
    }
}

/// Connect to the engine: the preflight's first check. An unreachable engine is an
/// [`LocalError::Engine`] the caller renders as a diagnosis card.
pub async fn engine() -> Result<Client, LocalError> {
    Ok(Client::connect().await?)
}

/// The first port from `first` that nothing listens on (bound on every interface, as the
/// published port might be).
pub fn pick_free_port(first: u16) -> Option<u16> {
    (first..first.saturating_add(PORT_TRIES))
        .find(|p| std::net::TcpListener::bind(("0.0.0.0", *p)).is_ok())
}

/// Parse `--timeout`: `1800`, `90s`, `45m`, `2h`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, LocalError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1),
        Some('m') => (&t[..t.len() - 1], 60),
        Some('h') => (&t[..t.len() - 1], 3600),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .map(|n| std::time::Duration::from_secs(n * mult))
        .ok_or_else(|| LocalError::refused("--timeout", format!("--timeout must be a positive number of seconds or a duration like 45m or 2h, got '{s}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("45m").unwrap().as_secs(), 2700);
        assert_eq!(parse_duration("2h").unwrap().as_secs(), 7200);
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn missing_card_is_named() {
        let e = require_card(&CardFacts {
            chips: vec![],
            hugepages_1g: false,
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/dev/tenstorrent/*")
                && e.contains("/dev/hugepages-1G")
                && e.contains("--device none"),
            "{e}"
        );
        assert!(
            require_card(&CardFacts {
                chips: vec![0],
                hugepages_1g: true
            })
            .is_ok()
        );
    }
}
