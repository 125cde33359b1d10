//! The label keys on our images and containers, one documented constant each: the one home
//! of every key (a container inherits its image's labels, so `ps` reads an image key such as
//! the kind from any container of a package).
//!
//! The `org.tenstorrent.tt-model*` keys are the ones the Python original writes (so both tools
//! see each other's images and containers); `tt.model.*` describe the served API for other
//! tools (the `tt` CLI among them).

/// The package name; present on every container tt-model starts. Used to find ours.
pub const PACKAGE: &str = "org.tenstorrent.tt-model";
/// The serve profile.
pub const PROFILE: &str = "org.tenstorrent.tt-model.profile";
/// The chips the container was given, `1,2`; absent when it got no devices.
pub const DEVICES: &str = "org.tenstorrent.tt-model.devices";
/// What the user passed to `serve` (a manifest path or `org/name[@rev]`), for `ps`/`stop`.
pub const TARGET: &str = "org.tenstorrent.tt-model.target";
/// The runtime kind (`vllm-plugin`, `tt-dit-server`, `gr00t`, …).
pub const KIND: &str = "tt.model.kind";
/// The host port the server listens on.
pub const PORT: &str = "tt.model.port";
/// The host address the port is published on (`127.0.0.1` unless `--expose`).
pub const HOST_IP: &str = "tt.model.host_ip";
/// The HTTP path of the server's health endpoint.
pub const HEALTH_PATH: &str = "tt.model.health_path";
/// The wire manifest schema version.
pub const MANIFEST_SCHEMA: &str = "tt.model.manifest_schema";
/// Whether the server speaks the OpenAI API.
pub const OPENAI_COMPATIBLE: &str = "tt.model.openai_compatible";

/// The server kind again, under the key the Python original writes on its images
/// (`org.tenstorrent.tt-model.kind`): tools that inspect images built by either tool read this
/// one. Two keys for one fact ([`KIND`] and this), on purpose: each is another tool's contract.
pub const ORIGINAL_KIND: &str = "org.tenstorrent.tt-model.kind";
/// Image: the Hub repo, `org/name`.
pub const REPO: &str = "org.tenstorrent.tt-model.repo";
/// Image: the primary weights id.
pub const WEIGHTS: &str = "org.tenstorrent.tt-model.weights";
/// Image: the architecture (`arch:`).
pub const ARCH: &str = "org.tenstorrent.tt-model.arch";
/// Image: the serve profile names, comma-separated, in manifest order.
pub const PROFILES: &str = "org.tenstorrent.tt-model.profiles";
/// Image: the tree digest of the shipped `code/`, `sha256:<hex>`.
pub const CODE_SHA256: &str = "org.tenstorrent.tt-model.code-sha256";
/// Image: the tt-metal commit; absent when the tree has no git facts.
pub const TT_METAL_SHA: &str = "org.tenstorrent.tt-model.tt-metal-sha";

/// `org.tenstorrent.tt-model=<name>` as a list filter.
pub fn package_filter(name: &str) -> String {
    format!("{PACKAGE}={name}")
}

/// Parse a `DEVICES` label value; `None` when malformed (callers then assume every chip).
pub fn parse_devices(value: &str) -> Option<Vec<u32>> {
    if value.trim().is_empty() {
        return Some(Vec::new());
    }
    value
        .split(',')
        .map(|p| p.trim().parse::<u32>().ok())
        .collect()
}

/// Format chips for the `DEVICES` label.
pub fn format_devices(chips: &[u32]) -> String {
    chips
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_label_round_trips_and_rejects_garbage() {
        assert_eq!(parse_devices(&format_devices(&[1, 3])), Some(vec![1, 3]));
        assert_eq!(parse_devices(""), Some(vec![]));
        assert_eq!(parse_devices("1,x"), None);
        assert_eq!(parse_devices("-1"), None);
    }
}
