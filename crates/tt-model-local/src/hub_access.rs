//! What every Hub use case shares: the client for `HF_ENDPOINT` and the token, the repo id
//! check, and a Hub or registry failure with what it means for the user's repo
//! ([`LocalError::Consequence`], the diagnosis card's consequence).

use tt_model_hub::hub::HubClient;

use crate::{Local, LocalError};

impl Local {
    /// A Hub client with this machine's endpoint and token; with `need_token`, refused when
    /// there is no token (a write).
    pub fn hub_client(&self, need_token: bool) -> Result<HubClient, LocalError> {
        let env = self.hub().clone();
        if need_token && env.token.is_none() {
            return Err(LocalError::refused(
                "token",
                format!(
                    "this needs a Hub token with write access to the repo: run `tt-model login` (stored in {}), or set HF_TOKEN",
                    env.hf_home.join("token").display()
                ),
            ));
        }
        Ok(HubClient::new(env))
    }
}

/// Whether a repo id has the `ns/name` shape the Hub accepts (both parts required here).
pub fn check_repo_id(id: &str) -> Result<(), LocalError> {
    if !id.contains('/') || tt_model_hub::cache::validate_repo_id(id).is_err() {
        return Err(LocalError::refused(
            "repo",
            format!(
                "{id} is not a repo id: expected <namespace>/<name> (letters, digits, '-', '_', '.')"
            ),
        ));
    }
    Ok(())
}

/// Wraps a Hub or registry error with what it means (`what`: "nothing was sent; the repo is
/// unchanged").
pub fn consequence<E: std::error::Error + Send + Sync + 'static>(
    what: &str,
) -> impl FnOnce(E) -> LocalError + '_ {
    move |e| LocalError::Consequence {
        consequence: what.to_string(),
        source: Box::new(e),
    }
}
