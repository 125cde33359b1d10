//! The Hub's repo-management and upload API, in the requests `huggingface_hub` makes
//! (`HfApi.whoami`, `create_repo`, `update_repo_settings`, `model_info`, `list_repo_tree`,
//! `list_models`, the preupload / LFS batch / commit sequence of `create_commit`): one method
//! per request, no policy. [`crate::upload`] decides what to send.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{HubAnswer, Sibling, encode_path, encode_segment};
use crate::env::HubEnv;
use crate::error::HubError;

/// A Hub client for one endpoint and token.
#[derive(Debug, Clone)]
pub struct HubClient {
    /// The HTTP client every request goes through (shared connection pool).
    pub http: reqwest::Client,
    /// Endpoint and token; the token, when set, is sent as `Authorization: Bearer`.
    pub env: HubEnv,
}

/// `whoami-v2`: the account a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WhoAmI {
    /// The account's user name (the `org` part of repos it owns).
    pub name: String,
    /// Organizations the account belongs to (where it may also create repos).
    #[serde(default)]
    pub orgs: Vec<OrgRef>,
}

/// An organization in the `whoami-v2` answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OrgRef {
    /// The organization's name, as used in repo ids.
    pub name: String,
}

/// What `model_info` says about a repo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoMeta {
    /// The repo id (`org/name`).
    pub id: String,
    /// The full sha of the main branch's head commit.
    pub sha: String,
    /// Whether only the owner (and those granted access) can read the repo.
    #[serde(default)]
    pub private: bool,
    /// The repo's tags (from its card metadata and the Hub's own, e.g. `license:…`).
    #[serde(default)]
    pub tags: Vec<String>,
    /// When the repo last changed, as the Hub's ISO 8601 timestamp; `None` when not given.
    #[serde(rename = "lastModified", default)]
    pub last_modified: Option<String>,
    /// The Hub's recent download count; 0 when not given.
    #[serde(default)]
    pub downloads: u64,
    /// The repo's files at `sha`.
    #[serde(default)]
    pub siblings: Vec<Sibling>,
}

/// One entry of `list_repo_tree`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TreeEntry {
    /// `"file"` or `"directory"` (only files are returned by [`HubClient::tree`]).
    #[serde(rename = "type")]
    pub kind: String,
    /// Path relative to the repo root.
    pub path: String,
    /// Size in bytes (of the LFS pointer for an LFS file; see [`TreeEntry::lfs`]); 0 for a
    /// directory.
    #[serde(default)]
    pub size: u64,
    /// The git object id (for a file: the blob sha1).
    pub oid: String,
    /// Set for files stored in LFS.
    #[serde(default)]
    pub lfs: Option<TreeLfs>,
}

/// The `lfs` object of a [`TreeEntry`]: the content behind an LFS pointer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TreeLfs {
    /// sha256 of the content, lowercase hex.
    pub oid: String,
    /// Size of the content in bytes.
    pub size: u64,
}

/// One row of `list_models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRow {
    /// The repo id (`org/name`).
    pub id: String,
    /// Whether the repo is private.
    #[serde(default)]
    pub private: bool,
    /// The Hub's recent download count; 0 when not given.
    #[serde(default)]
    pub downloads: u64,
    /// The repo's tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// When the repo last changed (ISO 8601); `None` when not given.
    #[serde(rename = "lastModified", default)]
    pub last_modified: Option<String>,
}

/// The preupload answer for one file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct UploadMode {
    /// The file's path in the repo, as sent.
    pub path: String,
    /// `"lfs"` or `"regular"`: whether the file must go through the LFS batch API or inline in the
    /// commit.
    #[serde(rename = "uploadMode")]
    pub upload_mode: String,
    /// The Hub would ignore the file (e.g. by its `.gitignore`): it is not committed.
    #[serde(rename = "shouldIgnore", default)]
    pub should_ignore: bool,
    /// The remote file's oid at the revision: its sha256 when it is in LFS, its git blob sha1
    /// otherwise (what `huggingface_hub` compares to skip unchanged files).
    #[serde(default)]
    pub oid: Option<String>,
}

/// What preupload needs to know of a file: its path, size and first 512 bytes.
#[derive(Debug, Clone)]
pub struct PreuploadFile<'a> {
    /// Path in the repo.
    pub path: &'a str,
    /// Size in bytes.
    pub size: u64,
    /// The first 512 bytes (or the whole file if shorter), sent base64 so the Hub can choose the
    /// upload mode.
    pub sample: &'a [u8],
}

