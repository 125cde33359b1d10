//! Tenstorrent chips on the host: inventory, which ones containers already hold, a free pick,
//! and the allocation lock that makes scan + create atomic between concurrent serves.
//!
//! The claim rules are the Python original's fail-safe ones: a container claims chips only if
//! it shares the host IPC namespace (the UMD lock lives there); a privileged container or one
//! given `/dev/tenstorrent` or an ancestor of it (`/dev`, `/`) claims every chip; otherwise its
//! `/dev/tenstorrent/N` devices and mounts, plus our own devices label (which can only add).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tt_model_engine::run_spec::{DEV_TENSTORRENT, HUGEPAGES_1G};
use tt_model_oci::labels;

/// The engine's view of one running container, as the claim rules read it.
pub use tt_model_engine::containers::ContainerClaim;

/// Why chips could not be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChipError {
    /// The device directory could not be listed, so the host's chips are unknown.
    #[error("cannot read {root}: {detail}")]
    ScanUnavailable {
        /// The directory scanned (normally `/dev/tenstorrent`).
        root: PathBuf,
        /// The I/O error, as text.
        detail: String,
    },
    /// The running containers could not be inspected (the reason is given), so which chips are free
    /// is unknown.
    #[error("could not determine which tt devices are already in use ({0}) — refusing to guess")]
    CannotAsk(String),
    /// `--device-id` is not a comma-separated list of integers (the text as given).
    #[error("--device-id must be a comma-separated list of integers, got '{0}'")]
    BadList(String),
    /// `--device-id` repeats a chip or names a negative one (the text as given).
    #[error("--device-id must be distinct, non-negative chip indices, got '{0}'")]
    NotDistinct(String),
    /// `--device-id` names another number of chips than the profile needs.
    #[error("--device-id gave {given} chip(s) but profile '{profile}' needs {needed}")]
    WrongCount {
        /// Number of chips `--device-id` names.
        given: usize,
        /// Number of chips the profile needs.
        needed: usize,
        /// The profile's name.
        profile: String,
    },
    /// `--device-id` names chips that are not under `/dev/tenstorrent`.
    #[error("--device-id names chip(s) {missing}, which this host does not have (it has {have})")]
    NoSuchChip {
        /// The named chips the host lacks, comma-separated.
        missing: String,
        /// The chips the host has, comma-separated.
        have: String,
    },
    /// `--device-id` names chips another container holds (comma-separated ids).
    #[error("chip(s) {0} already in use by another container")]
    InUse(String),
    /// Too few chips are free for the profile.
    #[error(
        "only {free} of {total} tt device(s) are free (chip(s) {busy} in use); this profile needs {needed}"
    )]
    NotEnough {
        /// Chips no container holds.
        free: usize,
        /// Chips the host has.
        total: usize,
        /// The held chips, comma-separated.
        busy: String,
        /// Chips the profile needs.
        needed: usize,
    },
}

