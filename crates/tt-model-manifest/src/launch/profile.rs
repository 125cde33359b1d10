//! One serve profile read from the published wire manifest (`tt-model serve`): its settings
//! in the launcher's shape and the server it runs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Launch, LaunchRuntime, ServeDefault};
use crate::validate::hardware::parse_mesh;
use crate::{ServeArg, ServeSettings, WireManifest};

/// The port a server binds inside the container when the manifest names none.
pub const DEFAULT_PORT: u16 = 8000;

/// `serve.args` flattened: a `[flag, value]` pair becomes two tokens.
fn flatten_args(args: &[ServeArg]) -> Vec<String> {
    args.iter()
        .flat_map(|a| match a {
            ServeArg::One(s) => vec![s.clone()],
            ServeArg::Pair(a, b) => vec![a.clone(), b.clone()],
        })
        .collect()
}

/// Profile `name`'s merged settings in the launcher's shape.
pub fn serve_default(name: &str, settings: &ServeSettings) -> ServeDefault {
    let caps = settings.capabilities.clone().unwrap_or_default();
    ServeDefault {
        name: name.to_string(),
        port: settings.port.unwrap_or(DEFAULT_PORT),
        hardware: settings.hardware.clone(),
        mesh_device: settings.mesh_device.clone(),
        mesh_shape: settings.mesh_device.as_deref().and_then(parse_mesh),
        max_model_len: settings.max_model_len,
        max_num_seqs: settings.max_num_seqs,
        block_size: settings.block_size,
        server_timeout: settings.server_timeout,
        additional_config: settings
            .additional_config
            .as_ref()
            .map(|c| Value::Object(c.clone()).to_string()),
        tool_parser: caps.tool_parser,
        reasoning_parser: caps.reasoning_parser,
        args: flatten_args(&settings.args),
        env: settings
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// A server's command line and environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCommand {
    /// The argv.
    pub argv: Vec<String>,
    /// The environment, sorted.
    pub env: BTreeMap<String, String>,
}

/// The server a published package runs for profile `name` with `settings` (as
/// [`WireManifest::resolve_profile`] merged them) on `port`: the same launcher as the
/// image's default command.
pub fn wire_launch(
    wire: &WireManifest,
    name: &str,
    settings: &ServeSettings,
    port: u16,
) -> ServerCommand {
    // A runtime block that does not read (a hand-edited manifest) launches with the kind's
    // defaults, as the rest of a tolerant wire read does.
    let runtime = wire
        .container
        .runtime_spec()
        .map(|rt| LaunchRuntime::of(&rt))
        .unwrap_or_default();
    let serve = serve_default(name, settings);
    let launch = Launch {
        kind: wire.container.kind,
        weights: wire.weights_id(),
        runtime: &runtime,
        serve: &serve,
        port,
    };
    ServerCommand {
        argv: launch.argv(),
        env: launch.env(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(kind: &str, serve: Value, runtime: Value) -> WireManifest {
        let doc = serde_json::json!({
            "schema_version": "5.1",
            "name": "qwen",
            "weights": {"repo_id": "Qwen/Qwen3-8B", "revision": "abc"},
            "container": {
                "image": {"registry": "hf", "repository": "tt-model/qwen", "tag": "7c27"},
                "kind": kind,
                "runtime": runtime,
                "serve": serve,
                "serve_profiles": [
                    {"name": "p150", "description": "one chip"},
                    {"name": "p150x4", "hardware": "p150x4", "mesh_device": "P150x4", "env": {"B": "2"}}
                ],
                "default_profile": "p150"
            }
        });
        WireManifest::from_json(&doc.to_string()).unwrap()
    }

    fn launch(w: &WireManifest, profile: Option<&str>, port: u16) -> ServerCommand {
        let (p, settings) = w.resolve_profile(profile).unwrap();
        wire_launch(w, &p.name, &settings, port)
    }

    #[test]
    fn vllm_plugin_matches_the_reference_launcher() {
        let w = wire(
            "vllm-plugin",
            serde_json::json!({"hardware": "p150", "mesh_device": "P150", "max_num_seqs": 32, "block_size": 64,
                "capabilities": {"tool_parser": "hermes", "reasoning_parser": "qwen3"},
                "args": ["--enforce-eager", ["--seed", "7"]], "env": {"A": "1"}}),
            serde_json::json!({}),
        );
        let cmd = launch(&w, None, 20001);
        assert_eq!(
            cmd.argv.join(" "),
            "vllm serve Qwen/Qwen3-8B --max-num-seqs 32 --block-size 64 --enable-auto-tool-choice \
             --tool-call-parser hermes --reasoning_parser qwen3 --enforce-eager --seed 7 --port 20001"
        );
        assert_eq!(cmd.env["MESH_DEVICE"], "P150");
        assert_eq!(cmd.env["HF_MODEL"], "Qwen/Qwen3-8B");
        let big = launch(&w, Some("p150x4"), 20001);
        assert_eq!(big.env["MESH_DEVICE"], "P150x4");
        assert_eq!(
            (big.env["A"].as_str(), big.env["B"].as_str()),
            ("1", "2"),
            "profile env merges over the shared env"
        );
    }

    #[test]
    fn vllm_fork_lifts_tt_config_and_quotes_the_extra_args() {
        let w = wire(
            "vllm-fork",
            serde_json::json!({"mesh_device": "P150x4", "max_num_seqs": 16, "block_size": 64,
                "additional_config": {"tt": {"trace": true}}, "args": ["--override-generation-config", "{\"t\": 1}"]}),
            serde_json::json!({"model_dir": "models/demo"}),
        );
        let argv = launch(&w, None, 20000).argv;
        let at = |flag: &str| argv[argv.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(at("--model-dir"), "models/demo");
        assert_eq!(at("--mesh-device"), "(1, 4)");
        assert_eq!(at("--tt-config"), r#"{"trace":true}"#);
        assert_eq!(
            at("--additional-server-args"),
            r#"--override-generation-config '{"t": 1}'"#
        );
    }

    #[test]
    fn tt_dit_and_http_servers_fill_in_their_runtime() {
        let dit = wire(
            "tt-dit-server",
            serde_json::json!({"mesh_device": "QB2"}),
            serde_json::json!({"app": "srv.app:app", "mesh_shape_env": "MY_SHAPE"}),
        );
        let cmd = launch(&dit, None, 9000);
        assert_eq!(cmd.argv.last().map(String::as_str), Some("srv.app:app"));
        assert_eq!(cmd.env["MY_SHAPE"], "2x2");
        let http = wire(
            "http-server",
            serde_json::json!({"args": ["--listen={port}"]}),
            serde_json::json!({"command": ["/serve.sh", "{host}", "{port}"]}),
        );
        assert_eq!(
            launch(&http, None, 9001).argv,
            vec!["/serve.sh", "0.0.0.0", "9001", "--listen=9001"]
        );
    }
}
