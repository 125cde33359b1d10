//! The requests of the distribution API, authenticated as the registry asks.
//!
//! [`Registry::connect`] pings `/v2/`: a 200 means anonymous access; a 401 names the scheme.
//! Basic sends the Docker-config credentials; Bearer trades them (or nothing) for a token
//! scoped to the repository (plus `pull` on the repositories blobs may be mounted from). A
//! request answered 401 later (an expired token) authenticates again and is sent once more.

use std::path::Path;
use std::sync::Arc;

use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE,
};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::Mutex;

use super::challenge::{self, Challenge};
use super::credentials::{self, Credentials};
use super::error::RegistryError;
use super::target::RegistryTarget;
use super::{DOCKER_MANIFEST, OCI_MANIFEST};
use crate::upload::Transfer;

/// A connection to one repository of one registry.
pub struct Registry {
    http: reqwest::Client,
    target: RegistryTarget,
    base: String,
    credentials: Option<Credentials>,
    /// The scopes a Bearer token is asked for.
    scopes: Vec<String>,
    /// The `Authorization` value in use (none: anonymous).
    auth: Mutex<Option<String>>,
}

/// What [`Registry::mount`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mount {
    /// The registry linked the blob from the other repository: nothing to send.
    Mounted,
    /// It could not; the upload session it opened instead (its `Location`).
    Upload(String),
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::verify::hex(&Sha256::digest(bytes)))
}

impl Registry {
    /// Connects to `target`, authenticating as the registry asks. `push` asks for push rights;
    /// `mount_from` lists repositories (same host) whose blobs may be mounted.
    pub async fn connect(
        target: RegistryTarget,
        push: bool,
        mount_from: &[String],
    ) -> Result<Self, RegistryError> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("tt-model/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .expect("reqwest client with static settings");
        let credentials = credentials::for_host(&target.host)?;
        let actions = if push { "pull,push" } else { "pull" };
        let mut scopes = vec![format!("repository:{}:{actions}", target.repository)];
        scopes.extend(
            mount_from
                .iter()
                .filter(|r| **r != target.repository)
                .map(|r| format!("repository:{r}:pull")),
        );
        let registry = Registry {
            http,
            base: target.base_url(),
            target,
            credentials,
            scopes,
            auth: Mutex::new(None),
        };
        registry.authenticate().await?;
        Ok(registry)
    }

    /// The registry and repository this client talks to.
    pub fn target(&self) -> &RegistryTarget {
        &self.target
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/v2/{}/{tail}", self.base, self.target.repository)
    }