fn join(ids: impl IntoIterator<Item = u32>) -> String {
    ids.into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The numbered nodes under `root` (normally `/dev/tenstorrent`), sorted.
pub fn inventory(root: &Path) -> Result<Vec<u32>, ChipError> {
    let rd = std::fs::read_dir(root).map_err(|e| ChipError::ScanUnavailable {
        root: root.into(),
        detail: e.to_string(),
    })?;
    let mut ids: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Whether `/proc/mounts` has a hugetlbfs mounted exactly at `/dev/hugepages-1G`.
/// Subdirectories, other page sizes and tmpfs do not count.
pub fn hugepages_1g_mounted(proc_mounts: &str) -> bool {
    proc_mounts.lines().any(|l| {
        let mut f = l.split_whitespace();
        let (_src, mnt, fstype) = (f.next(), f.next(), f.next());
        mnt == Some(HUGEPAGES_1G) && fstype == Some("hugetlbfs")
    })
}

/// Is `path` equal to `/dev/tenstorrent` or an ancestor of it, compared by segments
/// (so `/dev/tenstorrent-foo` is not)?
fn covers_whole_dir(path: &str) -> bool {
    let p: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let d: Vec<&str> = DEV_TENSTORRENT
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    p.len() <= d.len() && p.iter().zip(&d).all(|(a, b)| a == b)
}

/// `/dev/tenstorrent/N` → N.
fn chip_of(path: &str) -> Option<u32> {
    let rest = path.strip_prefix(DEV_TENSTORRENT)?.strip_prefix('/')?;
    rest.trim_end_matches('/').parse().ok()
}

/// Does the container live in the host IPC namespace, following `container:` chains?
/// An unresolvable target or a cycle counts as shared (fail safe).
fn in_host_ipc(c: &ContainerClaim, all: &[ContainerClaim]) -> bool {
    let by_key: HashMap<&str, &ContainerClaim> = all
        .iter()
        .flat_map(|x| [(x.id.as_str(), x), (x.name.trim_start_matches('/'), x)])
        .collect();
    let mut cur = c;
    let mut seen = BTreeSet::new();
    loop {
        if cur.ipc_mode == "host" {
            return true;
        }
        let Some(target) = cur.ipc_mode.strip_prefix("container:") else {
            return false;
        };
        if !seen.insert(cur.id.clone()) {
            return true;
        }
        let found = by_key.get(target).copied().or_else(|| {
            // Engines may record a full id while the user wrote a prefix.
            all.iter()
                .find(|x| !target.is_empty() && x.id.starts_with(target))
        });
        match found {
            Some(next) => cur = next,
            None => return true,
        }
    }
}

/// Chips claimed by running containers. Pure.
pub fn claimed_chips(containers: &[ContainerClaim], inventory: &[u32]) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for c in containers {
        if !in_host_ipc(c, containers) {
            continue;
        }
        let sources = c.device_paths.iter().chain(&c.mount_sources);
        if c.privileged || sources.clone().any(|p| covers_whole_dir(p)) {
            out.extend(inventory.iter().copied());
            continue;
        }
        out.extend(sources.filter_map(|p| chip_of(p)));
        if let Some(l) = &c.devices_label {
            match labels::parse_devices(l) {
                Some(ids) => out.extend(ids),
                None => out.extend(inventory.iter().copied()),
            }
        }
    }
    out
}

/// Parse `--device-id 0,1`.
pub fn parse_device_ids(s: &str) -> Result<Vec<u32>, ChipError> {
    let parts: Result<Vec<i64>, _> = s.split(',').map(|p| p.trim().parse::<i64>()).collect();
    let parts = parts.map_err(|_| ChipError::BadList(s.to_string()))?;
    let distinct: BTreeSet<i64> = parts.iter().copied().collect();
    if parts.iter().any(|&p| p < 0 || p > u32::MAX as i64) || distinct.len() != parts.len() {
        return Err(ChipError::NotDistinct(s.to_string()));
    }
    Ok(parts.into_iter().map(|p| p as u32).collect())
}

/// Choose chips: the requested ones (checked) or the lowest free ones. Pure.
pub fn choose(
    requested: Option<&[u32]>,
    needed: usize,
    profile: &str,
    inventory: &[u32],
    claimed: &BTreeSet<u32>,
) -> Result<Vec<u32>, ChipError> {
    if let Some(ids) = requested {
        if ids.len() != needed {
            return Err(ChipError::WrongCount {
                given: ids.len(),
                needed,
                profile: profile.into(),
            });
        }
        let missing: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|i| !inventory.contains(i))
            .collect();
        if !missing.is_empty() {
            return Err(ChipError::NoSuchChip {
                missing: join(missing),
                have: join(inventory.iter().copied()),
            });
        }
        let busy: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|i| claimed.contains(i))
            .collect();
        if !busy.is_empty() {
            return Err(ChipError::InUse(join(busy)));
        }
        return Ok(ids.to_vec());
    }
    let free: Vec<u32> = inventory
        .iter()
        .copied()
        .filter(|i| !claimed.contains(i))
        .collect();
    if free.len() < needed {
        return Err(ChipError::NotEnough {
            free: free.len(),
            total: inventory.len(),
            busy: join(inventory.iter().copied().filter(|i| claimed.contains(i))),
            needed,
        });
    }
    Ok(free[..needed].to_vec())
}

