//! Pulling an image through the engine (`POST /images/create?fromImage=…`), the way `docker
//! pull` asks for it: the registry's credentials travel in the `X-Registry-Auth` header (the
//! daemon never reads the client's Docker config itself), and the engine's per-layer progress
//! is summed into byte totals for one progress line.
//!
//! Where the credentials come from is the caller's business ([`CredentialSource`]): the Docker
//! config convention lives with the registry client in `tt-model-hub`, which this crate does
//! not depend on.

use std::collections::BTreeMap;
use std::sync::Arc;

use bollard::auth::DockerCredentials;
use bollard::query_parameters::CreateImageOptions;
use futures_util::StreamExt;

use crate::client::Client;
use crate::error::EngineError;

/// The registry host of references without one (`ubuntu:22.04`, `library/x`), as the Docker
/// config keys it (`https://index.docker.io/v1/`).
pub const DOCKER_HUB: &str = "index.docker.io";

/// A user name and password (or token) for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryAuth {
    /// The account name.
    pub username: String,
    /// The password or token; never printed (the `Debug` impl hides it).
    pub password: String,
}

impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryAuth")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The function that finds a registry host's credentials (`Ok(None)`: go anonymous; `Err`: the
/// lookup itself failed, e.g. a credential helper that cannot run).
pub type AuthLookup = dyn Fn(&str) -> Result<Option<RegistryAuth>, String> + Send + Sync;

/// Where pulls get their credentials; the default is anonymous.
#[derive(Clone, Default)]
pub struct CredentialSource(Option<Arc<AuthLookup>>);

impl CredentialSource {
    /// Credentials from `lookup`, asked once per pull with the registry host.
    pub fn new(
        lookup: impl Fn(&str) -> Result<Option<RegistryAuth>, String> + Send + Sync + 'static,
    ) -> Self {
        Self(Some(Arc::new(lookup)))
    }

    /// Anonymous pulls only.
    pub fn anonymous() -> Self {
        Self(None)
    }

    /// The credentials for `host`.
    pub fn for_host(&self, host: &str) -> Result<Option<RegistryAuth>, String> {
        match &self.0 {
            Some(lookup) => lookup(host),
            None => Ok(None),
        }
    }
}

impl std::fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "CredentialSource(lookup)"
        } else {
            "CredentialSource(anonymous)"
        })
    }
}

/// A reference split the way the engine's pull endpoint wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullTarget {
    /// The registry host whose credentials apply ([`DOCKER_HUB`] when the reference has none).
    pub host: String,
    /// `fromImage`: the repository, with `@sha256:…` for a digest reference.
    pub from_image: String,
    /// `tag`: empty for a digest reference; `latest` when the reference names neither, since
    /// an empty tag asks the engine for every tag of the repository.
    pub tag: String,
}

/// Splits `reference` (pure). The first path component is a registry host when it has a `.`
/// or a `:`, or is `localhost`, as the engine decides.
pub fn pull_target(reference: &str) -> PullTarget {
    let first = reference.split_once('/').map_or("", |(first, _)| first);
    let host = if first.contains('.') || first.contains(':') || first == "localhost" {
        first.to_string()
    } else {
        DOCKER_HUB.to_string()
    };
    if reference.contains('@') {
        return PullTarget {
            host,
            from_image: reference.to_string(),
            tag: String::new(),
        };
    }
    // A tag is a `:` after the last `/` (a `:` before it is the host's port).
    let last = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[last..].rfind(':') {
        Some(i) => PullTarget {
            host,
            from_image: reference[..last + i].to_string(),
            tag: reference[last + i + 1..].to_string(),
        },
        None => PullTarget {
            host,
            from_image: reference.to_string(),
            tag: "latest".to_string(),
        },
    }
}

/// Bytes moved so far, summed over the layers the engine downloads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PullProgress {
    /// Bytes downloaded so far.
    pub done: u64,
    /// Bytes to download, over the layers whose size the engine has announced so far.
    pub total: u64,
}

/// What a finished pull moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PullStats {
    /// Compressed bytes downloaded.
    pub bytes: u64,
    /// Layers downloaded.
    pub layers: usize,
    /// Layers the engine already held.
    pub present: usize,
}

/// Sums the engine's per-layer status lines (pure, so the arithmetic is testable).
#[derive(Debug, Default)]
pub struct PullTally {
    /// Layer id → (bytes done, bytes total).
    layers: BTreeMap<String, (u64, u64)>,
    present: usize,
}

impl PullTally {
    /// Takes one status line; returns the new totals when bytes moved.
    pub fn take(
        &mut self,
        id: Option<&str>,
        status: &str,
        current: Option<i64>,
        total: Option<i64>,
    ) -> Option<PullProgress> {
        let id = id?;
        let non_negative = |v: Option<i64>| v.map(|v| v.max(0) as u64);
        match status {
            "Downloading" => {
                let entry = self.layers.entry(id.to_string()).or_default();
                entry.0 = non_negative(current).unwrap_or(entry.0);
                entry.1 = non_negative(total).unwrap_or(entry.1).max(entry.0);
            }
            // A layer too small to report "Downloading" lines still counts as moved; its size
            // is unknown then, so it adds nothing.
            "Download complete" => {
                let entry = self.layers.entry(id.to_string()).or_default();
                entry.0 = entry.1;
            }
            "Already exists" => {
                self.present += 1;
                return None;
            }
            _ => return None,
        }
        Some(self.progress())
    }

    /// The totals so far.
    pub fn progress(&self) -> PullProgress {
        let (done, total) = self
            .layers
            .values()
            .fold((0, 0), |(d, t), (ld, lt)| (d + ld, t + lt));
        PullProgress { done, total }
    }

