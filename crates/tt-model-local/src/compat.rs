//! Is a package usable on this machine? The host's Tenstorrent arch and chip count, and the
//! original's two-rule verdict (`info` prints it after the manifest):
//!
//! * the package's `arch` differs from the host's: **fatal** (the image's kernels target one
//!   ISA);
//! * the package needs **more** chips (`device_count`) than the host has: a warning (its mesh
//!   cannot be formed). Needing fewer is normal: it runs on a subset.
//!
//! Where the facts come from, first found wins: `--arch` (judge against another arch than
//! this host's), the card itself (sysfs `tt_card_type` of each `/dev/tenstorrent/N`), then
//! `ARCH_NAME` (tt-metal's development environments set it). The original asks `tt-smi` for
//! the card type; the kernel driver exposes the same board name in sysfs without a 30 s
//! subprocess, so that is read instead.

use std::path::Path;

use serde::Serialize;
use tt_model_manifest::WireManifest;

use crate::devices;

/// Where the kernel driver lists each card (`tenstorrent!<N>`, the `!` is part of the name).
pub const SYS_CLASS_TENSTORRENT: &str = "/sys/class/tenstorrent";
/// The environment variable tt-metal's development environments set to the arch.
pub const ARCH_NAME_ENV: &str = "ARCH_NAME";

/// Board-name prefixes (`p150a`, `n300`, …) and the arch each belongs to.
const BOARD_PREFIXES: &[(&str, &str)] = &[
    ("p100", "blackhole"),
    ("p150", "blackhole"),
    ("p300", "blackhole"),
    ("n150", "wormhole_b0"),
    ("n300", "wormhole_b0"),
    ("e75", "grayskull"),
    ("e150", "grayskull"),
    ("e300", "grayskull"),
];

/// Where [`LocalEnv::arch`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvSource {
    /// `--arch`.
    Flag,
    /// The card's own board name (sysfs).
    Card,
    /// `ARCH_NAME`.
    Env,
    /// Nothing: no card, no flag, no variable.
    None,
}

/// What the verdict is judged against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalEnv {
    /// `blackhole`, `wormhole_b0`, … (`None`: unknown, not judged).
    pub arch: Option<String>,
    /// Chips under `/dev/tenstorrent` (0: unknown, not judged).
    pub device_count: u32,
    /// Where `arch` came from.
    pub source: EnvSource,
}

/// `bh`, `Wormhole`, `p150a`, … → tt-metal's arch name; anything else lower-cased as given.
pub fn normalize_arch(value: &str) -> Option<String> {
    let v = value.trim().to_ascii_lowercase();
    if v.is_empty() {
        return None;
    }
    let named = match v.as_str() {
        "blackhole" | "bh" => Some("blackhole"),
        "wormhole" | "wormhole_b0" | "wh" => Some("wormhole_b0"),
        "grayskull" | "gs" => Some("grayskull"),
        _ => BOARD_PREFIXES
            .iter()
            .find(|(p, _)| v.starts_with(p))
            .map(|(_, a)| *a),
    };
    Some(named.map_or(v, str::to_owned))
}

/// The board name of the first card that reports one (`tt_card_type` under `sys_class`).
fn card_type(sys_class: &Path) -> Option<String> {
    let mut dirs: Vec<_> = std::fs::read_dir(sys_class)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.iter().find_map(|d| {
        let t = std::fs::read_to_string(d.join("tt_card_type")).ok()?;
        Some(t.trim().to_owned()).filter(|t| !t.is_empty())
    })
}

/// The host as the verdict sees it; `dev_root` is normally `/dev/tenstorrent`, `sys_class`
/// [`SYS_CLASS_TENSTORRENT`], `env_arch` the value of [`ARCH_NAME_ENV`], `flag` `--arch`.
pub fn detect(
    dev_root: &Path,
    sys_class: &Path,
    env_arch: Option<&str>,
    flag: Option<&str>,
) -> LocalEnv {
    if let Some(arch) = flag.and_then(normalize_arch) {
        // Judging against another machine: this host's chip count says nothing about it.
        return LocalEnv {
            arch: Some(arch),
            device_count: 0,
            source: EnvSource::Flag,
        };
    }
    let chips = devices::inventory(dev_root).map_or(0, |c| c.len() as u32);
    if let Some(arch) = card_type(sys_class).as_deref().and_then(normalize_arch) {
        return LocalEnv {
            arch: Some(arch),
            device_count: chips,
            source: EnvSource::Card,
        };
    }
    if let Some(arch) = env_arch.and_then(normalize_arch) {
        return LocalEnv {
            arch: Some(arch),
            device_count: chips,
            source: EnvSource::Env,
        };
    }
    LocalEnv {
        arch: None,
        device_count: chips,
        source: EnvSource::None,
    }
}

/// [`detect`] on this machine's real paths and environment.
pub fn detect_here(flag: Option<&str>) -> LocalEnv {
    let env = std::env::var(ARCH_NAME_ENV).ok();
    detect(
        Path::new(tt_model_engine::run_spec::DEV_TENSTORRENT),
        Path::new(SYS_CLASS_TENSTORRENT),
        env.as_deref(),
        flag,
    )
}