/// Environment variable naming the allocation lock file (tests use a private one).
pub const ALLOC_LOCK_ENV: &str = "TT_MODEL_ALLOC_LOCK";
/// The default lock file, shared by every user of the host.
pub const DEFAULT_ALLOC_LOCK: &str = "/tmp/tt-model-alloc.lock";

/// Why the allocation lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock file could not be opened or created.
    #[error(
        "cannot open the chip allocation lock {path} (chip allocation would be unsynchronized)"
    )]
    Open {
        /// The lock file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Another holder kept the lock past the timeout.
    #[error(
        "the chip allocation lock {path} has been held for {waited:?}; another serve seems wedged (its holder is listed by `fuser {path}`)"
    )]
    Wedged {
        /// The lock file.
        path: PathBuf,
        /// How long this process waited for it.
        waited: Duration,
    },
}

/// An exclusive `flock` held around chip scan + container create; released on drop.
#[derive(Debug)]
pub struct AllocLock {
    file: std::fs::File,
    /// The lock file held.
    pub path: PathBuf,
}

impl AllocLock {
    /// The lock path from [`ALLOC_LOCK_ENV`] or the default.
    pub fn default_path() -> PathBuf {
        std::env::var_os(ALLOC_LOCK_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| DEFAULT_ALLOC_LOCK.into())
    }

