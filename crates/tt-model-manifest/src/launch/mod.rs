//! How one serve profile becomes a server's argv and environment: the one launcher both the
//! image's default command (`package`) and `tt-model serve` (from the published wire
//! manifest) run, so a profile launches the same way whichever manifest it is read from.

mod profile;

pub use profile::{DEFAULT_PORT, ServerCommand, serve_default, wire_launch};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{Kind, KindRuntime, RuntimeSpec};

pub use crate::validate::runtime::DEFAULT_MESH_SHAPE_ENV;

/// The runtime keys the launcher reads; the build-only keys (engine sources, lock,
/// packages) are the package pipeline's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchRuntime {
    /// tt-dit-server: the ASGI target `module:attr`.
    pub app: Option<String>,
    /// http-server: the server argv with `{host}`/`{port}` placeholders.
    pub command: Vec<String>,
    /// vllm-fork: the model directory inside `code/`.
    pub model_dir: Option<String>,
    /// tt-dit-server: the env var carrying the mesh shape.
    pub mesh_shape_env: Option<String>,
}

impl LaunchRuntime {
    /// The launcher's keys of a validated runtime block.
    pub fn of(rt: &RuntimeSpec) -> Self {
        let mut runtime = Self::default();
        match &rt.kind {
            KindRuntime::TtDitServer(r) => {
                runtime.app = r.app.clone();
                runtime.mesh_shape_env = r.mesh_shape_env.clone();
            }
            KindRuntime::HttpServer(r) => runtime.command = r.command.clone(),
            KindRuntime::VllmFork(r) => runtime.model_dir = r.model_dir.clone(),
            KindRuntime::VllmPlugin(_) => {}
        }
        runtime
    }
}

/// A serve profile, resolved (serve defaults merged into the profile), in the launcher's
/// shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ServeDefault {
    /// Profile name.
    pub name: String,
    /// The port the server binds inside the container.
    pub port: u16,
    /// Board label, e.g. `p150x4`.
    pub hardware: Option<String>,
    /// Mesh preset or literal.
    pub mesh_device: Option<String>,
    /// The mesh shape `(rows, cols)` when known.
    pub mesh_shape: Option<(u32, u32)>,
    /// `--max-model-len`.
    pub max_model_len: Option<u64>,
    /// `--max-num-seqs` (required for the vLLM kinds).
    pub max_num_seqs: Option<u64>,
    /// `--block-size` (required for the vLLM kinds).
    pub block_size: Option<u64>,
    /// vllm-fork `--server-timeout`.
    pub server_timeout: Option<u64>,
    /// `serve.additional_config` as JSON text.
    pub additional_config: Option<String>,
    /// `--tool-call-parser` (`serve.capabilities.tool_parser`).
    pub tool_parser: Option<String>,
    /// `--reasoning-parser` (`serve.capabilities.reasoning_parser`).
    pub reasoning_parser: Option<String>,
    /// Raw engine args, flattened.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
}

/// One profile's launcher inputs.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    /// How the image serves.
    pub kind: Kind,
    /// What the server loads (`HF_MODEL`).
    pub weights: &'a str,
    /// The kind's runtime knobs (`app`, `command`, `model_dir`, `mesh_shape_env`).
    pub runtime: &'a LaunchRuntime,
    /// The profile's settings, merged over the shared defaults.
    pub serve: &'a ServeDefault,
    /// The port the server binds.
    pub port: u16,
}