    /// The totals of a finished pull.
    pub fn stats(&self) -> PullStats {
        PullStats {
            bytes: self.progress().done,
            layers: self.layers.len(),
            present: self.present,
        }
    }
}

/// The engine's or registry's answer in a failed pull, as text for the user.
pub(crate) fn answer(error: &bollard::errors::Error) -> String {
    match error {
        bollard::errors::Error::DockerStreamError { error } => error.trim().to_string(),
        bollard::errors::Error::DockerResponseServerError {
            status_code,
            message,
        } => format!("{} (HTTP {status_code})", message.trim()),
        other => other.to_string(),
    }
}

impl Client {
    /// Pulls `reference` into the engine with `credentials` for its registry host, calling
    /// `progress` as bytes arrive. Fails with [`EngineError::Pull`] carrying the registry's
    /// answer (unknown manifest, refused credentials, unreachable host).
    pub async fn pull_image(
        &self,
        reference: &str,
        credentials: &CredentialSource,
        progress: &mut (dyn FnMut(PullProgress) + Send),
    ) -> Result<PullStats, EngineError> {
        let target = pull_target(reference);
        let failed = |answer: String| EngineError::Pull {
            reference: reference.to_string(),
            answer,
        };
        let auth = credentials.for_host(&target.host).map_err(|e| {
            failed(format!(
                "cannot read the credentials for {}: {e}",
                target.host
            ))
        })?;
        let auth = auth.map(|a| DockerCredentials {
            username: Some(a.username),
            password: Some(a.password),
            serveraddress: Some(target.host.clone()),
            ..Default::default()
        });
        let options = CreateImageOptions {
            from_image: Some(target.from_image.clone()),
            tag: (!target.tag.is_empty()).then(|| target.tag.clone()),
            ..Default::default()
        };
        let mut stream = self.docker().create_image(Some(options), None, auth);
        let mut tally = PullTally::default();
        // The engine ends a pull with `Status: Downloaded newer image for …` (or `… is up to date`).
        let mut finished = false;
        while let Some(item) = stream.next().await {
            let info = match item {
                Ok(info) => info,
                // Whole but for a line end when the last status came and the image is here.
                Err(e) if crate::torn_line_end::is_torn_line_end(&e) => {
                    return match (finished, self.image(reference).await?) {
                        (true, Some(_)) => Ok(tally.stats()),
                        _ => Err(failed(answer(&e))),
                    };
                }
                Err(e) => return Err(failed(answer(&e))),
            };
            finished = info
                .status
                .as_deref()
                .is_some_and(|s| s.starts_with("Status: "));
            let detail = info.progress_detail.unwrap_or_default();
            if let Some(p) = tally.take(
                info.id.as_deref(),
                info.status.as_deref().unwrap_or_default(),
                detail.current,
                detail.total,
            ) {
                progress(p);
            }
        }
        Ok(tally.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_into_host_repository_and_tag() {
        let t = |r: &str| {
            let p = pull_target(r);
            (p.host, p.from_image, p.tag)
        };
        let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        assert_eq!(t("ubuntu:22.04"), s(DOCKER_HUB, "ubuntu", "22.04"));
        assert_eq!(
            t("ubuntu"),
            s(DOCKER_HUB, "ubuntu", "latest"),
            "no tag means latest, never every tag"
        );
        assert_eq!(t("acme/base:v1"), s(DOCKER_HUB, "acme/base", "v1"));
        assert_eq!(
            t("127.0.0.1:5000/tt/base:v1"),
            s("127.0.0.1:5000", "127.0.0.1:5000/tt/base", "v1")
        );
        assert_eq!(
            t("127.0.0.1:5000/tt/base"),
            s("127.0.0.1:5000", "127.0.0.1:5000/tt/base", "latest"),
            "the port's colon is not a tag"
        );
        assert_eq!(
            t("ghcr.io/tenstorrent/tt-metal/dev@sha256:ab"),
            s("ghcr.io", "ghcr.io/tenstorrent/tt-metal/dev@sha256:ab", "")
        );
        assert_eq!(t("localhost/x:1"), s("localhost", "localhost/x", "1"));
    }

    #[test]
    fn the_tally_sums_layers_and_counts_present_ones() {
        let mut t = PullTally::default();
        assert_eq!(t.take(Some("a"), "Pulling fs layer", None, None), None);
        assert_eq!(t.take(Some("b"), "Already exists", None, None), None);
        assert_eq!(
            t.take(Some("a"), "Downloading", Some(10), Some(100)),
            Some(PullProgress {
                done: 10,
                total: 100
            })
        );
        assert_eq!(
            t.take(Some("c"), "Downloading", Some(5), Some(50)),
            Some(PullProgress {
                done: 15,
                total: 150
            })
        );
        assert_eq!(
            t.take(Some("a"), "Download complete", None, None),
            Some(PullProgress {
                done: 105,
                total: 150
            })
        );
        assert_eq!(t.take(None, "Digest: sha256:x", None, None), None);
        assert_eq!(
            t.stats(),
            PullStats {
                bytes: 105,
                layers: 2,
                present: 1
            }
        );
    }

    #[test]
    fn credentials_never_print() {
        let a = RegistryAuth {
            username: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{a:?}").contains("hunter2"));
        let src = CredentialSource::new(|host| {
            Ok((host == "r:1").then(|| RegistryAuth {
                username: "u".into(),
                password: "p".into(),
            }))
        });
        assert!(src.for_host("r:1").unwrap().is_some());
        assert!(src.for_host("other").unwrap().is_none());
        assert!(
            CredentialSource::default()
                .for_host("r:1")
                .unwrap()
                .is_none()
        );
    }
}
