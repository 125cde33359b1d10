//! `tt-model serve TARGET --print k8s`: the fleet of every servable example (every example
//! `serve --print` accepts) in both forms of the card (a DRA claim, the default, and
//! `--devices extended`), of a staged registry package and of the GR00T -rs card example at
//! 4 replicas (a golden file), each checked by `kubernetes-validate --strict` against
//! Kubernetes 1.34's schemas (required under `CI`). Nothing runs; no engine or cluster needed.
//! `UPDATE_GOLDEN=1` rewrites the golden file (review the diff).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tt_model_testkit::k8s::{validate, validator_or_skip};

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
        let on_card = serve(&dir, ".", &["--print"])
            .stdout
            .windows(16)
            .any(|w| w == b"/dev/tenstorrent");
        for devices in ["dra", "extended"] {
            let what = format!("{name} --devices {devices}");
            let yaml = ok_stdout(
                &what,
                &serve(
                    &dir,
                    ".",
                    &["--print", "k8s", "--image", &image, "--devices", devices],
                ),
            );
            assert!(yaml.contains(&format!("image: {image}")), "{what}:\n{yaml}");
            for kind in [
                "kind: Deployment",
                "kind: Service",
                "kind: PodDisruptionBudget",
            ] {
                assert!(yaml.contains(kind), "{what}: no {kind}\n{yaml}");
            }
            // A card example claims its boards (DRA) or asks for chips (extended); one
            // without a card does neither.
            let claims = yaml.contains("kind: ResourceClaimTemplate");
            let chips = yaml.contains("tenstorrent.com/chip:");
            assert_eq!(
                (claims, chips),
                (
                    on_card && devices == "dra",
                    on_card && devices == "extended"
                ),
                "{what}:\n{yaml}"
            );
            check_valid(&what, &yaml);
        }
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
    assert!(
        !yaml.contains("tenstorrent.com/board") && !yaml.contains("tenstorrent.com/p150"),
        "no hand-made board label, no per-board extended resource:\n{yaml}"
    );
    for part in [
        "replicas: 4",
        "kind: ResourceClaimTemplate",
        "deviceClassName: tenstorrent.com",
        "allocationMode: ExactCount",
        "count: 1",
        "expression: device.attributes[\"tenstorrent.com\"].boardName == \"p150\"",
        "resourceClaimTemplateName: tt-model-gr00t-n1-6-3b-p150-rs-default",
        "hugepages-1Gi: 1Gi",
        "hostIPC: true",
        "path: /dev/hugepages-1G",
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
        "count: 2".into(),
        "boardName == \"p150\"".into(),
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

/// The 4-board example: one claim for exactly four p150 boards, selected by board name (never
/// chipArch + chipCount), with a GiB of hugepages per chip; `--devices extended` asks for its
/// four chips instead, or for another resource with `--board-resource`.
#[test]
fn p150x4_example_claims_four_p150_boards_by_name() {
    let dir = repo_root().join("examples/llama-3.1-8b-p150x4");
    let image = format!("registry.example/tt-model/llama@{DIGEST}");
    let yaml = ok_stdout(
        "p150x4",
        &serve(&dir, ".", &["--print", "k8s", "--image", &image]),
    );
    let template = yaml
        .split("---\n")
        .find(|d| d.contains("kind: ResourceClaimTemplate"))
        .unwrap_or_else(|| panic!("no claim template:\n{yaml}"));
    for part in [
        "allocationMode: ExactCount",
        "count: 4",
        "deviceClassName: tenstorrent.com",
        "expression: device.attributes[\"tenstorrent.com\"].boardName == \"p150\"",
    ] {
        assert!(template.contains(part), "{part}:\n{template}");
    }
    assert!(!template.contains("chipArch") && !template.contains("chipCount"));
    assert_eq!(
        yaml.matches("hugepages-1Gi: 4Gi").count(),
        2,
        "request = limit:\n{yaml}"
    );

    let extended = ok_stdout(
        "p150x4 extended",
        &serve(
            &dir,
            ".",
            &["--print", "k8s", "--image", &image, "--devices", "extended"],
        ),
    );
    assert!(
        extended.contains("tenstorrent.com/chip: \"4\""),
        "{extended}"
    );
    let named = ok_stdout(
        "p150x4 named",
        &serve(
            &dir,
            ".",
            &[
                "--print",
                "k8s",
                "--image",
                &image,
                "--devices",
                "extended",
                "--board-resource",
                "squat.ai/tenstorrent",
            ],
        ),
    );
    assert!(named.contains("squat.ai/tenstorrent: \"4\""), "{named}");
    check_valid("p150x4", &yaml);
    check_valid("p150x4 extended", &extended);

    // A resource name means nothing to a DRA claim: refused, with the flag that makes it count.
    let refused = serve(
        &dir,
        ".",
        &[
            "--print",
            "k8s",
            "--image",
            &image,
            "--board-resource",
            "squat.ai/tenstorrent",
        ],
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("--devices extended"),
        "{stderr}"
    );
}

/// serve's own options after a passed-through one are still serve's (the original's click
/// parses them wherever they stand), and a near miss of one is named.
#[test]
fn own_options_after_a_passed_through_one_still_count() {
    let dir = repo_root().join("examples/gr00t-n1.6-3b-p150-rs");
    let image = format!("ghcr.io/changh95/gr00t-n1.6-3b-p150-rs@{DIGEST}");
    let out = serve(
        &dir,
        ".",
        &[
            "--print",
            "k8s",
            "--replica",
            "3",
            "--image",
            &image,
            "--prot",
            "9",
        ],
    );
    let yaml = ok_stdout("passthrough", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(yaml.contains(&format!("image: {image}")), "{yaml}");
    assert!(
        yaml.contains("replicas: 1"),
        "--replica is not --replicas:\n{yaml}"
    );
    for (given, meant) in [("--replica", "--replicas"), ("--prot", "--port")] {
        assert!(
            stderr.lines().any(|l| l.starts_with('!')
                && l.contains(given)
                && l.contains(&format!("Did you mean {meant}?"))),
            "no warning for {given}:\n{stderr}"
        );
    }
    // The passed-through flags reach the server's argv, each with its value.
    let args_at = yaml.find("- args:").expect("args");
    let argv: Vec<&str> = yaml[args_at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("        - "))
        .map(|l| l.trim_start_matches("        - ").trim_matches('"'))
        .collect();
    assert!(
        argv.ends_with(&["--replica", "3", "--prot", "9"]),
        "{argv:?}"
    );
}
