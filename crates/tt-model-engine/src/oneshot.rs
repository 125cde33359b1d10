//! Run one command to completion in a throwaway container and collect its output.
//!
//! Used for checks inside a finished image (package verification, freezing a lock): the
//! container gets no network, no devices and no mounts unless asked, runs under docker-init
//! so signals behave, and is always removed afterwards.

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptions, LogsOptions, RemoveContainerOptions};
use futures_util::StreamExt;

use crate::client::Client;
use crate::error::EngineError;

/// A command to run in an image.
#[derive(Debug, Clone, Default)]
pub struct OneShot {
    /// The image reference or id.
    pub image: String,
    /// Replaces the image's entrypoint when set (use `[]`-like `Some(vec![])` to clear it).
    pub entrypoint: Option<Vec<String>>,
    /// The command (argv).
    pub cmd: Vec<String>,
    /// `uid[:gid]` or a user name; the image default when `None`.
    pub user: Option<String>,
    /// Extra environment, `K=V`.
    pub env: Vec<String>,
    /// Network mode; `none` when `None`, so checks are hermetic by default.
    pub network_mode: Option<String>,
    /// A label put on the container so leftovers can be found (`key=value`).
    pub label: Option<(String, String)>,
}

/// How a one-shot run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneShotResult {
    /// The exit status of the command.
    pub exit_code: i64,
    /// stdout and stderr interleaved as the engine recorded them.
    pub output: String,
}

impl OneShot {
    /// The engine's create request for this run: a pure function of the spec, so what the
    /// container may reach (user, network, devices, mounts) can be asserted without an engine.
    pub fn create_body(&self) -> ContainerCreateBody {
        let spec = self;
        ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: spec.entrypoint.clone(),
            cmd: Some(spec.cmd.clone()),
            user: spec.user.clone(),
            env: Some(spec.env.clone()),
            network_disabled: Some(spec.network_mode.as_deref().unwrap_or("none") == "none"),
            labels: spec
                .label
                .clone()
                .map(|(k, v)| std::iter::once((k, v)).collect()),
            host_config: Some(HostConfig {
                network_mode: Some(spec.network_mode.clone().unwrap_or_else(|| "none".into())),
                init: Some(true),
                devices: Some(Vec::new()),
                binds: Some(Vec::new()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

impl Client {
    /// Runs `spec` to completion and removes the container.
    pub async fn run_to_completion(&self, spec: &OneShot) -> Result<OneShotResult, EngineError> {
        let body = spec.create_body();
        let created = self
            .docker()
            .create_container(None::<CreateContainerOptions>, body)
            .await
            .map_err(|source| EngineError::Create {
                name: spec.image.clone(),
                source,
            })?;
        let id = created.id;
        let result = self.run_created(&id).await;
        let remove = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        let removed = self
            .docker()
            .remove_container(&id, Some(remove))
            .await
            .map_err(|source| EngineError::Remove {
                name: id.clone(),
                source,
            });
        let result = result?;
        removed?;
        Ok(result)
    }

    async fn run_created(&self, id: &str) -> Result<OneShotResult, EngineError> {
        self.docker()
            .start_container(id, None)
            .await
            .map_err(|source| EngineError::Start {
                name: id.to_string(),
                source,
            })?;
        let exit_code = self.wait_exit(id).await?;
        let mut logs = self.docker().logs(
            id,
            Some(LogsOptions {
                stdout: true,
                stderr: true,
                follow: false,
                tail: "all".into(),
                ..Default::default()
            }),
        );
        let mut output = String::new();
        while let Some(frame) = logs.next().await {
            let frame = frame.map_err(|source| EngineError::Logs {
                name: id.to_string(),
                source,
            })?;
            output.push_str(&String::from_utf8_lossy(&frame.into_bytes()));
        }
        Ok(OneShotResult { exit_code, output })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_spec_is_hermetic() {
        let body = OneShot {
            image: "img".into(),
            ..Default::default()
        }
        .create_body();
        let host = body.host_config.expect("host config");
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(host.devices, Some(vec![]));
        assert_eq!(host.binds, Some(vec![]));
        assert_eq!(host.privileged, None);
        assert_eq!(host.init, Some(true));
    }
}
