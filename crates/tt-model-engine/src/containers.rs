//! Served containers: create + start from a [`RunSpec`], inspect, list ours, stop with grace,
//! remove, the host-wide claim scan (the facts `tt-model-local`'s device rules read), and the scoped chip reset.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bollard::models::{ContainerCreateBody, DeviceMapping, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, ListContainersOptions, RemoveContainerOptions,
    StopContainerOptions, WaitContainerOptions,
};
use futures_util::StreamExt;

use crate::client::Client;
use crate::error::EngineError;
use crate::run_spec::{DEV_TENSTORRENT, HUGEPAGES_1G, RunSpec};
use tt_model_oci::labels;

/// The package label of the short-lived container [`Client::reset_chips`] runs `tt-smi -r` in
/// (listings leave it out).
pub const RESET_PACKAGE: &str = "tt-smi-reset";

/// What we read back about a container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerInfo {
    /// The full container id (64 hex).
    pub id: String,
    /// Without the leading `/`.
    pub name: String,
    /// The image reference the container was created from (its config's `Image`).
    pub image: String,
    /// `created`, `running`, `exited`, …
    pub status: String,
    /// Whether the engine reports it running now.
    pub running: bool,
    /// The exit status of the last run; `None` when the engine does not report one (never started).
    pub exit_code: Option<i64>,
    /// The kernel OOM killer ended it.
    pub oom_killed: bool,
    /// RFC 3339, as the engine reports it.
    pub started_at: Option<String>,
    /// When the last run ended (RFC 3339); `None` while running or never started.
    pub finished_at: Option<String>,
    /// When the container was created (RFC 3339).
    pub created_at: Option<String>,
    /// The container's labels (ours are in [`crate::labels`]).
    pub labels: BTreeMap<String, String>,
}

impl ContainerInfo {
    /// The value of label `key`, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopInfo {
    /// The container was running when the stop began (`false` also when it did not exist).
    pub was_running: bool,
    /// Its exit status after the stop (137: killed after the grace period); `None` when unknown.
    pub exit_code: Option<i64>,
}

impl StopInfo {
    /// A running container that ended with 137 was SIGKILLed after the grace period: the
    /// mesh was not closed and the chips may need a reset.
    pub fn dirty(&self) -> bool {
        self.was_running && self.exit_code == Some(137)
    }
}

fn info_from_inspect(r: bollard::models::ContainerInspectResponse) -> ContainerInfo {
    let state = r.state.unwrap_or_default();
    let config = r.config.unwrap_or_default();
    let nonzero_date = |d: Option<String>| d.filter(|s| !s.starts_with("0001-"));
    ContainerInfo {
        id: r.id.unwrap_or_default(),
        name: r
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        image: config.image.unwrap_or_default(),
        status: state.status.map(|s| s.to_string()).unwrap_or_default(),
        running: state.running.unwrap_or(false),
        exit_code: state.exit_code,
        oom_killed: state.oom_killed.unwrap_or(false),
        started_at: nonzero_date(state.started_at),
        finished_at: nonzero_date(state.finished_at),
        created_at: nonzero_date(r.created),
        labels: config.labels.unwrap_or_default().into_iter().collect(),
    }
}

/// What the scan needs to know about one running container.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerClaim {
    /// The full container id.
    pub id: String,
    /// The container name as the engine lists it (may start with `/`), matched by
    /// `container:<name>` IPC modes.
    pub name: String,
    /// `HostConfig.IpcMode`: `host`, `private`, `shareable`, `container:<id|name>`, …
    pub ipc_mode: String,
    /// The container runs with `--privileged` (and so can open every chip).
    pub privileged: bool,
    /// `HostConfig.Devices[].PathOnHost`.
    pub device_paths: Vec<String>,
    /// Bind mount sources.
    pub mount_sources: Vec<String>,
    /// Our devices label, if present.
    pub devices_label: Option<String>,
}