/// The LFS batch answer for one object.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BatchObject {
    /// The object's sha256, lowercase hex.
    pub oid: String,
    /// The object's size in bytes.
    pub size: u64,
    /// What to do with the object; `None` when the Hub already has it.
    #[serde(default)]
    pub actions: Option<BatchActions>,
    /// The Hub's per-object error, as it sent it; `Some` means the object cannot be uploaded.
    #[serde(default)]
    pub error: Option<Value>,
}

/// The `actions` of a [`BatchObject`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BatchActions {
    /// Where to PUT the content; `None` when the object is already stored.
    #[serde(default)]
    pub upload: Option<Action>,
    /// Where to POST the verification once uploaded; `None` when the Hub asks for none.
    #[serde(default)]
    pub verify: Option<Action>,
}

/// One LFS transfer action: a URL and the headers to send with it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Action {
    /// The URL to send the request to (often a presigned storage URL).
    pub href: String,
    /// Extra headers the request must carry (e.g. authorization for the storage); `None` when none.
    #[serde(default)]
    pub header: Option<std::collections::HashMap<String, String>>,
}

/// One commit operation, as the NDJSON payload spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOp {
    /// A regular file, sent inline (base64).
    File {
        /// Path in the repo.
        path: String,
        /// The file's whole content, sent inline.
        content: Vec<u8>,
    },
    /// An LFS file whose object was uploaded (or was already there).
    LfsFile {
        /// Path in the repo.
        path: String,
        /// The sha256 of the content, lowercase hex (the LFS object id).
        oid: String,
        /// Size of the content in bytes.
        size: u64,
    },
    /// Delete the file at `path` from the repo.
    Delete {
        /// Path in the repo.
        path: String,
    },
}

/// The commit payload (pure): one NDJSON line per item, the header first.
pub fn commit_payload(summary: &str, parent: Option<&str>, ops: &[CommitOp]) -> String {
    use base64::Engine as _;
    let mut header = json!({ "summary": summary, "description": "" });
    if let Some(p) = parent {
        header["parentCommit"] = json!(p);
    }
    let mut out = json!({ "key": "header", "value": header }).to_string();
    for op in ops {
        let line = match op {
            CommitOp::File { path, content } => json!({ "key": "file", "value": {
                "content": base64::engine::general_purpose::STANDARD.encode(content),
                "path": path, "encoding": "base64" } }),
            CommitOp::LfsFile { path, oid, size } => json!({ "key": "lfsFile", "value": {
                "path": path, "algo": "sha256", "oid": oid, "size": size } }),
            CommitOp::Delete { path } => json!({ "key": "deletedFile", "value": { "path": path } }),
        };
        out.push('\n');
        out.push_str(&line.to_string());
    }
    out.push('\n');
    out
}

impl HubClient {
    /// A client for `env`'s endpoint and token; no request is made yet.
    pub fn new(env: HubEnv) -> Self {
        HubClient {
            http: reqwest::Client::new(),
            env,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.env.endpoint)
    }

