//! Golden tests of the served container's run spec: the `--print` argv and the bollard create
//! body, for a host with a card and a host without one. Set `TT_MODEL_BLESS=1` to rewrite.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tt_model_engine::run_spec::{Chips, HostFacts, ServeRequest, compose};

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/serve_golden")
        .join(name);
    if std::env::var_os("TT_MODEL_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with TT_MODEL_BLESS=1)", path.display()));
    assert_eq!(
        actual, expected,
        "golden {name} differs (TT_MODEL_BLESS=1 rewrites it)"
    );
}

fn sorted(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut pairs: Vec<_> = m.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

fn request(chips: Chips) -> ServeRequest {
    ServeRequest {
        package: "qwen3-8b".into(),
        profile: "p150".into(),
        image: "tt-model/qwen3-8b:7c2773460298".into(),
        target: "acme/qwen3-8b@v1".into(),
        kind: "vllm-plugin".into(),
        port: 20000,
        expose: false,
        health_path: "/health".into(),
        chips,
        weights_on_host: true,
        env: BTreeMap::from([
            ("MESH_DEVICE".into(), "P150".into()),
            ("HF_MODEL".into(), "Qwen/Qwen3-8B".into()),
            ("VLLM_RPC_TIMEOUT".into(), "900000".into()),
        ]),
        labels: BTreeMap::from([
            ("tt.model.manifest_schema".into(), "5.1".into()),
            ("tt.model.openai_compatible".into(), "true".into()),
        ]),
        cmd: [
            "vllm",
            "serve",
            "Qwen/Qwen3-8B",
            "--max-num-seqs",
            "32",
            "--additional-config",
            "{\"a\": 1}",
            "--port",
            "20000",
        ]
        .map(String::from)
        .to_vec(),
        network: None,
    }
}

fn host(card: bool) -> HostFacts {
    HostFacts {
        uid: 1000,
        gid: 1000,
        rootless: false,
        hub_cache: "/home/u/.cache/huggingface/hub".into(),
        state_dir: "/home/u/.cache/tt-model/qwen3-8b".into(),
        hf_token_set: true,
        hugepages_1g: card,
    }
}

#[test]
fn argv_for_a_host_with_one_chip() {
    let spec = compose(&request(Chips::Ids(vec![2])), &host(true));
    golden("argv_card.txt", &(spec.to_argv().join("\n") + "\n"));
    golden("shell_card.txt", &(spec.to_shell() + "\n"));
}

#[test]
fn argv_for_a_host_without_a_card() {
    let mut req = request(Chips::None);
    req.expose = true;
    req.weights_on_host = false;
    let mut h = host(false);
    h.rootless = true;
    h.hf_token_set = false;
    let spec = compose(&req, &h);
    golden("argv_nocard.txt", &(spec.to_argv().join("\n") + "\n"));
}

#[test]
fn create_body_matches_the_argv() {
    let spec = compose(&request(Chips::Ids(vec![0, 1])), &host(true));
    let body = spec.to_create_body(|k| (k == "HF_TOKEN").then(|| "hf_secret".to_string()));
    // Labels are a HashMap in bollard: sort every object so the golden is stable.
    let json = serde_json::to_string_pretty(&sorted(serde_json::to_value(&body).unwrap())).unwrap();
    golden("create_body_card.json", &(json + "\n"));
    // The token reaches the container but never the printed argv.
    assert!(
        body.env
            .as_ref()
            .unwrap()
            .contains(&"HF_TOKEN=hf_secret".to_string())
    );
    assert!(!spec.to_shell().contains("hf_secret"));
    assert!(spec.to_argv().contains(&"HF_TOKEN".to_string()));
}

#[test]
fn hardening_and_mount_invariants() {
    let spec = compose(&request(Chips::Ids(vec![0, 1])), &host(true));
    let argv = spec.to_argv();
    let has = |a: &str, b: &str| argv.windows(2).any(|w| w[0] == a && w[1] == b);
    assert!(
        has("--publish", "127.0.0.1:20000:20000"),
        "loopback by default"
    );
    assert!(has("--cap-drop", "ALL"));
    assert!(has("--security-opt", "no-new-privileges"));
    assert!(argv.contains(&"--init".to_string()));
    assert!(has(
        "--mount",
        "type=bind,src=/home/u/.cache/huggingface/hub,dst=/hf-hub,readonly"
    ));
    assert!(
        !argv
            .iter()
            .any(|a| a.contains("src=/home/u/.cache/huggingface,")),
        "never HF_HOME (token file)"
    );
    assert!(has("--label", "org.tenstorrent.tt-model.devices=0,1"));
    assert!(has("--device", "/dev/tenstorrent/1:/dev/tenstorrent/1"));
    assert!(
        !argv
            .iter()
            .any(|a| a.starts_with("TT_MESH_GRAPH_DESC_PATH")),
        "only for a single chip"
    );
    // Env is sorted by key.
    let keys: Vec<&str> = argv
        .windows(2)
        .filter(|w| w[0] == "--env")
        .map(|w| w[1].split('=').next().unwrap())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    // Host network: nothing to publish.
    let mut req = request(Chips::None);
    req.network = Some("host".into());
    let spec = compose(&req, &host(false));
    assert!(spec.publish.is_none());
    assert!(!spec.ipc_host && spec.cap_add.is_empty() && spec.devices.is_empty());
}
