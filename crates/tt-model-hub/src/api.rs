//! The two Hub endpoints serve needs, in their real URL shapes:
//! `GET /api/models/{repo}/revision/{rev}?blobs=true` (commit + file listing with sizes, git blob
//! ids and LFS sha256s; this is `HfApi.repo_info(files_metadata=True)`) and
//! `GET /{repo}/resolve/{commit}/{file}` (the bytes; see [`crate::download`]).

use serde::{Deserialize, Serialize};

use crate::env::HubEnv;
use crate::error::HubError;

/// `lfs` of a sibling: the sha256 of the real content (the Hub spells it `sha256` here and
/// `oid` in the tree API; both are accepted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LfsInfo {
    #[serde(alias = "oid")]
    pub sha256: String,
    pub size: u64,
    #[serde(
        rename = "pointerSize",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pointer_size: Option<u64>,
}

/// One file of the repo at the revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sibling {
    pub rfilename: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(rename = "blobId", default, skip_serializing_if = "Option::is_none")]
    pub blob_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lfs: Option<LfsInfo>,
}

impl Sibling {
    /// The cache's blob name: the LFS sha256, or the git blob id for a regular file
    /// (what Python stores as the etag).
    pub fn etag(&self) -> Option<&str> {
        self.lfs
            .as_ref()
            .map(|l| l.sha256.as_str())
            .or(self.blob_id.as_deref())
    }
    pub fn byte_size(&self) -> Option<u64> {
        self.lfs.as_ref().map(|l| l.size).or(self.size)
    }
}

/// `GET /api/models/{repo}/revision/{rev}` (subset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoInfo {
    pub id: String,
    pub sha: String,
    #[serde(default)]
    pub siblings: Vec<Sibling>,
}

/// Percent-encode one URL path segment (RFC 3986 unreserved characters pass through).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Encode a repo-relative path, keeping its `/` separators.
pub fn encode_path(p: &str) -> String {
    p.split('/')
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
}

pub fn revision_url(env: &HubEnv, repo: &str, rev: &str) -> String {
    format!(
        "{}/api/models/{}/revision/{}?blobs=true",
        env.endpoint,
        repo,
        encode_segment(rev)
    )
}

pub fn resolve_url(env: &HubEnv, repo: &str, rev: &str, file: &str) -> String {
    format!(
        "{}/{}/resolve/{}/{}",
        env.endpoint,
        repo,
        encode_segment(rev),
        encode_path(file)
    )
}

/// Fetch the commit and file listing of `repo` at `rev`.
pub async fn repo_info(
    http: &reqwest::Client,
    env: &HubEnv,
    repo: &str,
    rev: &str,
) -> Result<RepoInfo, HubError> {
    let url = revision_url(env, repo, rev);
    let mut req = http.get(&url);
    if let Some(t) = &env.token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|source| HubError::Network {
        url: url.clone(),
        source,
    })?;
    check_status(&resp, &url, env, repo, rev)?;
    let text = resp.text().await.map_err(|source| HubError::Network {
        url: url.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| HubError::BadResponse {
        url,
        detail: e.to_string(),
    })
}

pub(crate) fn check_status(
    resp: &reqwest::Response,
    url: &str,
    env: &HubEnv,
    repo: &str,
    rev: &str,
) -> Result<(), HubError> {
    let s = resp.status().as_u16();
    match s {
        200..=299 => Ok(()),
        401 | 403 => Err(HubError::Unauthorized {
            repo: repo.to_string(),
            status: s,
        }),
        404 => Err(HubError::NotFound {
            repo: repo.to_string(),
            revision: rev.to_string(),
            endpoint: env.endpoint.clone(),
        }),
        _ => Err(HubError::Http {
            url: url.to_string(),
            status: s,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_parses_both_lfs_spellings() {
        let j = r#"{"id":"o/n","sha":"abc","siblings":[
            {"rfilename":"config.json","size":10,"blobId":"b1"},
            {"rfilename":"m.safetensors","size":99,"blobId":"b2","lfs":{"sha256":"s2","size":99,"pointerSize":130}},
            {"rfilename":"x.bin","lfs":{"oid":"s3","size":5}}]}"#;
        let info: RepoInfo = serde_json::from_str(j).unwrap();
        assert_eq!(info.siblings[0].etag(), Some("b1"));
        assert_eq!(info.siblings[1].etag(), Some("s2"));
        assert_eq!(info.siblings[2].etag(), Some("s3"));
        assert_eq!(info.siblings[2].byte_size(), Some(5));
    }

    #[test]
    fn urls_have_the_hub_shapes() {
        let env = HubEnv {
            endpoint: "http://h".into(),
            hf_home: "/x".into(),
            hub_cache: "/x/hub".into(),
            token: None,
        };
        assert_eq!(
            revision_url(&env, "o/n", "main"),
            "http://h/api/models/o/n/revision/main?blobs=true"
        );
        assert_eq!(
            resolve_url(&env, "o/n", "refs/pr/1", "a b/c.json"),
            "http://h/o/n/resolve/refs%2Fpr%2F1/a%20b/c.json"
        );
    }
}