    /// Wait up to `timeout` for the lock.
    pub fn acquire(path: &Path, timeout: Duration) -> Result<AllocLock, LockError> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o666)
            .open(path)
            .map_err(|source| LockError::Open {
                path: path.into(),
                source,
            })?;
        // Other users must be able to open it too, whatever our umask was.
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
        let start = Instant::now();
        loop {
            // An exclusive advisory lock (flock on Unix), without blocking so a wedged holder
            // is reported after `timeout`.
            match file.try_lock() {
                Ok(()) => {
                    return Ok(AllocLock {
                        file,
                        path: path.into(),
                    });
                }
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(source)) => {
                    return Err(LockError::Open {
                        path: path.into(),
                        source,
                    });
                }
            }
            if start.elapsed() >= timeout {
                return Err(LockError::Wedged {
                    path: path.into(),
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for AllocLock {
    fn drop(&mut self) {
        // Closing the file would release it too; unlock first so the release does not wait
        // for the last duplicate of the descriptor.
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, ipc: &str) -> ContainerClaim {
        ContainerClaim {
            id: id.into(),
            name: format!("/{id}-name"),
            ipc_mode: ipc.into(),
            ..Default::default()
        }
    }

    const INV: &[u32] = &[0, 1, 2, 3];

    #[test]
    fn hugepages_needs_the_exact_mount() {
        assert!(hugepages_1g_mounted(
            "none /dev/hugepages-1G hugetlbfs rw,pagesize=1024M 0 0\n"
        ));
        assert!(!hugepages_1g_mounted(
            "none /dev/hugepages hugetlbfs rw 0 0\n"
        ));
        assert!(!hugepages_1g_mounted(
            "none /dev/hugepages-1G/x hugetlbfs rw 0 0\n"
        ));
        assert!(!hugepages_1g_mounted(
            "tmpfs /dev/hugepages-1G tmpfs rw 0 0\n"
        ));
    }

    #[test]
    fn only_host_ipc_containers_claim() {
        let mut a = c("a", "private");
        a.device_paths = vec!["/dev/tenstorrent/1".into()];
        assert!(claimed_chips(&[a.clone()], INV).is_empty());
        a.ipc_mode = "host".into();
        assert_eq!(claimed_chips(&[a], INV), [1].into());
    }

    #[test]
    fn ancestors_and_privileged_claim_everything_but_lookalikes_do_not() {
        for src in ["/dev/tenstorrent", "/dev", "/", "/dev/tenstorrent/"] {
            let mut a = c("a", "host");
            a.mount_sources = vec![src.into()];
            assert_eq!(claimed_chips(&[a], INV).len(), 4, "{src}");
        }
        let mut a = c("a", "host");
        a.mount_sources = vec!["/dev/tenstorrent-foo".into()];
        assert!(claimed_chips(&[a], INV).is_empty());
        let mut p = c("p", "host");
        p.privileged = true;
        assert_eq!(claimed_chips(&[p], INV).len(), 4);
    }

    #[test]
    fn ipc_chains_resolve_and_unresolvable_counts_as_shared() {
        let mut leaf = c("leaf", "container:mid");
        leaf.device_paths = vec!["/dev/tenstorrent/2".into()];
        let mid = c("mid", "container:root");
        let root = c("root", "private");
        assert!(claimed_chips(&[leaf.clone(), mid.clone(), root.clone()], INV).is_empty());
        let root_host = c("root", "host");
        assert_eq!(
            claimed_chips(&[leaf.clone(), mid.clone(), root_host], INV),
            [2].into()
        );
        // The chain's end is missing → shared.
        assert_eq!(claimed_chips(&[leaf.clone(), mid.clone()], INV), [2].into());
        // A cycle → shared.
        let cyc = c("mid", "container:leaf");
        assert_eq!(claimed_chips(&[leaf, cyc], INV), [2].into());
    }

    #[test]
    fn label_adds_and_malformed_label_claims_all() {
        let mut a = c("a", "host");
        a.device_paths = vec!["/dev/tenstorrent/0".into()];
        a.devices_label = Some("3".into());
        assert_eq!(claimed_chips(&[a.clone()], INV), [0, 3].into());
        a.devices_label = Some("zz".into());
        assert_eq!(claimed_chips(&[a], INV).len(), 4);
    }

    #[test]
    fn choose_checks_requested_and_picks_lowest_free() {
        let busy: BTreeSet<u32> = [1].into();
        assert_eq!(choose(None, 2, "p", INV, &busy).unwrap(), vec![0, 2]);
        let e = choose(None, 4, "p", INV, &busy).unwrap_err();
        assert_eq!(
            e.to_string(),
            "only 3 of 4 tt device(s) are free (chip(s) 1 in use); this profile needs 4"
        );
        assert_eq!(choose(Some(&[3]), 1, "p", INV, &busy).unwrap(), vec![3]);
        assert!(matches!(
            choose(Some(&[1]), 1, "p", INV, &busy),
            Err(ChipError::InUse(_))
        ));
        let e = choose(Some(&[99]), 1, "p", INV, &busy).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--device-id names chip(s) 99, which this host does not have (it has 0, 1, 2, 3)"
        );
        assert!(matches!(
            choose(Some(&[0, 2]), 1, "p", INV, &busy),
            Err(ChipError::WrongCount { .. })
        ));
    }

    #[test]
    fn device_id_parsing() {
        assert_eq!(parse_device_ids("0, 2").unwrap(), vec![0, 2]);
        assert!(matches!(parse_device_ids("a"), Err(ChipError::BadList(_))));
        assert!(matches!(
            parse_device_ids("1,1"),
            Err(ChipError::NotDistinct(_))
        ));
        assert!(matches!(
            parse_device_ids("-1"),
            Err(ChipError::NotDistinct(_))
        ));
    }

    #[test]
    fn inventory_reads_numbered_nodes() {
        let d = tempfile_dir();
        for n in ["0", "3", "by-id", "1"] {
            std::fs::create_dir_all(d.join(n)).unwrap();
        }
        assert_eq!(inventory(&d).unwrap(), vec![0, 1, 3]);
        assert!(matches!(
            inventory(&d.join("nope")),
            Err(ChipError::ScanUnavailable { .. })
        ));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn alloc_lock_excludes_a_second_holder_until_dropped() {
        let d = tempfile_dir();
        let p = d.join("alloc.lock");
        let first = AllocLock::acquire(&p, Duration::from_secs(1)).unwrap();
        let err = AllocLock::acquire(&p, Duration::from_millis(120)).unwrap_err();
        assert!(matches!(err, LockError::Wedged { .. }), "{err:?}");
        drop(first);
        AllocLock::acquire(&p, Duration::from_millis(120)).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "tt-dev-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
