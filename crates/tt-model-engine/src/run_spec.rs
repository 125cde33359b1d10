//! The served container as data: [`compose`] is a pure function from what serve decided
//! ([`ServeRequest`]) and what the host looks like ([`HostFacts`]) to a [`RunSpec`], which
//! becomes a bollard create body ([`RunSpec::to_create_body`]) or a `docker run` argv for
//! `--print` ([`RunSpec::to_argv`]). Both renderings are golden-tested.
//!
//! Hardening beyond the Python original: the port is published on 127.0.0.1 unless `expose`,
//! only the hub cache is mounted (never `HF_HOME` with its token file) and read-only when the
//! weights were fetched on the host, `no-new-privileges`, `cap-drop ALL` plus only what the
//! card needs, and an init process so SIGTERM reaches the server.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bollard::models::{
    ContainerCreateBody, DeviceMapping, HostConfig, Mount, MountType, PortBinding,
};

use tt_model_manifest::shell::quote as shell_quote;

use tt_model_oci::labels;

/// In-container path of the hub cache mount.
pub const HUB_CACHE_IN_CONTAINER: &str = "/hf-hub";
/// The hugetlbfs mount UMD needs, bound at the same path.
pub const HUGEPAGES_1G: &str = "/dev/hugepages-1G";
/// The card's device directory.
pub const DEV_TENSTORRENT: &str = "/dev/tenstorrent";
/// Capabilities added back after `cap-drop ALL` when the card is passed in: `IPC_LOCK` for
/// pinned host buffers, `SYS_NICE` for the real-time dispatch threads (tt-media-server adds it).
pub const CARD_CAPS: &[&str] = &["IPC_LOCK", "SYS_NICE"];
/// The mesh descriptor a single P150 chip needs when scoped alone (else "CUSTOM cluster type").
pub const SINGLE_CHIP_MESH_DESC: &str =
    "/opt/tt-metal/tt_metal/fabric/mesh_graph_descriptors/p150_mesh_graph_descriptor.textproto";

/// Which chips the container gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chips {
    /// These `/dev/tenstorrent/N` nodes.
    Ids(Vec<u32>),
    /// The whole `/dev/tenstorrent` directory (chip ids unknown).
    All,
    /// No device: a CPU/emulation runtime.
    None,
}

/// What serve decided for this container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeRequest {
    /// The package name (the container name's stem and the `package` label).
    pub package: String,
    /// The profile being served (part of the container name, and a label).
    pub profile: String,
    /// The image reference to run.
    pub image: String,
    /// The user's serve target, recorded as a label.
    pub target: String,
    /// The runtime kind (`http-server`, `vllm-plugin`, …), recorded as a label for the boot
    /// tracker.
    pub kind: String,
    /// The port the server listens on, published at the same number on the host.
    pub port: u16,
    /// Publish on every interface (`0.0.0.0`) instead of loopback only.
    pub expose: bool,
    /// The HTTP path polled for readiness, recorded as a label.
    pub health_path: String,
    /// Which Tenstorrent chips the container gets.
    pub chips: Chips,
    /// The weights were fetched on the host, so the hub cache is mounted read-only and the
    /// container runs offline; otherwise the container downloads and needs it writable.
    pub weights_on_host: bool,
    /// Launcher env and profile env merged (profile wins); emitted sorted.
    pub env: BTreeMap<String, String>,
    /// Extra labels (`tt.model.*` facts of the manifest).
    pub labels: BTreeMap<String, String>,
    /// Launcher argv followed by the passthrough arguments.
    pub cmd: Vec<String>,
    /// `host` or `none` for engines without a bridge; `None` = the engine default (bridge).
    pub network: Option<String>,
}

/// Facts about the host, injected so [`compose`] stays pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// The caller's user id; the container runs as `uid:gid` (unless `rootless`) so files it
    /// writes belong to the caller.
    pub uid: u32,
    /// The caller's group id.
    pub gid: u32,
    /// A rootless daemon maps the caller to root inside: run as `0:0` there.
    pub rootless: bool,
    /// `HF_HUB_CACHE` on the host.
    pub hub_cache: PathBuf,
    /// `~/.cache/tt-model/<package>`, holding `cache/`, `weights/`, `tensors/`.
    pub state_dir: PathBuf,
    /// `HF_TOKEN` is set in the caller's environment (passed by name, never by value).
    pub hf_token_set: bool,
    /// A hugetlbfs is mounted at `/dev/hugepages-1G`, to be bound into containers that get chips.
    pub hugepages_1g: bool,
}

/// A bind mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// Host path.
    pub src: PathBuf,
    /// Path inside the container.
    pub dst: String,
    /// Mount read-only.
    pub read_only: bool,
}

/// An environment entry; `value: None` passes the caller's variable by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// The variable's name.
    pub key: String,
    /// The value to set; `None` passes the caller's value by name (omitted when unset there).
    pub value: Option<String>,
}

/// A published port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// `Some("127.0.0.1")` unless exposed on every interface.
    pub host_ip: Option<String>,
    /// Host port.
    pub host_port: u16,
    /// Container port (the same as `host_port` for serve).
    pub container_port: u16,
}

