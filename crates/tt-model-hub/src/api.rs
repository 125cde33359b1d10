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
    /// Lowercase hex sha256 of the file's real content (the blob name in the cache).
    #[serde(alias = "oid")]
    pub sha256: String,
    /// Size in bytes of the real content (not of the pointer file).
    pub size: u64,
    /// Size in bytes of the git LFS pointer file stored in the repo instead of the content; the Hub
    /// may omit it.
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
    /// Path of the file relative to the repo root, `/`-separated (the Hub's `rfilename`).
    pub rfilename: String,
    /// Size in bytes as the Hub lists it; `None` when the listing omits it (use
    /// [`Sibling::byte_size`], which prefers the LFS size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The git blob sha1 (`blobId`) of the file as committed: for an LFS file, that of its pointer.
    #[serde(rename = "blobId", default, skip_serializing_if = "Option::is_none")]
    pub blob_id: Option<String>,
    /// Present only for files stored in LFS.
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
    /// The content's size in bytes: the LFS size for an LFS file, else the listed size; `None` when
    /// the Hub gave neither.
    pub fn byte_size(&self) -> Option<u64> {
        self.lfs.as_ref().map(|l| l.size).or(self.size)
    }
}

/// `GET /api/models/{repo}/revision/{rev}` (subset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoInfo {
    /// The repo id (`org/name`) as the Hub spells it.
    pub id: String,
    /// The full commit sha the revision resolved to.
    pub sha: String,
    /// Every file of the repo at that commit; empty when the Hub omits the list.
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

/// `{endpoint}/api/models/{repo}/revision/{rev}?blobs=true`: commit and file listing (with blob ids
/// and LFS info) for `repo` at `rev`.
pub fn revision_url(env: &HubEnv, repo: &str, rev: &str) -> String {
    format!(
        "{}/api/models/{}/revision/{}?blobs=true",
        env.endpoint,
        repo,
        encode_segment(rev)
    )
}

/// `{endpoint}/{repo}/resolve/{rev}/{file}`: the bytes of one file at `rev` (normally a pinned
/// commit).
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
    let code = resp
        .headers()
        .get("x-error-code")
        .and_then(|v| v.to_str().ok());
    let answer = HubAnswer {
        status: resp.status().as_u16(),
        error_code: code,
        token_sent: env.token.is_some(),
    };
    answer.check(url, &env.endpoint, repo, rev)
}

/// What the Hub said about a request, as far as classifying a refusal goes.
#[derive(Debug, Clone, Copy)]
pub struct HubAnswer<'a> {
    /// The HTTP status code.
    pub status: u16,
    /// The `X-Error-Code` header (`RepoNotFound`, `GatedRepo`, `EntryNotFound`, …).
    pub error_code: Option<&'a str>,
    /// Whether the request carried a token.
    pub token_sent: bool,
}

impl HubAnswer<'_> {
    /// The error code decides before the status, as in the original's `classify_hub_error`:
    /// the Hub answers an anonymous request for a repo that does not exist with 401 and
    /// `RepoNotFound`, exactly as for a private one, so that 401 says nothing about gating.
    pub fn check(&self, url: &str, endpoint: &str, repo: &str, rev: &str) -> Result<(), HubError> {
        let (repo, status) = (repo.to_string(), self.status);
        match (self.status, self.error_code) {
            (200..=299, _) => Ok(()),
            (_, Some("RepoNotFound")) | (404, _) => Err(HubError::NotFound {
                repo,
                revision: rev.to_string(),
                endpoint: endpoint.to_string(),
                status,
            }),
            (_, Some("GatedRepo")) => Err(HubError::Gated { repo, status }),
            (401, _) if self.token_sent => Err(HubError::TokenRejected { repo }),
            (401 | 403, _) => Err(HubError::Unauthorized { repo, status }),
            _ => Err(HubError::Http {
                url: url.to_string(),
                status,
            }),
        }
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

    fn classify(status: u16, error_code: Option<&str>, token_sent: bool) -> HubError {
        HubAnswer {
            status,
            error_code,
            token_sent,
        }
        .check("http://h/x", "http://h", "o/n", "main")
        .unwrap_err()
    }

    /// The original's classification matrix: the error code first, then the status.
    #[test]
    fn refusals_are_classified_by_error_code_then_status() {
        // An anonymous 401 with RepoNotFound: the repo may simply not exist.
        let e = classify(401, Some("RepoNotFound"), false);
        assert!(matches!(e, HubError::NotFound { status: 401, .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("no such repo, or no access"), "{text}");
        assert!(!text.contains("gated"), "{text}");
        assert!(matches!(
            classify(404, Some("RepoNotFound"), true),
            HubError::NotFound { status: 404, .. }
        ));
        assert!(matches!(
            classify(404, None, false),
            HubError::NotFound { .. }
        ));
        assert!(matches!(
            classify(403, Some("GatedRepo"), true),
            HubError::Gated { .. }
        ));
        assert!(matches!(
            classify(401, None, true),
            HubError::TokenRejected { .. }
        ));
        assert!(matches!(
            classify(401, None, false),
            HubError::Unauthorized { status: 401, .. }
        ));
        assert!(matches!(
            classify(403, None, true),
            HubError::Unauthorized { status: 403, .. }
        ));
        assert!(matches!(
            classify(500, None, true),
            HubError::Http { status: 500, .. }
        ));
        assert!(
            HubAnswer {
                status: 206,
                error_code: None,
                token_sent: false
            }
            .check("u", "e", "o/n", "main")
            .is_ok()
        );
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