impl Launch<'_> {
    /// The server argv (§4.7 of the reference: one launcher per kind).
    pub fn argv(&self) -> Vec<String> {
        let s = self.serve;
        let port = self.port.to_string();
        let mut argv: Vec<String> = Vec::new();
        let mut push = |items: &[&str]| argv.extend(items.iter().map(|s| s.to_string()));
        match self.kind {
            Kind::VllmPlugin => {
                push(&["vllm", "serve", self.weights]);
                for (flag, n) in [
                    ("--max-model-len", s.max_model_len),
                    ("--max-num-seqs", s.max_num_seqs),
                    ("--block-size", s.block_size),
                ] {
                    if let Some(n) = n {
                        push(&[flag, &n.to_string()]);
                    }
                }
                if let Some(cfg) = &s.additional_config {
                    push(&["--additional-config", cfg]);
                }
                if let Some(p) = &s.tool_parser {
                    push(&["--enable-auto-tool-choice", "--tool-call-parser", p]);
                }
                if let Some(p) = &s.reasoning_parser {
                    // The underscore is what the engine accepts, deliberately.
                    push(&["--reasoning_parser", p]);
                }
                argv.extend(s.args.iter().cloned());
                argv.extend(["--port".to_string(), port]);
            }
            Kind::VllmFork => {
                push(&[
                    "python",
                    "-m",
                    "models.common.readiness_check.run_vllm_server",
                ]);
                push(&["--stages", "serve"]);
                if let Some(dir) = &self.runtime.model_dir {
                    push(&["--model-dir", dir]);
                }
                push(&["--hf-model", self.weights]);
                if let Some((r, c)) = s.mesh_shape {
                    push(&["--mesh-device", &format!("({r}, {c})")]);
                }
                // The runner's order, which differs from vllm-plugin's.
                for (flag, n) in [
                    ("--max-num-seqs", s.max_num_seqs),
                    ("--max-model-len", s.max_model_len),
                    ("--block-size", s.block_size),
                    ("--server-timeout", s.server_timeout),
                ] {
                    if let Some(n) = n {
                        push(&[flag, &n.to_string()]);
                    }
                }
                push(&["--port", &port]);
                if let Some(cfg) = &s.additional_config
                    && let Ok(value) = serde_json::from_str::<serde_json::Value>(cfg)
                    && let Some(tt) = value.get("tt")
                {
                    push(&["--tt-config", &tt.to_string()]);
                }
                let mut extra: Vec<String> = s.args.clone();
                if let Some(p) = &s.tool_parser {
                    extra.extend([
                        "--enable-auto-tool-choice".into(),
                        "--tool-call-parser".into(),
                        p.clone(),
                    ]);
                }
                if let Some(p) = &s.reasoning_parser {
                    extra.extend(["--reasoning_parser".into(), p.clone()]);
                }
                if !extra.is_empty() {
                    // The runner shlex-splits this string: quote each token so JSON survives.
                    let joined: Vec<String> =
                        extra.iter().map(|t| crate::shell::quote(t)).collect();
                    push(&["--additional-server-args", &joined.join(" ")]);
                }
            }
            Kind::TtDitServer => {
                push(&[
                    "python",
                    "-m",
                    "uvicorn",
                    "--host",
                    "0.0.0.0",
                    "--port",
                    &port,
                    "--lifespan",
                    "on",
                ]);
                argv.extend(s.args.iter().cloned());
                if let Some(app) = &self.runtime.app {
                    argv.push(app.clone());
                }
            }
            Kind::HttpServer => {
                for token in &self.runtime.command {
                    argv.push(token.replace("{host}", "0.0.0.0").replace("{port}", &port));
                }
                // The server's own knobs may need the port too (`--listen {port}`).
                argv.extend(s.args.iter().map(|t| t.replace("{port}", &port)));
            }
        }
        argv
    }

    /// The server environment, sorted: `HF_MODEL`, the kind's env, then the profile's env,
    /// which wins.
    pub fn env(&self) -> BTreeMap<String, String> {
        let s = self.serve;
        let mut env = BTreeMap::new();
        env.insert("HF_MODEL".to_string(), self.weights.to_string());
        match self.kind {
            Kind::VllmPlugin => {
                if let Some(m) = &s.mesh_device {
                    env.insert("MESH_DEVICE".into(), m.clone());
                }
            }
            Kind::VllmFork => {
                env.insert("PYTHONUNBUFFERED".into(), "1".into());
            }
            Kind::TtDitServer => {
                if let Some(m) = &s.mesh_device {
                    env.insert("MESH_DEVICE".into(), m.clone());
                }
                if let Some((r, c)) = s.mesh_shape {
                    let key = self
                        .runtime
                        .mesh_shape_env
                        .clone()
                        .unwrap_or_else(|| DEFAULT_MESH_SHAPE_ENV.into());
                    env.insert(key, format!("{r}x{c}"));
                }
            }
            Kind::HttpServer => {}
        }
        for (k, v) in &s.env {
            env.insert(k.clone(), v.clone());
        }
        env
    }
}