/// Everything the engine needs to create the served container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// The container name (`tt-model-<package>-<profile>`).
    pub name: String,
    /// The image reference to run.
    pub image: String,
    /// The `user[:group]` to run as (`0:0` on a rootless daemon).
    pub user: String,
    /// All labels: ours (`tt.model.*`) and the manifest's.
    pub labels: BTreeMap<String, String>,
    /// Device nodes, mapped at the same path inside.
    pub devices: Vec<String>,
    /// Share the host IPC namespace (`--ipc host`): set whenever chips are given, since the device
    /// lock lives there.
    pub ipc_host: bool,
    /// Bind mounts: hub cache, state directories, hugepages.
    pub binds: Vec<Bind>,
    /// The environment, sorted by key.
    pub env: Vec<EnvVar>,
    /// The published port; `None` on `host`/`none` networks.
    pub publish: Option<Publish>,
    /// The network mode; `None` for the engine default (bridge).
    pub network: Option<String>,
    /// Capabilities added (only those the chips need).
    pub cap_add: Vec<String>,
    /// Capabilities dropped (`ALL`).
    pub cap_drop: Vec<String>,
    /// Set `no-new-privileges`.
    pub no_new_privileges: bool,
    /// Run an init process as PID 1 (`--init`), which reaps zombies and forwards signals.
    pub init: bool,
    /// Replaces the image's entrypoint when `Some`; `None` keeps the image's.
    pub entrypoint: Option<Vec<String>>,
    /// The command (arguments to the entrypoint).
    pub cmd: Vec<String>,
}

/// `tt-model-<name>-<profile>`.
pub fn container_name(package: &str, profile: &str) -> String {
    format!("tt-model-{package}-{profile}")
}

/// The package's host state directories, created before the run so they belong to the user.
pub fn state_mounts(state_dir: &std::path::Path) -> [(PathBuf, &'static str, &'static str); 3] {
    [
        (state_dir.join("cache"), "/cache", "TT_METAL_CACHE"),
        (
            state_dir.join("weights"),
            "/weight-cache",
            "TT_DIT_CACHE_DIR",
        ),
        (state_dir.join("tensors"), "/tensor-cache", "TT_CACHE_PATH"),
    ]
}

/// Compose the run spec. Pure.
pub fn compose(req: &ServeRequest, host: &HostFacts) -> RunSpec {
    let mut lab = req.labels.clone();
    lab.insert(labels::PACKAGE.into(), req.package.clone());
    lab.insert(labels::PROFILE.into(), req.profile.clone());
    lab.insert(labels::TARGET.into(), req.target.clone());
    lab.insert(labels::KIND.into(), req.kind.clone());
    lab.insert(labels::PORT.into(), req.port.to_string());
    lab.insert(labels::HEALTH_PATH.into(), req.health_path.clone());
    lab.insert(
        labels::HOST_IP.into(),
        if req.expose {
            "0.0.0.0".into()
        } else {
            "127.0.0.1".into()
        },
    );

    let card = req.chips != Chips::None;
    let devices = match &req.chips {
        Chips::Ids(ids) => {
            lab.insert(labels::DEVICES.into(), labels::format_devices(ids));
            ids.iter()
                .map(|i| format!("{DEV_TENSTORRENT}/{i}"))
                .collect()
        }
        Chips::All => vec![DEV_TENSTORRENT.to_string()],
        Chips::None => Vec::new(),
    };

    let mut binds = Vec::new();
    if card && host.hugepages_1g {
        binds.push(Bind {
            src: HUGEPAGES_1G.into(),
            dst: HUGEPAGES_1G.into(),
            read_only: false,
        });
    }
    binds.push(Bind {
        src: host.hub_cache.clone(),
        dst: HUB_CACHE_IN_CONTAINER.into(),
        read_only: req.weights_on_host,
    });
    let mut env: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (src, dst, var) in state_mounts(&host.state_dir) {
        binds.push(Bind {
            src,
            dst: dst.into(),
            read_only: false,
        });
        env.insert(var.into(), Some(dst.into()));
    }
    env.insert("HF_HUB_CACHE".into(), Some(HUB_CACHE_IN_CONTAINER.into()));
    if req.weights_on_host {
        env.insert("HF_HUB_OFFLINE".into(), Some("1".into()));
    }
    if matches!(&req.chips, Chips::Ids(ids) if ids.len() == 1) {
        env.insert(
            "TT_MESH_GRAPH_DESC_PATH".into(),
            Some(SINGLE_CHIP_MESH_DESC.into()),
        );
    }
    for (k, v) in &req.env {
        env.insert(k.clone(), Some(v.clone()));
    }
    if host.hf_token_set {
        env.insert("HF_TOKEN".into(), None);
    }
    let publish = match req.network.as_deref() {
        Some("host") | Some("none") => None,
        _ => Some(Publish {
            host_ip: (!req.expose).then(|| "127.0.0.1".to_string()),
            host_port: req.port,
            container_port: req.port,
        }),
    };
    RunSpec {
        name: container_name(&req.package, &req.profile),
        image: req.image.clone(),
        user: if host.rootless {
            "0:0".into()
        } else {
            format!("{}:{}", host.uid, host.gid)
        },
        labels: lab,
        devices,
        ipc_host: card,
        binds,
        env: env
            .into_iter()
            .map(|(key, value)| EnvVar { key, value })
            .collect(),
        publish,
        network: req.network.clone(),
        cap_add: if card {
            CARD_CAPS.iter().map(|c| c.to_string()).collect()
        } else {
            Vec::new()
        },
        cap_drop: vec!["ALL".into()],
        no_new_privileges: true,
        init: true,
        entrypoint: None,
        cmd: req.cmd.clone(),
    }
}

