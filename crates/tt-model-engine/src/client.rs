//! `Client`: a connection to the container engine, version-negotiated and pinged.
//!
//! The address comes from `DOCKER_HOST` (unix://, tcp://, http://) or the default socket
//! `/var/run/docker.sock`. `connect` negotiates the API version down to what the engine speaks
//! (dockerd 20.10 speaks 1.41) and pings, so an unreachable engine fails here with one clear
//! error instead of on the first real request.

use std::time::Duration;

use bollard::Docker;

use crate::error::EngineError;

/// The oldest engine API we drive (dockerd 20.10).
pub const MIN_API_VERSION: (usize, usize) = (1, 41);

/// The default engine address when `DOCKER_HOST` is not set.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// How long a request may wait for its response headers. Streaming bodies (build output,
/// logs, exports) are not bounded by it; a build's headers only come after the whole
/// context was uploaded, so this is generous.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A connected, version-negotiated engine client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    docker: Docker,
    host: String,
    api_version: String,
    server_version: String,
}

impl Client {
    /// Connects to the engine named by `DOCKER_HOST`, or the default socket.
    pub async fn connect() -> Result<Self, EngineError> {
        let host = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        Self::connect_to(&host).await
    }

    /// Connects to the engine at `host` (`unix:///path`, `tcp://h:p`, `http://h:p`).
    pub async fn connect_to(host: &str) -> Result<Self, EngineError> {
        // A missing socket means the engine is not running, not that the address is wrong.
        let connect_err = |source| match source {
            bollard::errors::Error::SocketNotFoundError(_) => EngineError::Unreachable {
                host: host.to_string(),
                source,
            },
            source => EngineError::Connect {
                host: host.to_string(),
                source,
            },
        };
        let docker = Docker::connect_with_host(host)
            .map_err(connect_err)?
            .with_timeout(REQUEST_TIMEOUT);
        let unreachable = |source| EngineError::Unreachable {
            host: host.to_string(),
            source,
        };
        let docker = docker.negotiate_version().await.map_err(unreachable)?;
        let version = docker.version().await.map_err(unreachable)?;
        docker.ping().await.map_err(unreachable)?;
        let api_version = version.api_version.unwrap_or_default();
        if !api_at_least(&api_version, MIN_API_VERSION) {
            return Err(EngineError::TooOld {
                found: api_version,
                needed: format!("{}.{}", MIN_API_VERSION.0, MIN_API_VERSION.1),
            });
        }
        Ok(Self {
            docker,
            host: host.to_string(),
            api_version,
            server_version: version.version.unwrap_or_default(),
        })
    }

    /// Pings the engine again (for long-lived clients).
    pub async fn ping(&self) -> Result<(), EngineError> {
        self.docker
            .ping()
            .await
            .map(|_| ())
            .map_err(|source| EngineError::Unreachable {
                host: self.host.clone(),
                source,
            })
    }

    /// The engine address this client talks to.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The negotiated API version, e.g. `1.41`.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// The engine's own version, e.g. `20.10.24+dfsg1`.
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// The bollard handle, for the modules of this crate only.
    pub(crate) fn docker(&self) -> &Docker {
        &self.docker
    }
}

/// Whether an API version string like `1.41` is at least `min`.
fn api_at_least(version: &str, min: (usize, usize)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<usize>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= min,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_comparison() {
        assert!(api_at_least("1.41", (1, 41)));
        assert!(api_at_least("1.50", (1, 41)));
        assert!(api_at_least("2.0", (1, 41)));
        assert!(!api_at_least("1.40", (1, 41)));
        assert!(!api_at_least("", (1, 41)));
        assert!(!api_at_least("one.two", (1, 41)));
    }

    #[tokio::test]
    async fn unknown_scheme_is_a_connect_error() {
        let err = Client::connect_to("ftp://nowhere").await.unwrap_err();
        assert!(matches!(err, EngineError::Connect { .. }), "{err:?}");
        assert!(err.is_unreachable());
    }

    #[tokio::test]
    async fn missing_socket_is_unreachable() {
        let err = Client::connect_to("unix:///nonexistent/docker.sock")
            .await
            .unwrap_err();
        assert!(matches!(err, EngineError::Unreachable { .. }), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/docker.sock"));
    }
}
