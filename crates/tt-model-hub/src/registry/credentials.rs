//! Registry credentials by the Docker config convention, the way `docker login` stores them:
//! `$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`), where `credHelpers[host]`
//! names a helper for one host, `credsStore` a helper for all, and `auths[host].auth` holds
//! `base64(user:password)`. A helper is the program `docker-credential-<name>`, asked with
//! `get` and the host on stdin. Credentials never go into argv, logs or error messages.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use serde_json::Value;

use super::error::RegistryError;

/// A user name and its password or token.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The account name, as sent in Basic auth and to the token endpoint.
    pub username: String,
    /// The password or token; never printed (the `Debug` impl hides it).
    pub secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl Credentials {
    /// The `Authorization: Basic …` value.
    pub fn basic(&self) -> String {
        let raw = format!("{}:{}", self.username, self.secret);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// Where the config says a host's credentials are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Inline in `auths`.
    Inline(Credentials),
    /// From `docker-credential-<helper>`.
    Helper(String),
    /// Nowhere: requests go anonymous.
    None,
}

/// `https://host/v1/`, `http://host` and `host` all key the same host.
fn key_host(key: &str) -> &str {
    let k = key.split_once("://").map_or(key, |(_, rest)| rest);
    k.split('/').next().unwrap_or(k)
}

/// Where `config` (the parsed `config.json`) keeps the credentials of `host` (pure).
pub fn lookup(config: &Value, host: &str) -> Source {
    if let Some(h) = config["credHelpers"]
        .as_object()
        .and_then(|m| m.iter().find(|(k, _)| key_host(k) == host))
        .and_then(|(_, v)| v.as_str())
        .filter(|h| !h.is_empty())
    {
        return Source::Helper(h.to_string());
    }
    let inline = config["auths"].as_object().and_then(|m| {
        m.iter()
            .filter(|(k, _)| key_host(k) == host)
            .find_map(|(_, v)| v["auth"].as_str().filter(|a| !a.is_empty()))
    });
    if let Some(auth) = inline
        && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(auth.trim())
        && let Ok(text) = String::from_utf8(bytes)
        && let Some((user, secret)) = text.split_once(':')
    {
        return Source::Inline(Credentials {
            username: user.to_string(),
            secret: secret.to_string(),
        });
    }
    match config["credsStore"].as_str().filter(|s| !s.is_empty()) {
        Some(store) => Source::Helper(store.to_string()),
        None => Source::None,
    }
}

/// The Docker config file: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
pub fn config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker/config.json"))
}

/// The credentials for `host`, if the Docker config has any; `Ok(None)` without a config.
pub fn for_host(host: &str) -> Result<Option<Credentials>, RegistryError> {
    let Some(path) = config_path() else {
        return Ok(None);
    };
    let config = match std::fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice::<Value>(&bytes).map_err(|e| RegistryError::BadResponse {
                url: path.display().to_string(),
                detail: format!("not a Docker config: {e}"),
            })?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RegistryError::io("Cannot read", &path)(e)),
    };
    match lookup(&config, host) {
        Source::Inline(c) => Ok(Some(c)),
        Source::Helper(helper) => from_helper(&helper, host, &path),
        Source::None => Ok(None),
    }
}

/// Asks `docker-credential-<helper> get` for `host`. "Not found" is no credentials.
fn from_helper(
    helper: &str,
    host: &str,
    config: &Path,
) -> Result<Option<Credentials>, RegistryError> {
    let program = format!("docker-credential-{helper}");
    let failed = |detail: String| RegistryError::Helper {
        helper: helper.to_string(),
        host: host.to_string(),
        detail,
    };
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            failed(format!(
                "cannot run {program} ({e}), named by {}",
                config.display()
            ))
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(host.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stdout).to_lowercase()
            + &String::from_utf8_lossy(&out.stderr).to_lowercase();
        if said.contains("not found") {
            return Ok(None);
        }
        return Err(failed(format!("it exited with {}", out.status)));
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .map_err(|_| failed("its answer is not the helper protocol's JSON".into()))?;
    match (v["Username"].as_str(), v["Secret"].as_str()) {
        (Some(u), Some(s)) if !s.is_empty() => Ok(Some(Credentials {
            username: u.to_string(),
            secret: s.to_string(),
        })),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn auth(user: &str, secret: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"))
    }

    #[test]
    fn helpers_then_inline_auths_then_the_store() {
        let config = json!({
            "auths": {
                "https://127.0.0.1:5000/v1/": {"auth": auth("tt", "p:w")},
                "ghcr.io": {},
            },
            "credHelpers": {"ecr.example.com": "ecr-login"},
            "credsStore": "desktop",
        });
        assert_eq!(
            lookup(&config, "127.0.0.1:5000"),
            Source::Inline(Credentials {
                username: "tt".into(),
                secret: "p:w".into()
            }),
            "the scheme and path of a key are ignored; a ':' in the password survives"
        );
        assert_eq!(
            lookup(&config, "ecr.example.com"),
            Source::Helper("ecr-login".into())
        );
        assert_eq!(
            lookup(&config, "ghcr.io"),
            Source::Helper("desktop".into()),
            "an entry without auth defers to the store"
        );
        assert_eq!(lookup(&json!({}), "ghcr.io"), Source::None);
    }

    #[test]
    fn the_secret_never_prints() {
        let c = Credentials {
            username: "u".into(),
            secret: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
        assert_eq!(c.basic(), format!("Basic {}", auth("u", "hunter2")));
    }
}
