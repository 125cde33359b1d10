//! Who may see and write what: the state every handler shares, the caller a request's token
//! names, and the Hub's answers to a caller that may not (401/403/404 as huggingface.co gives
//! them).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

use super::error;
use super::seed::{HubUser, SeenRequest};
use super::state::{Commit, Repo, Store};

#[derive(Clone)]
pub(crate) struct Shared {
    pub repos: Arc<Mutex<HashMap<String, Repo>>>,
    pub store: Arc<Store>,
    pub users: Arc<Vec<HubUser>>,
    /// Every request so far, in order.
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
    /// Request body bytes received by the upload routes (LFS PUTs and commit payloads).
    pub received: Arc<AtomicU64>,
    /// Disables the upload routes' answers after this many LFS bytes (an interrupted push).
    pub cut_after: Arc<AtomicU64>,
    /// The `X-Repo-Commit` resolves claim instead of the commit they serve, when set.
    pub claimed_commit: Arc<Mutex<Option<String>>>,
}

/// Who a request comes from.
pub(crate) enum Caller<'a> {
    Anonymous,
    User(&'a HubUser),
    /// A token the server does not know (the Hub answers 401).
    BadToken,
}

impl Shared {
    pub fn caller(&self, h: &HeaderMap) -> Caller<'_> {
        let Some(auth) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return Caller::Anonymous;
        };
        let token = auth.strip_prefix("Bearer ").unwrap_or(auth);
        match self.users.iter().find(|u| u.token == token) {
            Some(u) => Caller::User(u),
            None => Caller::BadToken,
        }
    }

    /// The repo `id` as `caller` may see it, or the Hub's refusal.
    pub fn readable(&self, id: &str, h: &HeaderMap) -> Result<(), Response> {
        let repos = self.repos.lock().unwrap();
        let caller = self.caller(h);
        if matches!(caller, Caller::BadToken) {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid credentials in Authorization header",
            ));
        }
        let visible = match repos.get(id) {
            None => false,
            Some(r) if !r.private => true,
            Some(_) => match caller {
                Caller::User(u) => u.can_write(id.split('/').next().unwrap_or("")),
                _ => false,
            },
        };
        if visible {
            return Ok(());
        }
        // huggingface.co answers an anonymous request for an unknown (or private) repo with
        // 401, not 404; only the error code says what it is.
        let status = match caller {
            Caller::Anonymous => StatusCode::UNAUTHORIZED,
            _ => StatusCode::NOT_FOUND,
        };
        Err(error(status, Some("RepoNotFound"), "Repository not found"))
    }

    /// The user behind a write to `namespace`, or the Hub's refusal.
    pub fn writer(&self, namespace: &str, h: &HeaderMap) -> Result<HubUser, Response> {
        match self.caller(h) {
            Caller::Anonymous => Err(error(
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid username or password.",
            )),
            Caller::BadToken => Err(error(
                StatusCode::UNAUTHORIZED,
                None,
                "Invalid credentials in Authorization header",
            )),
            Caller::User(u) if u.can_write(namespace) => Ok(u.clone()),
            Caller::User(u) => Err(error(
                StatusCode::FORBIDDEN,
                None,
                &format!(
                    "You don't have the rights to create a model under the namespace \"{namespace}\" ({} is not a member)",
                    u.name
                ),
            )),
        }
    }

    /// The commit `rev` of `id` names, for a caller already checked by [`Shared::readable`].
    pub fn commit(&self, id: &str, rev: &str) -> Option<Arc<Commit>> {
        self.repos.lock().unwrap().get(id)?.resolve(rev)
    }

    /// The commit `rev` of `id` names, for a caller that may see the repo; else the Hub's
    /// refusal (`RepoNotFound`, or `RevisionNotFound` saying `missing`).
    pub fn readable_commit(
        &self,
        id: &str,
        rev: &str,
        h: &HeaderMap,
        missing: &str,
    ) -> Result<Arc<Commit>, Response> {
        self.readable(id, h)?;
        self.commit(id, rev)
            .ok_or_else(|| error(StatusCode::NOT_FOUND, Some("RevisionNotFound"), missing))
    }

    /// A write to `id` in `namespace`: the caller sees the repo and may write there.
    pub fn writable(&self, id: &str, namespace: &str, h: &HeaderMap) -> Result<(), Response> {
        self.readable(id, h)?;
        self.writer(namespace, h).map(|_| ())
    }
}
