//! Where an image lives in a registry: `image.registry` (`host[:port]/namespace`) plus the
//! repository under it, as the distribution API names them.

use tt_model_manifest::{name_component_ok as component_ok, registry_host_ok};

use super::error::RegistryError;

/// One repository in one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryTarget {
    /// `host[:port]`, as the Docker config keys it.
    pub host: String,
    /// The repository path under the host: `<namespace>/<repository>`.
    pub repository: String,
}

/// Hosts spoken to over plain HTTP: loopback only (a registry started for tests or a local
/// mirror). Everything else is HTTPS.
fn is_loopback(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.ends_with(':') => {
            name
        }
        _ => host,
    };
    matches!(name, "127.0.0.1" | "localhost" | "[::1]")
}

impl RegistryTarget {
    /// `registry` is `host[:port]/namespace[/…]` (no scheme); `repository` the image's name
    /// under it.
    pub fn new(registry: &str, repository: &str) -> Result<Self, RegistryError> {
        let bad = || RegistryError::BadTarget(registry.to_string());
        if registry.contains("://") {
            return Err(bad());
        }
        let (host, namespace) = registry.split_once('/').ok_or_else(bad)?;
        let path = format!("{}/{}", namespace.trim_end_matches('/'), repository);
        if !registry_host_ok(host) || !namespace.trim_end_matches('/').split('/').all(component_ok)
        {
            return Err(bad());
        }
        if !repository.split('/').all(component_ok) {
            return Err(RegistryError::BadRepository(repository.to_string()));
        }
        Ok(Self {
            host: host.to_string(),
            repository: path,
        })
    }

    /// `http://host` on loopback, else `https://host`.
    pub fn base_url(&self) -> String {
        let scheme = if is_loopback(&self.host) {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.host)
    }

    /// `host/repository@digest`: what `docker pull` takes.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}/{}@{digest}", self.host, self.repository)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_namespace_and_repository() {
        let t = RegistryTarget::new("127.0.0.1:5000/tt", "minimal-http").unwrap();
        assert_eq!(t.host, "127.0.0.1:5000");
        assert_eq!(t.repository, "tt/minimal-http");
        assert_eq!(t.base_url(), "http://127.0.0.1:5000");
        assert_eq!(
            t.pinned("sha256:ab"),
            "127.0.0.1:5000/tt/minimal-http@sha256:ab"
        );
        let g = RegistryTarget::new("ghcr.io/acme/models/", "gr00t").unwrap();
        assert_eq!(g.repository, "acme/models/gr00t");
        assert_eq!(g.base_url(), "https://ghcr.io");
        assert_eq!(
            RegistryTarget::new("localhost/x", "y").unwrap().base_url(),
            "http://localhost"
        );
        assert_eq!(
            RegistryTarget::new("127.0.0.1.example.com:443/x", "y")
                .unwrap()
                .base_url(),
            "https://127.0.0.1.example.com:443",
            "only loopback itself is plain HTTP"
        );
    }

    #[test]
    fn malformed_targets_are_refused() {
        for (reg, repo) in [
            ("ghcr.io", "x"),
            ("https://ghcr.io/acme", "x"),
            ("ghcr.io/Acme", "x"),
            ("ghcr.io//acme", "x"),
            ("/acme", "x"),
        ] {
            assert!(
                matches!(
                    RegistryTarget::new(reg, repo),
                    Err(RegistryError::BadTarget(_))
                ),
                "{reg} {repo}"
            );
        }
        assert!(matches!(
            RegistryTarget::new("ghcr.io/acme", "Bad_Name"),
            Err(RegistryError::BadRepository(_))
        ));
        assert!(matches!(
            RegistryTarget::new("ghcr.io/acme", "Bad_Name"),
            Err(RegistryError::BadRepository(_))
        ));
    }
}