/// One reason the package may not be usable here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Incompatibility {
    /// `arch` or `device_count`.
    pub field: &'static str,
    /// The package's value.
    pub expected: String,
    /// This host's value.
    pub detected: String,
    /// `true`: never usable here; `false`: usable only by forcing it.
    pub fatal: bool,
}

/// The verdict: no issues means compatible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompatibilityReport {
    /// No issues.
    pub compatible: bool,
    /// Each reason, arch first.
    pub issues: Vec<Incompatibility>,
    /// What was judged against.
    pub local: LocalEnv,
}

/// Judge `wire` against `local` (pure).
pub fn compare(wire: &WireManifest, local: &LocalEnv) -> CompatibilityReport {
    let mut issues = Vec::new();
    if let (Some(want), Some(have)) = (wire.arch, local.arch.as_deref())
        && want.as_str() != have
    {
        issues.push(Incompatibility {
            field: "arch",
            expected: want.as_str().to_owned(),
            detected: have.to_owned(),
            fatal: true,
        });
    }
    if local.device_count > 0 && wire.device_count > local.device_count {
        issues.push(Incompatibility {
            field: "device_count",
            expected: wire.device_count.to_string(),
            detected: local.device_count.to_string(),
            fatal: false,
        });
    }
    CompatibilityReport {
        compatible: issues.is_empty(),
        issues,
        local: local.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(arch: &str, chips: u32) -> WireManifest {
        let doc = serde_json::json!({"schema_version": "5.1", "name": "m", "arch": arch,
            "device_count": chips, "container": {"image": {"registry": "hf", "repository": "m"}}});
        WireManifest::from_json(&doc.to_string()).unwrap()
    }

    #[test]
    fn board_names_and_aliases_normalize() {
        assert_eq!(normalize_arch("p150a").as_deref(), Some("blackhole"));
        assert_eq!(normalize_arch("N300").as_deref(), Some("wormhole_b0"));
        assert_eq!(normalize_arch("bh").as_deref(), Some("blackhole"));
        assert_eq!(normalize_arch("quasar").as_deref(), Some("quasar"));
        assert_eq!(normalize_arch("  "), None);
    }

    #[test]
    fn the_card_wins_over_the_variable_and_the_flag_over_both() {
        let t = tempfile::tempdir().unwrap();
        let (dev, sys) = (t.path().join("dev"), t.path().join("sys"));
        for n in 0..2 {
            std::fs::create_dir_all(dev.join(n.to_string())).unwrap();
            let card = sys.join(format!("tenstorrent!{n}"));
            std::fs::create_dir_all(&card).unwrap();
            std::fs::write(card.join("tt_card_type"), "p150a\n").unwrap();
        }
        let card = detect(&dev, &sys, Some("wormhole_b0"), None);
        assert_eq!(
            card,
            LocalEnv {
                arch: Some("blackhole".into()),
                device_count: 2,
                source: EnvSource::Card
            }
        );
        let flag = detect(&dev, &sys, None, Some("n300"));
        assert_eq!(flag.arch.as_deref(), Some("wormhole_b0"));
        assert_eq!(flag.source, EnvSource::Flag);
        assert_eq!(flag.device_count, 0, "another machine's chips are unknown");
        let none = t.path().join("none");
        let env = detect(&none, &none, Some("wormhole_b0"), None);
        assert_eq!(
            (env.arch.as_deref(), env.source),
            (Some("wormhole_b0"), EnvSource::Env)
        );
        let nothing = detect(&none, &none, None, None);
        assert_eq!((nothing.arch, nothing.device_count), (None, 0));
    }

    #[test]
    fn arch_is_fatal_and_too_few_chips_a_warning() {
        let local = LocalEnv {
            arch: Some("wormhole_b0".into()),
            device_count: 1,
            source: EnvSource::Card,
        };
        let r = compare(&wire("blackhole", 4), &local);
        assert!(!r.compatible);
        assert_eq!(r.issues.len(), 2);
        assert_eq!(
            (
                r.issues[0].field,
                r.issues[0].fatal,
                r.issues[0].expected.as_str()
            ),
            ("arch", true, "blackhole")
        );
        assert_eq!(
            (
                r.issues[1].field,
                r.issues[1].fatal,
                r.issues[1].detected.as_str()
            ),
            ("device_count", false, "1")
        );
        let bigger = LocalEnv {
            arch: Some("blackhole".into()),
            device_count: 4,
            source: EnvSource::Card,
        };
        assert!(
            compare(&wire("blackhole", 1), &bigger).compatible,
            "fewer chips is fine"
        );
        let unknown = LocalEnv {
            arch: None,
            device_count: 0,
            source: EnvSource::None,
        };
        assert!(compare(&wire("blackhole", 4), &unknown).issues.is_empty());
    }
}
