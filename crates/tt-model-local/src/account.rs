//! The Hub account this machine acts as: the token store `huggingface_hub` uses
//! (`$HF_HOME/token`), and the login and logout use cases over it. The CLI only reads the
//! token (argument, pipe or hidden prompt) and renders the outcome.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use tt_model_hub::env::HubEnv;
use tt_model_hub::hub::HubClient;

use crate::{Local, LocalError};

/// A login that went through: who the token belongs to and where it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedIn {
    /// The account's user name, as the Hub's `whoami` gives it.
    pub name: String,
    /// The token file written.
    pub path: PathBuf,
}

/// What a logout found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoggedOut {
    /// The token file was removed.
    Removed(PathBuf),
    /// No token was stored there.
    NotLoggedIn(PathBuf),
}

impl Local {
    /// The token file `huggingface_hub` reads: `$HF_HOME/token`.
    pub fn token_path(&self) -> PathBuf {
        self.hub().hf_home.join("token")
    }

    /// Checks `token` with the Hub's `whoami` and, when the Hub knows it, stores it (mode
    /// 0600, temp file + rename). Surrounding whitespace (a pasted newline) is not part of
    /// it; an empty token is refused before anything is asked. A token the Hub refuses is
    /// the Hub's error, and nothing is stored.
    pub async fn login(&self, token: &str) -> Result<LoggedIn, LocalError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(LocalError::refused(
                "token",
                "no token given: paste a token from https://huggingface.co/settings/tokens, or pipe it in (tt-model login < token.txt)",
            ));
        }
        let env = HubEnv {
            token: Some(token.to_string()),
            ..self.hub().clone()
        };
        let who = HubClient::new(env)
            .whoami()
            .await
            .map_err(crate::hub_access::consequence("the token was not stored"))?;
        let path = self.token_path();
        store_token(&path, token)?;
        Ok(LoggedIn {
            name: who.name,
            path,
        })
    }

    /// Removes the stored token, if any.
    pub fn logout(&self) -> Result<LoggedOut, LocalError> {
        let path = self.token_path();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(LoggedOut::Removed(path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LoggedOut::NotLoggedIn(path)),
            Err(detail) => Err(LocalError::Io {
                action: "remove",
                path,
                detail,
            }),
        }
    }
}

/// Writes `token` to `path` with mode 0600 through a temp file and a rename, so a reader
/// never sees half a token and a failed write leaves the old one.
fn store_token(path: &Path, token: &str) -> Result<(), LocalError> {
    let dir = path.parent().expect("the token file has a parent");
    std::fs::create_dir_all(dir).map_err(|detail| LocalError::Io {
        action: "create",
        path: dir.to_path_buf(),
        detail,
    })?;
    let tmp = dir.join(format!(".token.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|detail| {
        let _ = std::fs::remove_file(&tmp);
        LocalError::Io {
            action: "write",
            path: path.to_path_buf(),
            detail,
        }
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn local(dir: &Path) -> Local {
        let hub = HubEnv {
            endpoint: "http://127.0.0.1:9".into(),
            hf_home: dir.join("hf"),
            hub_cache: dir.join("hf/hub"),
            token: None,
        };
        Local::new(dir.join("state"), hub)
    }

    #[test]
    fn a_stored_token_is_private_and_replaces_the_old_one_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hf/token");
        store_token(&path, "hf_old").unwrap();
        store_token(&path, "hf_new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hf_new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["token"], "no temp file is left");
    }

    #[test]
    fn logout_says_whether_a_token_was_stored() {
        let dir = tempfile::tempdir().unwrap();
        let local = local(dir.path());
        let path = local.token_path();
        assert_eq!(
            local.logout().unwrap(),
            LoggedOut::NotLoggedIn(path.clone())
        );
        store_token(&path, "hf_x").unwrap();
        assert_eq!(local.logout().unwrap(), LoggedOut::Removed(path.clone()));
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn an_empty_token_is_refused_before_the_hub_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        // The endpoint is a closed port: a request would be a connection error.
        let err = local(dir.path()).login(" \n").await.unwrap_err();
        assert!(
            matches!(err, LocalError::Refused { field: "token", .. }),
            "{err:?}"
        );
        assert!(!local(dir.path()).token_path().exists());
    }
}