impl Client {
    /// Create and start the served container. A container that fails to start is removed.
    pub async fn create_and_start(
        &self,
        spec: &RunSpec,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<String, EngineError> {
        let body = spec.to_create_body(lookup);
        self.create_and_start_body(&spec.name, body).await
    }

    async fn create_and_start_body(
        &self,
        name: &str,
        body: ContainerCreateBody,
    ) -> Result<String, EngineError> {
        let opts = CreateContainerOptions {
            name: Some(name.to_string()),
            ..Default::default()
        };
        let created = self
            .docker()
            .create_container(Some(opts), body)
            .await
            .map_err(|source| EngineError::Create {
                name: name.to_string(),
                source,
            })?;
        if let Err(source) = self.docker().start_container(&created.id, None).await {
            let _ = self.remove_container_force(&created.id).await;
            return Err(EngineError::Start {
                name: name.to_string(),
                source,
            });
        }
        Ok(created.id)
    }

    /// Inspect a container; `Ok(None)` when it does not exist.
    pub async fn container(&self, name: &str) -> Result<Option<ContainerInfo>, EngineError> {
        match self
            .docker()
            .inspect_container(name, None::<InspectContainerOptions>)
            .await
        {
            Ok(r) => Ok(Some(info_from_inspect(r))),
            Err(source) => {
                let e = EngineError::InspectContainer {
                    name: name.to_string(),
                    source,
                };
                if e.is_not_found() { Ok(None) } else { Err(e) }
            }
        }
    }

    /// Every tt-model container (running or not with `all`), optionally of one package.
    pub async fn tt_model_containers(
        &self,
        package: Option<&str>,
        all: bool,
    ) -> Result<Vec<ContainerInfo>, EngineError> {
        let filter = match package {
            Some(p) => labels::package_filter(p),
            None => labels::PACKAGE.to_string(),
        };
        let filters: HashMap<String, Vec<String>> = [("label".to_string(), vec![filter])].into();
        let opts = ListContainersOptions {
            all,
            filters: Some(filters),
            ..Default::default()
        };
        let list = self
            .docker()
            .list_containers(Some(opts))
            .await
            .map_err(|source| EngineError::List { source })?;
        let mut out = Vec::new();
        for s in list {
            let Some(id) = s.id else { continue };
            // Inspect for exact state; a container removed meanwhile is skipped.
            if let Some(info) = self.container(&id).await? {
                out.push(info);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// SIGTERM, then SIGKILL after `grace`; reports whether it was running and how it exited.
    pub async fn stop_with_grace(
        &self,
        name: &str,
        grace: Duration,
    ) -> Result<StopInfo, EngineError> {
        let Some(before) = self.container(name).await? else {
            return Ok(StopInfo {
                was_running: false,
                exit_code: None,
            });
        };
        if before.running {
            let opts = StopContainerOptions {
                t: Some(grace.as_secs().min(i32::MAX as u64) as i32),
                signal: None,
            };
            if let Err(source) = self.docker().stop_container(name, Some(opts)).await {
                let e = EngineError::Stop {
                    name: name.to_string(),
                    source,
                };
                // 304: already stopped between inspect and stop.
                if e.status_code() != Some(304) && !e.is_not_found() {
                    return Err(e);
                }
            }
        }
        let after = self.container(name).await?;
        Ok(StopInfo {
            was_running: before.running,
            exit_code: after.and_then(|a| a.exit_code).or(before.exit_code),
        })
    }

    /// Force-remove a container (and its anonymous volumes); `Ok(false)` when it did not exist.
    pub async fn remove_container_force(&self, name: &str) -> Result<bool, EngineError> {
        let opts = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker().remove_container(name, Some(opts)).await {
            Ok(()) => Ok(true),
            Err(source) => {
                let e = EngineError::Remove {
                    name: name.to_string(),
                    source,
                };
                if e.is_not_found() { Ok(false) } else { Err(e) }
            }
        }
    }

    /// Wait until the container is not running; returns its exit code.
    pub async fn wait_exit(&self, name: &str) -> Result<i64, EngineError> {
        let mut s = self.docker().wait_container(
            name,
            Some(WaitContainerOptions {
                condition: "not-running".into(),
            }),
        );
        let mut code = 0;
        let mut answered = false;
        while let Some(item) = s.next().await {
            match item {
                Ok(r) => {
                    code = r.status_code;
                    answered = true;
                }
                Err(bollard::errors::Error::DockerContainerWaitError { code: c, .. }) => {
                    code = c;
                    answered = true;
                }
                // The exit code came; only its line end did not (see `torn_line_end`).
                Err(source) if answered && crate::torn_line_end::is_torn_line_end(&source) => {
                    break;
                }
                Err(source) => {
                    return Err(EngineError::Wait {
                        name: name.to_string(),
                        source,
                    });
                }
            }
        }
        Ok(code)
    }

    /// The claim facts of every running container on the host (any owner): the UMD lock is
    /// shared through the host IPC namespace, so foreign containers count too.
    pub async fn scan_claims(&self) -> Result<Vec<ContainerClaim>, EngineError> {
        let list = self
            .docker()
            .list_containers(Some(ListContainersOptions {
                all: false,
                ..Default::default()
            }))
            .await
            .map_err(|source| EngineError::List { source })?;
        let mut out = Vec::new();
        for s in list {
            let Some(id) = s.id else { continue };
            let r = match self
                .docker()
                .inspect_container(&id, None::<InspectContainerOptions>)
                .await
            {
                Ok(r) => r,
                Err(source) => {
                    let e = EngineError::InspectContainer {
                        name: id.clone(),
                        source,
                    };
                    if e.is_not_found() {
                        continue;
                    }
                    return Err(e);
                }
            };
            let hc = r.host_config.clone().unwrap_or_default();
            let mut mount_sources: Vec<String> = r
                .mounts
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| m.source)
                .collect();
            mount_sources.extend(
                hc.binds
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|b| b.split(':').next().map(str::to_string)),
            );
            mount_sources.extend(
                hc.mounts
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|m| m.source),
            );
            out.push(ContainerClaim {
                id: r.id.clone().unwrap_or(id),
                name: r
                    .name
                    .clone()
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                ipc_mode: hc.ipc_mode.clone().unwrap_or_default(),
                privileged: hc.privileged.unwrap_or(false),
                device_paths: hc
                    .devices
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|d| d.path_on_host)
                    .collect(),
                mount_sources,
                devices_label: r
                    .config
                    .and_then(|c| c.labels)
                    .and_then(|l| l.get(labels::DEVICES).cloned()),
            });
        }
        Ok(out)
    }