    fn network(url: &str) -> impl FnOnce(reqwest::Error) -> RegistryError + '_ {
        move |source| RegistryError::Network {
            url: url.to_string(),
            source,
        }
    }

    fn unauthorized(&self, status: StatusCode) -> RegistryError {
        let hint = if self.credentials.is_none() {
            format!(
                "; no credentials for {} in the Docker config ({}): add them with `docker login {}` or a credential helper",
                self.target.host,
                credentials::config_path().map_or_else(
                    || "~/.docker/config.json".into(),
                    |p| p.display().to_string()
                ),
                self.target.host
            )
        } else {
            String::new()
        };
        RegistryError::Unauthorized {
            host: self.target.host.clone(),
            repository: self.target.repository.clone(),
            status: status.as_u16(),
            hint,
        }
    }

    /// Pings `/v2/` and sets the `Authorization` value the registry's challenge asks for.
    async fn authenticate(&self) -> Result<(), RegistryError> {
        let url = format!("{}/v2/", self.base);
        let ping = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(Self::network(&url))?;
        if ping.status().is_success() {
            *self.auth.lock().await = None;
            return Ok(());
        }
        if ping.status() != StatusCode::UNAUTHORIZED {
            return Err(refused(Method::GET, &url, ping).await);
        }
        let header = ping
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let value = match challenge::parse(header) {
            Some(Challenge::Basic) => match &self.credentials {
                Some(c) => c.basic(),
                None => return Err(self.unauthorized(ping.status())),
            },
            Some(Challenge::Bearer { realm, service }) => {
                format!("Bearer {}", self.token(&realm, service.as_deref()).await?)
            }
            None => {
                return Err(RegistryError::BadResponse {
                    url,
                    detail: "a 401 without a Basic or Bearer challenge".into(),
                });
            }
        };
        // Basic credentials are checked now, so a wrong password fails before any upload.
        let check = self
            .http
            .get(&url)
            .header(AUTHORIZATION, &value)
            .send()
            .await
            .map_err(Self::network(&url))?;
        if check.status() == StatusCode::UNAUTHORIZED || check.status() == StatusCode::FORBIDDEN {
            return Err(self.unauthorized(check.status()));
        }
        *self.auth.lock().await = Some(value);
        Ok(())
    }

    /// A Bearer token from the token service `realm` for this client's scopes.
    async fn token(&self, realm: &str, service: Option<&str>) -> Result<String, RegistryError> {
        let mut query: Vec<(&str, &str)> =
            self.scopes.iter().map(|s| ("scope", s.as_str())).collect();
        if let Some(s) = service {
            query.push(("service", s));
        }
        let mut req = self.http.get(realm).query(&query);
        if let Some(c) = &self.credentials {
            req = req.header(AUTHORIZATION, c.basic());
        }
        let resp = req.send().await.map_err(Self::network(realm))?;
        if resp.status() == StatusCode::UNAUTHORIZED || resp.status() == StatusCode::FORBIDDEN {
            return Err(self.unauthorized(resp.status()));
        }
        if !resp.status().is_success() {
            return Err(refused(Method::GET, realm, resp).await);
        }
        let v: Value = resp.json().await.map_err(|e| RegistryError::BadResponse {
            url: realm.to_string(),
            detail: e.to_string(),
        })?;
        v["token"]
            .as_str()
            .or_else(|| v["access_token"].as_str())
            .map(str::to_string)
            .ok_or_else(|| RegistryError::BadResponse {
                url: realm.to_string(),
                detail: "the token service answered without a token".into(),
            })
    }

    /// Sends the request `build` makes, authenticated; on a 401 authenticates again and sends
    /// a fresh request once more (`build` re-creates any streamed body).
    async fn send(
        &self,
        url: &str,
        build: impl Fn(&reqwest::Client) -> Result<RequestBuilder, RegistryError>,
    ) -> Result<Response, RegistryError> {
        for attempt in 0..2 {
            let mut req = build(&self.http)?;
            if let Some(a) = self.auth.lock().await.clone() {
                req = req.header(AUTHORIZATION, a);
            }
            let resp = req.send().await.map_err(Self::network(url))?;
            if resp.status() == StatusCode::UNAUTHORIZED && attempt == 0 {
                self.authenticate().await?;
                continue;
            }
            if resp.status() == StatusCode::UNAUTHORIZED {
                return Err(self.unauthorized(resp.status()));
            }
            return Ok(resp);
        }
        unreachable!("the loop returns on its second pass")
    }

    /// Whether the repository has the blob.
    pub async fn blob_exists(&self, digest: &str) -> Result<bool, RegistryError> {
        let url = self.url(&format!("blobs/{digest}"));
        let resp = self.send(&url, |h| Ok(h.head(&url))).await?;
        match resp.status() {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(refused(Method::HEAD, &url, resp).await),
        }
    }

    /// Asks the registry to link `digest` from repository `from` (cross-repo mount).
    pub async fn mount(&self, digest: &str, from: &str) -> Result<Mount, RegistryError> {
        let url = self.url("blobs/uploads/");
        let resp = self
            .send(&url, |h| {
                Ok(h.post(&url)
                    .query(&[("mount", digest), ("from", from)])
                    .header(CONTENT_LENGTH, 0))
            })
            .await?;
        match resp.status() {
            StatusCode::CREATED => Ok(Mount::Mounted),
            StatusCode::ACCEPTED => Ok(Mount::Upload(self.location(&url, &resp)?)),
            _ => Err(refused(Method::POST, &url, resp).await),
        }
    }

    /// Opens an upload session; returns its `Location`.
    pub async fn start_upload(&self) -> Result<String, RegistryError> {
        let url = self.url("blobs/uploads/");
        let resp = self
            .send(&url, |h| Ok(h.post(&url).header(CONTENT_LENGTH, 0)))
            .await?;
        if resp.status() != StatusCode::ACCEPTED {
            return Err(refused(Method::POST, &url, resp).await);
        }
        self.location(&url, &resp)
    }

    /// An absolute URL from a response's `Location` (which may be relative).
    fn location(&self, url: &str, resp: &Response) -> Result<String, RegistryError> {
        let loc = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| RegistryError::BadResponse {
                url: url.to_string(),
                detail: "an upload session without a Location".into(),
            })?;
        Ok(
            if loc.starts_with("http://") || loc.starts_with("https://") {
                loc.to_string()
            } else {
                format!("{}{loc}", self.base)
            },
        )
    }

    /// Sends the blob at `path` (`size` bytes) in one PUT to the session at `location`.
    pub async fn finish_upload(
        &self,
        location: &str,
        digest: &str,
        path: &Path,
        size: u64,
        transfer: Arc<dyn Transfer>,
    ) -> Result<(), RegistryError> {
        let sep = if location.contains('?') { '&' } else { '?' };
        let url = format!("{location}{sep}digest={digest}");
        let resp = self
            .send(&url, |h| {
                let file =
                    std::fs::File::open(path).map_err(RegistryError::io("Cannot read", path))?;
                Ok(h.put(&url)
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .header(CONTENT_LENGTH, size)
                    .body(crate::upload::file_body(file, transfer.clone())))
            })
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(refused(Method::PUT, &url, resp).await);
        }
        Ok(())
    }

    /// PUTs a manifest under `reference` (a tag or its digest); returns the digest the
    /// registry stored it as.
    pub async fn put_manifest(
        &self,
        reference: &str,
        media_type: &str,
        bytes: &[u8],
    ) -> Result<String, RegistryError> {
        let url = self.url(&format!("manifests/{reference}"));
        let resp = self
            .send(&url, |h| {
                Ok(h.put(&url)
                    .header(CONTENT_TYPE, media_type)
                    .body(bytes.to_vec()))
            })
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(refused(Method::PUT, &url, resp).await);
        }
        Ok(resp
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| sha256_digest(bytes), str::to_string))
    }

    /// The manifest named by `digest`, checked against it; returns its bytes and media type.
    pub async fn get_manifest(&self, digest: &str) -> Result<(Vec<u8>, String), RegistryError> {
        let url = self.url(&format!("manifests/{digest}"));
        let resp = self
            .send(&url, |h| {
                Ok(h.get(&url)
                    .header(ACCEPT, format!("{OCI_MANIFEST}, {DOCKER_MANIFEST}")))
            })
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Err(self.not_found("manifest", digest));
        }
        if !resp.status().is_success() {
            return Err(refused(Method::GET, &url, resp).await);
        }
        let media_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(OCI_MANIFEST)
            .to_string();
        let bytes = resp.bytes().await.map_err(Self::network(&url))?.to_vec();
        let actual = sha256_digest(&bytes);
        if actual != digest {
            return Err(RegistryError::DigestMismatch {
                what: "manifest",
                host: self.target.host.clone(),
                repository: self.target.repository.clone(),
                digest: digest.to_string(),
                actual,
            });
        }
        Ok((bytes, media_type))
    }

    fn not_found(&self, what: &'static str, reference: &str) -> RegistryError {
        RegistryError::NotFound {
            what,
            host: self.target.host.clone(),
            repository: self.target.repository.clone(),
            reference: reference.to_string(),
        }
    }

    /// Streams blob `digest` into `dest` (created anew), checking its size and sha256; a blob
    /// that does not match is deleted.
    pub async fn get_blob(
        &self,
        digest: &str,
        size: u64,
        dest: &Path,
        transfer: &dyn Transfer,
    ) -> Result<(), RegistryError> {
        let url = self.url(&format!("blobs/{digest}"));
        let mut resp = self.send(&url, |h| Ok(h.get(&url))).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Err(self.not_found("blob", digest));
        }
        if !resp.status().is_success() {
            return Err(refused(Method::GET, &url, resp).await);
        }
        let mut file = tokio::fs::File::create(dest)
            .await
            .map_err(RegistryError::io("Cannot create", dest))?;
        let mut hasher = Sha256::new();
        let mut got = 0u64;
        let result = async {
            while let Some(chunk) = resp.chunk().await.map_err(Self::network(&url))? {
                hasher.update(&chunk);
                got += chunk.len() as u64;
                transfer.bytes(chunk.len() as u64);
                file.write_all(&chunk)
                    .await
                    .map_err(RegistryError::io("Cannot write", dest))?;
            }
            file.flush()
                .await
                .map_err(RegistryError::io("Cannot write", dest))?;
            let actual = format!("sha256:{}", crate::verify::hex(&hasher.finalize()));
            if got != size {
                return Err(RegistryError::SizeMismatch {
                    host: self.target.host.clone(),
                    repository: self.target.repository.clone(),
                    digest: digest.to_string(),
                    expected: size,
                    actual: got,
                });
            }
            if actual != digest {
                return Err(RegistryError::DigestMismatch {
                    what: "blob",
                    host: self.target.host.clone(),
                    repository: self.target.repository.clone(),
                    digest: digest.to_string(),
                    actual,
                });
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(dest).await;
        }
        result
    }
}

/// A refusal with the registry's own error codes (`{"errors":[{"code","message"}]}`).
async fn refused(method: Method, url: &str, resp: Response) -> RegistryError {
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    let message = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| {
            v["errors"].as_array().map(|errs| {
                errs.iter()
                    .map(|e| {
                        format!(
                            "{}: {}",
                            e["code"].as_str().unwrap_or("ERROR"),
                            e["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
        })
        .unwrap_or_else(|| body.chars().take(200).collect());
    RegistryError::Refused {
        method: match method {
            Method::HEAD => "HEAD",
            Method::POST => "POST",
            Method::PUT => "PUT",
            _ => "GET",
        },
        url: url.to_string(),
        status,
        message,
    }
}
