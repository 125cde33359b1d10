//! `tt-model serve TARGET --print k8s`: the fleet of every servable example (every example
//! `serve --print` accepts), of a staged registry package and of the GR00T -rs card example at
//! 4 replicas (a golden file), each checked by `kubernetes-validate --strict` against
//! Kubernetes 1.33's schemas (required under `CI`). Nothing runs; no engine or cluster needed.
//! `UPDATE_GOLDEN=1` rewrites the golden file (review the diff).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tt_model_fleet::testing::{validate, validator_or_skip};

/// A digest for examples rendered with `--image` (they are not built here).
const DIGEST: &str = "sha256:5e1f0c9a7b3d2e4f6a8b0c1d3e5f7a9b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `tt-model serve <target> <args>` in `dir`, with a private state directory.
fn serve(dir: &Path, target: &str, args: &[&str]) -> Output {
    let tmp = std::env::temp_dir().join(format!("tt-model-k8s-{}", std::process::id()));
    Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .current_dir(dir)
        .args(["serve", target])
        .args(args)
        .env("NO_COLOR", "1")
        .env("TT_MODEL_HOME", tmp.join("state"))
        .env("HF_HUB_CACHE", tmp.join("hub"))
        .env_remove("HF_TOKEN")
        .output()
        .unwrap()
}

fn check_valid(what: &str, yaml: &str) {
    if let Some(v) = validator_or_skip()
        && let Err(report) = validate(&v, yaml)
    {
        panic!("{what}: kubernetes-validate --strict refused the fleet:\n{report}\n{yaml}");
    }
}

fn ok_stdout(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn every_servable_example_renders_a_fleet_kubernetes_accepts() {
    let mut rendered = Vec::new();
    let mut examples: Vec<PathBuf> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("tt-model.yaml").is_file())
        .collect();
    examples.sort();
    for dir in examples {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // Servable: `serve --print` (the docker form) accepts it.
        if !serve(&dir, ".", &["--print"]).status.success() {
            eprintln!("{name}: not servable (serve --print refuses it)");
            continue;
        }
        let image = format!("registry.example/tt-model/{name}@{DIGEST}");
        let yaml = ok_stdout(
            &name,
            &serve(&dir, ".", &["--print", "k8s", "--image", &image]),
        );
        assert!(yaml.contains(&format!("image: {image}")), "{name}:\n{yaml}");
        for kind in [
            "kind: Deployment",
            "kind: Service",
            "kind: PodDisruptionBudget",
        ] {
            assert!(yaml.contains(kind), "{name}: no {kind}\n{yaml}");
        }
        check_valid(&name, &yaml);
        rendered.push(name);
    }
    for must in [
        "gr00t-n1.6-3b-p150-rs",
        "gr00t-tiny",
        "minimal-http",
        "llama-3.1-8b-p150x4",
    ] {
        assert!(
            rendered.iter().any(|r| r == must),
            "{must} not rendered: {rendered:?}"
        );
    }
}

#[test]
fn gr00t_rs_card_example_renders_four_replicas() {
    let dir = repo_root().join("examples/gr00t-n1.6-3b-p150-rs");
    let image = format!("ghcr.io/changh95/gr00t-n1.6-3b-p150-rs@{DIGEST}");
    let args = [
        "--print",
        "k8s",
        "--replicas",
        "4",
        "--namespace",
        "robots",
        "--image",
        &image,
    ];
    let yaml = ok_stdout("gr00t-rs", &serve(&dir, ".", &args));
    for part in [
        "replicas: 4",
        "tenstorrent.com/p150: \"1\"",
        "hugepages-1Gi: 1Gi",
        "tenstorrent.com/board: p150",
        "value: megakernel",
        "claimName: tt-model-hf-hub",
        "tt.model.weights: nvidia/GR00T-N1.6-3B@d0814e7ecb19202e7c8468b46098b0b7ef3a6d61",
        "runAsUser: 1000",
        "type: RuntimeDefault",
    ] {
        assert!(yaml.contains(part), "{part}:\n{yaml}");
    }
    check_valid("gr00t-rs", &yaml);
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/serve-print-k8s-gr00t-n1.6-3b-p150-rs.yaml");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &yaml).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        yaml,
        want,
        "{} differs (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

#[test]
fn a_hub_carried_image_is_refused_with_how_to_push_it_to_a_registry() {
    let dir = repo_root().join("examples/minimal-http");
    let out = serve(&dir, ".", &["--print", "k8s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{stderr}");
    assert!(
        stderr.contains("image.registry") && stderr.contains("tt-model push"),
        "{stderr}"
    );
    let tagged = serve(
        &dir,
        ".",
        &["--print", "k8s", "--image", "ghcr.io/acme/m:1"],
    );
    let stderr = String::from_utf8_lossy(&tagged.stderr);
    assert!(
        !tagged.status.success() && stderr.contains("not pinned by digest"),
        "{stderr}"
    );
}

#[test]
fn a_staged_registry_package_runs_its_pinned_digest() {
    let tmp = std::env::temp_dir().join(format!("tt-model-k8s-staged-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let manifest = serde_json::json!({
        "schema_version": "5.1", "name": "echo", "arch": "blackhole",
        "weights": {"repo_id": "acme/echo-weights", "revision": "0123456789abcdef0123456789abcdef01234567"},
        "container": {
            "image": {"registry": "127.0.0.1:5000/tt", "repository": "echo", "tag": "1", "digest": DIGEST},
            "built": {"image": "tt-model/echo:1", "image_digest": "sha256:b", "tt_model_version": "5.1.0",
                      "created_at": "2026-12-02T00:00:00Z"},
            "kind": "http-server",
            "runtime": {"command": ["/serve.sh", "{port}"], "health_path": "/healthz"},
            "serve": {"hardware": "p150x2"},
            "serve_profiles": [{"name": "default"}], "default_profile": "default"
        }
    });
    let path = tmp.join("tt_kernel_manifest.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    let out = serve(
        &tmp,
        path.to_str().unwrap(),
        &["--print", "k8s", "--replicas", "3", "--no-weights"],
    );
    let yaml = ok_stdout("staged", &out);
    let _ = std::fs::remove_dir_all(&tmp);
    for part in [
        format!("image: 127.0.0.1:5000/tt/echo@{DIGEST}"),
        "replicas: 3".into(),
        "tenstorrent.com/p150: \"2\"".into(),
        "hugepages-1Gi: 2Gi".into(),
        "path: /healthz".into(),
        "name: hf-token".into(),
    ] {
        assert!(yaml.contains(&part), "{part}:\n{yaml}");
    }
    assert!(
        !yaml.contains("HF_HUB_OFFLINE"),
        "--no-weights: the pods download\n{yaml}"
    );
    check_valid("staged", &yaml);
}
