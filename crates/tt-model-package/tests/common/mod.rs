//! Specs for every kind, shared by the template and card tests.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use tt_model_package::spec::*;

pub fn base(kind: Kind) -> PackageSpec {
    PackageSpec {
        manifest_path: PathBuf::from("tt-model.yaml"),
        name: format!("demo-{}", kind.as_str()),
        repo: "acme/demo".into(),
        weights: "acme/demo-weights".into(),
        weights_revision: Some("0123456789abcdef0123456789abcdef01234567".into()),
        kind,
        arch: "blackhole".into(),
        metal: MetalSource::Local {
            path: PathBuf::from("/src/tt-metal"),
        },
        code: vec!["models/demos/demo".into()],
        extra_code: vec![],
        ubuntu: "22.04".into(),
        python: "3.12".into(),
        runtime: RuntimeSpec::empty(kind),
        serve: ServeDefault {
            name: "default".into(),
            port: 8000,
            hardware: Some("p150x4".into()),
            mesh_device: Some("P150x4".into()),
            mesh_shape: Some((1, 4)),
            ..Default::default()
        },
        profiles: vec![ProfileSummary {
            name: "default".into(),
            default: true,
            hardware: Some("p150x4".into()),
            mesh: Some("P150x4".into()),
            max_model_len: None,
        }],
        verify: vec![],
        card: None,
    }
}

/// `runtime` of a vllm-plugin spec, to set its keys.
pub fn plugin_runtime(s: &mut PackageSpec) -> &mut VllmPluginRuntime {
    match &mut s.runtime.kind {
        KindRuntime::VllmPlugin(r) => r,
        other => panic!("not a vllm-plugin runtime: {other:?}"),
    }
}

/// `runtime` of a tt-dit-server spec, to set its keys.
pub fn dit_runtime(s: &mut PackageSpec) -> &mut TtDitServerRuntime {
    match &mut s.runtime.kind {
        KindRuntime::TtDitServer(r) => r,
        other => panic!("not a tt-dit-server runtime: {other:?}"),
    }
}

/// `runtime` of an http-server spec, to set its keys.
pub fn http_runtime(s: &mut PackageSpec) -> &mut HttpServerRuntime {
    match &mut s.runtime.kind {
        KindRuntime::HttpServer(r) => r,
        other => panic!("not an http-server runtime: {other:?}"),
    }
}

pub fn vllm_plugin() -> PackageSpec {
    let mut s = base(Kind::VllmPlugin);
    s.runtime.kind = KindRuntime::VllmPlugin(VllmPluginRuntime {
        vllm: Some(ComponentSource::Version {
            version: "0.10.1".into(),
        }),
        plugin: Some(ComponentSource::Git {
            repo: "https://github.com/tenstorrent/vllm-tt-plugin".into(),
            git_ref: "v0.3.0".into(),
        }),
        overrides: vec!["transformers<5".into()],
        extension: Some("models/demos/demo/ext".into()),
        extra_models_dir: Some("models/demos/demo/vllm".into()),
        ..Default::default()
    });
    s.serve.max_model_len = Some(131072);
    s.serve.max_num_seqs = Some(32);
    s.serve.block_size = Some(64);
    s.serve.tool_parser = Some("llama3_json".into());
    s.serve.additional_config = Some(r#"{"tt":{"trace":true}}"#.into());
    s.verify = vec![VerifyStep::Python("import demo_ext".into())];
    s
}

pub fn vllm_fork() -> PackageSpec {
    let mut s = base(Kind::VllmFork);
    s.runtime.kind = KindRuntime::VllmFork(VllmForkRuntime {
        vllm: Some(ComponentSource::Git {
            repo: "https://github.com/tenstorrent/vllm".into(),
            git_ref: "dev".into(),
        }),
        model_dir: Some("models/demos/demo".into()),
        lock: Some("requirements.lock".into()),
        ..Default::default()
    });
    s.serve.max_num_seqs = Some(16);
    s.serve.block_size = Some(64);
    s.serve.server_timeout = Some(1800);
    s.serve.additional_config = Some(r#"{"tt":{"sample_on_device_mode":"all"}}"#.into());
    s.serve.reasoning_parser = Some("qwen3".into());
    s.serve.args = vec![
        "--override-generation-config".into(),
        r#"{"temperature": 0.6}"#.into(),
    ];
    s
}

pub fn tt_dit_server() -> PackageSpec {
    let mut s = base(Kind::TtDitServer);
    let rt = dit_runtime(&mut s);
    rt.app = Some("demo_server.app:app".into());
    rt.mesh_shape_env = Some("TT_MESH_SHAPE".into());
    s.serve.env = BTreeMap::from([(
        "TT_WEIGHTS_REVISION".to_string(),
        "0123456789abcdef".to_string(),
    )]);
    s.verify = vec![
        VerifyStep::Python("import demo_server.app".into()),
        VerifyStep::sh("test -f /opt/tt-metal/models/demos/demo/config.json"),
    ];
    s
}

pub fn http_server() -> PackageSpec {
    let mut s = base(Kind::HttpServer);
    let rt = http_runtime(&mut s);
    rt.command = vec![
        "sh".into(),
        "/opt/tt-metal/models/demos/demo/serve.sh".into(),
        "{host}".into(),
        "{port}".into(),
    ];
    rt.ready_line = Some("ready".into());
    s.serve.hardware = Some("p150".into());
    s.serve.mesh_device = Some("P150".into());
    s.serve.mesh_shape = Some((1, 1));
    s.verify = vec![VerifyStep::sh(
        "test -x /opt/tt-metal/models/demos/demo/serve.sh",
    )];
    s
}

pub fn all() -> Vec<(&'static str, PackageSpec)> {
    vec![
        ("vllm-plugin", vllm_plugin()),
        ("vllm-fork", vllm_fork()),
        ("tt-dit-server", tt_dit_server()),
        ("http-server", http_server()),
    ]
}