    fn auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.env.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Sends, classifies a refusal (the error code first, then the status) and returns the body.
    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
        repo: &str,
        rev: &str,
    ) -> Result<Vec<u8>, HubError> {
        let resp = self
            .auth(req)
            .send()
            .await
            .map_err(|source| HubError::Network {
                url: url.to_string(),
                source,
            })?;
        let status = resp.status().as_u16();
        let code = resp
            .headers()
            .get("x-error-code")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let header_msg = resp
            .headers()
            .get("x-error-message")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp
            .bytes()
            .await
            .map_err(|source| HubError::Network {
                url: url.to_string(),
                source,
            })?
            .to_vec();
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let answer = HubAnswer {
            status,
            error_code: code.as_deref(),
            token_sent: self.env.token.is_some(),
        };
        match answer.check(url, &self.env.endpoint, repo, rev) {
            Err(HubError::Http { url, status }) => {
                let message = header_msg
                    .or_else(|| {
                        serde_json::from_slice::<Value>(&body)
                            .ok()
                            .and_then(|v| v["error"].as_str().map(str::to_string))
                    })
                    .unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(200).collect());
                Err(HubError::Refused {
                    url,
                    status,
                    message,
                })
            }
            other => other.map(|()| body),
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
        repo: &str,
        rev: &str,
    ) -> Result<T, HubError> {
        let body = self.send(req, url, repo, rev).await?;
        serde_json::from_slice(&body).map_err(|e| HubError::BadResponse {
            url: url.to_string(),
            detail: e.to_string(),
        })
    }

    /// `whoami`: the token's account (`TokenRejected` for a token the Hub does not know).
    pub async fn whoami(&self) -> Result<WhoAmI, HubError> {
        let url = self.url("/api/whoami-v2");
        self.json(self.http.get(&url), &url, "(whoami)", "-").await
    }

    /// `model_info(repo, files_metadata=True)` at `main`; `None` when the repo does not exist (or is invisible to
    /// this token: the Hub does not tell the two apart).
    pub async fn repo_meta(&self, repo: &str) -> Result<Option<RepoMeta>, HubError> {
        let url = self.url(&format!("/api/models/{repo}?blobs=true"));
        match self.json(self.http.get(&url), &url, repo, "main").await {
            Ok(m) => Ok(Some(m)),
            Err(HubError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `create_repo(repo, private=…)`; `false` when it already exists (409).
    pub async fn create_repo(&self, repo: &str, private: bool) -> Result<bool, HubError> {
        let url = self.url("/api/repos/create");
        let (org, name) = repo.split_once('/').unwrap_or(("", repo));
        let mut body = json!({ "name": name, "private": private });
        if !org.is_empty() {
            body["organization"] = json!(org);
        }
        match self
            .send(self.http.post(&url).json(&body), &url, repo, "main")
            .await
        {
            Ok(_) => Ok(true),
            Err(HubError::Refused { status: 409, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `duplicate_repo(from, to_id=to)`: a server-side copy (no bytes pass through here) that
    /// keeps the source's visibility; `false` when `to` already exists (409).
    pub async fn duplicate_repo(&self, from: &str, to: &str) -> Result<bool, HubError> {
        let url = self.url(&format!("/api/models/{from}/duplicate"));
        let body = json!({ "repository": to });
        match self
            .send(self.http.post(&url).json(&body), &url, from, "main")
            .await
        {
            Ok(_) => Ok(true),
            Err(HubError::Refused { status: 409, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `update_repo_settings(repo, private=…)`.
    pub async fn set_private(&self, repo: &str, private: bool) -> Result<(), HubError> {
        let url = self.url(&format!("/api/models/{repo}/settings"));
        let body = json!({ "private": private });
        self.send(self.http.put(&url).json(&body), &url, repo, "main")
            .await
            .map(|_| ())
    }

    /// `list_repo_tree(repo, revision=rev, recursive=True)`: files only.
    pub async fn tree(&self, repo: &str, rev: &str) -> Result<Vec<TreeEntry>, HubError> {
        let url = self.url(&format!(
            "/api/models/{repo}/tree/{}?recursive=true",
            encode_segment(rev)
        ));
        let all: Vec<TreeEntry> = self.json(self.http.get(&url), &url, repo, rev).await?;
        Ok(all.into_iter().filter(|e| e.kind == "file").collect())
    }

    /// The bytes of one (small) file at `rev` (`resolve`).
    pub async fn read_file(&self, repo: &str, rev: &str, path: &str) -> Result<Vec<u8>, HubError> {
        let url = crate::api::resolve_url(&self.env, repo, rev, path);
        self.send(self.http.get(&url), &url, repo, rev).await
    }

    /// `list_models(filter=tags, search=…, limit=…, sort="lastModified", direction=-1)`: the
    /// newest first. The Hub orders nothing by default, so the order is asked for
    /// (`direction=-1` is what huggingface_hub sent before descending became the only order).
    pub async fn list_models(
        &self,
        tags: &[&str],
        search: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ModelRow>, HubError> {
        let mut q: Vec<(&str, String)> = tags.iter().map(|t| ("filter", t.to_string())).collect();
        if let Some(s) = search {
            q.push(("search", s.to_string()));
        }
        q.push(("sort", "lastModified".into()));
        q.push(("direction", "-1".into()));
        q.push(("limit", limit.to_string()));
        q.push(("full", "true".into()));
        let url = self.url("/api/models");
        self.json(self.http.get(&url).query(&q), &url, "(search)", "-")
            .await
    }

    /// `preupload`: how each file is to be sent, and the remote file's oid.
    pub async fn preupload(
        &self,
        repo: &str,
        rev: &str,
        files: &[PreuploadFile<'_>],
    ) -> Result<Vec<UploadMode>, HubError> {
        use base64::Engine as _;
        let url = self.url(&format!(
            "/api/models/{repo}/preupload/{}",
            encode_segment(rev)
        ));
        let mut out = Vec::new();
        for chunk in files.chunks(256) {
            let body = json!({ "files": chunk.iter().map(|f| json!({
                "path": f.path,
                "sample": base64::engine::general_purpose::STANDARD.encode(f.sample),
                "size": f.size,
            })).collect::<Vec<_>>() });
            #[derive(Deserialize)]
            struct Answer {
                files: Vec<UploadMode>,
            }
            let a: Answer = self
                .json(self.http.post(&url).json(&body), &url, repo, rev)
                .await?;
            out.extend(a.files);
        }
        Ok(out)
    }

    /// The LFS batch API (`upload`): which objects the repo lacks, and where to send them.
    pub async fn lfs_batch(
        &self,
        repo: &str,
        rev: &str,
        objects: &[(String, u64)],
    ) -> Result<Vec<BatchObject>, HubError> {
        let url = self.url(&format!("/{repo}.git/info/lfs/objects/batch"));
        let mut out = Vec::new();
        for chunk in objects.chunks(256) {
            let body = json!({
                "operation": "upload",
                "transfers": ["basic"],
                "objects": chunk.iter().map(|(oid, size)| json!({ "oid": oid, "size": size })).collect::<Vec<_>>(),
                "hash_algo": "sha256",
                "ref": { "name": rev },
            });
            let req = self
                .http
                .post(&url)
                .header("Accept", "application/vnd.git-lfs+json")
                .header("Content-Type", "application/vnd.git-lfs+json")
                .body(body.to_string());
            #[derive(Deserialize)]
            struct Answer {
                objects: Vec<BatchObject>,
            }
            let a: Answer = self.json(req, &url, repo, rev).await?;
            out.extend(a.objects);
        }
        Ok(out)
    }

    /// The basic-transfer upload: `PUT` the bytes to the href (no token: the href is the
    /// credential, as the Hub's presigned storage URLs are).
    pub async fn lfs_put(
        &self,
        repo: &str,
        action: &Action,
        size: u64,
        body: reqwest::Body,
    ) -> Result<(), HubError> {
        let mut req = self
            .http
            .put(&action.href)
            .header(reqwest::header::CONTENT_LENGTH, size)
            .body(body);
        for (k, v) in action.header.iter().flatten() {
            req = req.header(k, v);
        }
        let resp = req.send().await.map_err(|source| HubError::Network {
            url: action.href.clone(),
            source,
        })?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let message = resp.text().await.unwrap_or_default();
        let _ = repo;
        Err(HubError::Refused {
            url: action.href.clone(),
            status,
            message,
        })
    }

    /// The verify action (`{oid, size}`, with the token).
    pub async fn lfs_verify(
        &self,
        repo: &str,
        action: &Action,
        oid: &str,
        size: u64,
    ) -> Result<(), HubError> {
        let body = json!({ "oid": oid, "size": size });
        self.send(
            self.http.post(&action.href).json(&body),
            &action.href,
            repo,
            "main",
        )
        .await
        .map(|_| ())
    }

    /// `create_commit`: the NDJSON payload; returns the new commit id.
    pub async fn commit(
        &self,
        repo: &str,
        rev: &str,
        summary: &str,
        parent: Option<&str>,
        ops: &[CommitOp],
    ) -> Result<String, HubError> {
        let url = self.url(&format!(
            "/api/models/{repo}/commit/{}",
            encode_segment(rev)
        ));
        let req = self
            .http
            .post(&url)
            .header("Content-Type", "application/x-ndjson")
            .body(commit_payload(summary, parent, ops));
        #[derive(Deserialize)]
        struct Answer {
            #[serde(rename = "commitOid")]
            commit_oid: String,
        }
        let a: Answer = self.json(req, &url, repo, rev).await?;
        Ok(a.commit_oid)
    }
}

/// `encode_path` re-exported for callers building resolve URLs.
pub fn repo_path(p: &str) -> String {
    encode_path(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_payload_is_the_ndjson_huggingface_hub_sends() {
        let text = commit_payload(
            "push",
            Some("abc"),
            &[
                CommitOp::File {
                    path: "README.md".into(),
                    content: b"hi".to_vec(),
                },
                CommitOp::LfsFile {
                    path: "image/blobs/sha256/x".into(),
                    oid: "0f".into(),
                    size: 3,
                },
                CommitOp::Delete {
                    path: "code/old.py".into(),
                },
            ],
        );
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0],
            json!({"key":"header","value":{"summary":"push","description":"","parentCommit":"abc"}})
        );
        assert_eq!(
            lines[1],
            json!({"key":"file","value":{"content":"aGk=","path":"README.md","encoding":"base64"}})
        );
        assert_eq!(
            lines[2],
            json!({"key":"lfsFile","value":{"path":"image/blobs/sha256/x","algo":"sha256","oid":"0f","size":3}})
        );
        assert_eq!(
            lines[3],
            json!({"key":"deletedFile","value":{"path":"code/old.py"}})
        );
    }
}