impl RunSpec {
    /// The bollard create body. `lookup` resolves variables passed by name (`HF_TOKEN`)
    /// from the caller's environment, as `docker run --env NAME` does; unset ones are omitted.
    pub fn to_create_body(&self, lookup: impl Fn(&str) -> Option<String>) -> ContainerCreateBody {
        let env = self
            .env
            .iter()
            .filter_map(|e| match &e.value {
                Some(v) => Some(format!("{}={v}", e.key)),
                None => lookup(&e.key).map(|v| format!("{}={v}", e.key)),
            })
            .collect();
        let mut exposed = None;
        let mut bindings = None;
        if let Some(p) = &self.publish {
            let key = format!("{}/tcp", p.container_port);
            exposed = Some(vec![key.clone()]);
            bindings = Some(
                [(
                    key,
                    Some(vec![PortBinding {
                        host_ip: p.host_ip.clone(),
                        host_port: Some(p.host_port.to_string()),
                    }]),
                )]
                .into_iter()
                .collect(),
            );
        }
        let mounts = self
            .binds
            .iter()
            .map(|b| Mount {
                target: Some(b.dst.clone()),
                source: Some(b.src.to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(b.read_only),
                ..Default::default()
            })
            .collect();
        let devices = self
            .devices
            .iter()
            .map(|d| DeviceMapping {
                path_on_host: Some(d.clone()),
                path_in_container: Some(d.clone()),
                cgroup_permissions: Some("rwm".into()),
            })
            .collect();
        let mut security_opt = Vec::new();
        if self.no_new_privileges {
            security_opt.push("no-new-privileges".to_string());
        }
        ContainerCreateBody {
            image: Some(self.image.clone()),
            user: Some(self.user.clone()),
            env: Some(env),
            cmd: Some(self.cmd.clone()),
            entrypoint: self.entrypoint.clone(),
            labels: Some(self.labels.clone().into_iter().collect()),
            exposed_ports: exposed,
            host_config: Some(HostConfig {
                devices: Some(devices),
                ipc_mode: self.ipc_host.then(|| "host".to_string()),
                mounts: Some(mounts),
                port_bindings: bindings,
                network_mode: self.network.clone(),
                cap_add: (!self.cap_add.is_empty()).then(|| self.cap_add.clone()),
                cap_drop: Some(self.cap_drop.clone()),
                security_opt: Some(security_opt),
                init: Some(self.init),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The equivalent `docker run` argv (for `--print`); variables passed by name stay names.
    pub fn to_argv(&self) -> Vec<String> {
        let mut a: Vec<String> = vec!["docker".into(), "run".into(), "--detach".into()];
        let mut push = |k: &str, v: String| {
            a.push(k.to_string());
            a.push(v);
        };
        push("--name", self.name.clone());
        push("--user", self.user.clone());
        for (k, v) in &self.labels {
            push("--label", format!("{k}={v}"));
        }
        for d in &self.devices {
            push("--device", format!("{d}:{d}"));
        }
        if self.ipc_host {
            push("--ipc", "host".into());
        }
        for b in &self.binds {
            let ro = if b.read_only { ",readonly" } else { "" };
            push(
                "--mount",
                format!("type=bind,src={},dst={}{ro}", b.src.display(), b.dst),
            );
        }
        if let Some(n) = &self.network {
            push("--network", n.clone());
        }
        if let Some(p) = &self.publish {
            let ip = p
                .host_ip
                .as_deref()
                .map(|i| format!("{i}:"))
                .unwrap_or_default();
            push(
                "--publish",
                format!("{ip}{}:{}", p.host_port, p.container_port),
            );
        }
        for c in &self.cap_drop {
            push("--cap-drop", c.clone());
        }
        for c in &self.cap_add {
            push("--cap-add", c.clone());
        }
        if self.no_new_privileges {
            push("--security-opt", "no-new-privileges".into());
        }
        for e in &self.env {
            match &e.value {
                Some(v) => push("--env", format!("{}={v}", e.key)),
                None => push("--env", e.key.clone()),
            }
        }
        if let Some(ep) = &self.entrypoint {
            push("--entrypoint", ep.join(" "));
        }
        if self.init {
            a.push("--init".into());
        }
        a.push(self.image.clone());
        a.extend(self.cmd.iter().cloned());
        a
    }

    /// The argv as one shell-quoted line.
    pub fn to_shell(&self) -> String {
        self.to_argv()
            .iter()
            .map(|s| shell_quote(s))
            .collect::<Vec<_>>()
            .join(" ")
    }
}