    /// `tt-smi -r` from `image` (in a container labelled [`RESET_PACKAGE`]), scoped to `chips`
    /// (the whole directory when `None`), bounded by `timeout`. Returns the exit code and output.
    pub async fn reset_chips(
        &self,
        image: &str,
        chips: Option<&[u32]>,
        timeout: Duration,
    ) -> Result<(i64, String), EngineError> {
        let devices: Vec<String> = match chips {
            Some(ids) => ids
                .iter()
                .map(|i| format!("{DEV_TENSTORRENT}/{i}"))
                .collect(),
            None => vec![DEV_TENSTORRENT.to_string()],
        };
        let reset_arg = match chips {
            Some(ids) if !ids.is_empty() => labels::format_devices(ids),
            _ => "all".to_string(),
        };
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            entrypoint: Some(vec!["tt-smi".into()]),
            cmd: Some(vec!["-r".into(), reset_arg]),
            labels: Some([(labels::PACKAGE.to_string(), RESET_PACKAGE.to_string())].into()),
            host_config: Some(HostConfig {
                devices: Some(
                    devices
                        .iter()
                        .map(|d| DeviceMapping {
                            path_on_host: Some(d.clone()),
                            path_in_container: Some(d.clone()),
                            cgroup_permissions: Some("rwm".into()),
                        })
                        .collect(),
                ),
                mounts: Some(vec![Mount {
                    source: Some(HUGEPAGES_1G.into()),
                    target: Some(HUGEPAGES_1G.into()),
                    typ: Some(MountType::BIND),
                    ..Default::default()
                }]),
                ipc_mode: Some("host".into()),
                network_mode: Some("none".into()),
                init: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        let name = format!("tt-model-reset-{}", std::process::id());
        let id = self.create_and_start_body(&name, body).await?;
        let code = match tokio::time::timeout(timeout, self.wait_exit(&id)).await {
            Ok(r) => r?,
            Err(_) => -1,
        };
        let output = crate::logs::collect(self, &id, None)
            .await
            .unwrap_or_default();
        let _ = self.remove_container_force(&id).await;
        Ok((code, output))
    }
}

impl Client {
    /// Whether the engine runs rootless (`name=rootless` in its security options).
    pub async fn is_rootless(&self) -> Result<bool, EngineError> {
        let info = self
            .docker()
            .info()
            .await
            .map_err(|source| EngineError::Unreachable {
                host: self.host().to_string(),
                source,
            })?;
        Ok(info
            .security_options
            .unwrap_or_default()
            .iter()
            .any(|o| o.contains("name=rootless")))
    }
}
