//! `serve --print k8s --tools-image REF`: the fleet fills its own weights claim. Besides the
//! Deployment, it holds the package's manifest (a ConfigMap), a ReadWriteMany claim (none when
//! `--weights-claim` names one), a Job that runs `tt-model weights` on the manifest with the
//! claim writable, and in each server pod an init container that runs `tt-model weights
//! --check` with the claim read-only; every document passes `kubernetes-validate --strict` at
//! 1.34. Without `--tools-image` the fleet is as before, with one `!` warning naming the flag.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tt_model_testkit::k8s::{validate, validator_or_skip};

const DIGEST: &str = "sha256:5e1f0c9a7b3d2e4f6a8b0c1d3e5f7a9b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f";
const TOOLS: &str =
    "ghcr.io/acme/tt-model@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const REVISION: &str = "d0814e7ecb19202e7c8468b46098b0b7ef3a6d61";

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/gr00t-n1.6-3b-p150-rs")
        .canonicalize()
        .unwrap()
}

fn serve(args: &[&str]) -> Output {
    let tmp = std::env::temp_dir().join(format!("tt-model-k8s-weights-{}", std::process::id()));
    let image = format!("ghcr.io/changh95/gr00t-n1.6-3b-p150-rs@{DIGEST}");
    Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .current_dir(example())
        .args(["serve", ".", "--print", "k8s", "--image", &image])
        .args(args)
        .env("NO_COLOR", "1")
        .env("TT_MODEL_HOME", tmp.join("state"))
        .env("HF_HUB_CACHE", tmp.join("hub"))
        .env("HF_ENDPOINT", "http://hub-mirror.internal:8080")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap()
}

fn ok(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The document of `kind`, or a panic showing the fleet.
fn doc<'a>(yaml: &'a str, kind: &str) -> &'a str {
    yaml.split("---\n")
        .find(|d| d.lines().any(|l| l == format!("kind: {kind}")))
        .unwrap_or_else(|| panic!("no {kind}:\n{yaml}"))
}

fn kinds(yaml: &str) -> Vec<String> {
    yaml.split("---\n")
        .filter_map(|d| d.lines().find_map(|l| l.strip_prefix("kind: ")))
        .map(str::to_string)
        .collect()
}

fn check_valid(what: &str, yaml: &str) {
    if let Some(v) = validator_or_skip()
        && let Err(report) = validate(&v, yaml)
    {
        panic!("{what}: kubernetes-validate --strict refused the fleet:\n{report}\n{yaml}");
    }
}

/// Whether the volume mount at `path` in a container's (or pod template's) text is
/// `readOnly`: the fields of one list item share the indentation of its `mountPath`.
fn mounts_read_only(container: &str, path: &str) -> bool {
    let lines: Vec<&str> = container.lines().collect();
    let want = format!("mountPath: {path}");
    let i = lines
        .iter()
        .position(|l| l.trim_start_matches([' ', '-']) == want)
        .unwrap_or_else(|| panic!("no mount at {path}:\n{container}"));
    let indent = lines[i].find("mountPath").unwrap();
    let same_item = |l: &&&str| {
        l.len() > indent && l[..indent].bytes().all(|b| b == b' ') && !l[indent..].starts_with(' ')
    };
    lines[i + 1..]
        .iter()
        .take_while(same_item)
        .any(|l| l.trim() == "readOnly: true")
}

#[test]
fn tools_image_fleet_fills_its_claim_with_a_job_and_pods_check_it() {
    let out = serve(&["--tools-image", TOOLS, "--replicas", "2"]);
    let yaml = ok("tools", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("--tools-image"), "no warning: {stderr}");
    assert_eq!(
        kinds(&yaml),
        [
            "ConfigMap",
            "PersistentVolumeClaim",
            "Job",
            "ResourceClaimTemplate",
            "Deployment",
            "Service",
            "PodDisruptionBudget"
        ],
        "{yaml}"
    );
    check_valid("tools", &yaml);

    let name = "tt-model-gr00t-n1-6-3b-p150-rs-default";
    let config_map = doc(&yaml, "ConfigMap");
    assert!(
        config_map.contains(&format!("name: {name}-manifest"))
            && config_map.contains("tt_kernel_manifest.json: |")
            && config_map.contains("\"repo_id\": \"nvidia/GR00T-N1.6-3B\"")
            && config_map.contains(REVISION),
        "{config_map}"
    );
    let claim = doc(&yaml, "PersistentVolumeClaim");
    for part in [
        format!("name: {name}-hf-hub"),
        "- ReadWriteMany".into(),
        "storage: 200Gi".into(),
    ] {
        assert!(claim.contains(&part), "{part}:\n{claim}");
    }

    let job = doc(&yaml, "Job");
    for part in [
        format!("name: {name}-weights-"),
        "backoffLimit: 6".into(),
        format!("image: {TOOLS}"),
        "- tt-model\n        - weights\n        - /etc/tt-model/tt_kernel_manifest.json\n".into(),
        format!("claimName: {name}-hf-hub"),
        "name: HF_HUB_CACHE\n          value: /hf-hub".into(),
        "name: HF_ENDPOINT\n          value: http://hub-mirror.internal:8080".into(),
        "name: hf-token".into(),
        "optional: true".into(),
        "readOnlyRootFilesystem: true".into(),
        "allowPrivilegeEscalation: false".into(),
        "runAsNonRoot: true".into(),
        "mountPath: /tmp".into(),
    ] {
        assert!(job.contains(&part), "{part}:\n{job}");
    }
    assert!(
        !mounts_read_only(job, "/hf-hub"),
        "the Job writes the claim:\n{job}"
    );
    let job_pod = &job[job.find("template:").unwrap()..];
    assert!(
        !job_pod.contains("app.kubernetes.io/instance"),
        "the Job's pod is not one of the Service's replicas:\n{job}"
    );

    let deployment = doc(&yaml, "Deployment");
    let init_at = deployment
        .find("initContainers:")
        .unwrap_or_else(|| panic!("{deployment}"));
    let check_at = deployment.find("name: weights-check").expect("check");
    let cleanup_at = deployment.find("name: hugepages-cleanup").expect("cleanup");
    assert!(init_at < check_at && check_at < cleanup_at, "{deployment}");
    let check = &deployment[deployment[..check_at].rfind("  - command:").unwrap()..cleanup_at];
    assert!(
        check.contains(
            "- tt-model\n        - weights\n        - --check\n        - /etc/tt-model/tt_kernel_manifest.json\n"
        ) && check.contains(&format!("image: {TOOLS}")),
        "{check}"
    );
    assert!(
        mounts_read_only(check, "/hf-hub"),
        "the check reads the claim:\n{check}"
    );
    assert!(!check.contains("HF_TOKEN"), "{check}");
    assert!(
        deployment.contains(&format!(
            "claimName: {name}-hf-hub\n          readOnly: true"
        )),
        "the servers read the fleet's claim, read-only:\n{deployment}"
    );
    assert!(
        deployment.contains(&format!("name: {name}-manifest")),
        "{deployment}"
    );
    assert_eq!(yaml.matches("replicas: 2").count(), 1, "{yaml}");
}

#[test]
fn an_existing_claim_is_used_and_none_is_created() {
    let yaml = ok(
        "claim",
        &serve(&["--tools-image", TOOLS, "--weights-claim", "team-hf-cache"]),
    );
    assert_eq!(
        kinds(&yaml),
        [
            "ConfigMap",
            "Job",
            "ResourceClaimTemplate",
            "Deployment",
            "Service",
            "PodDisruptionBudget"
        ],
        "{yaml}"
    );
    assert!(!yaml.contains("-hf-hub\n"), "{yaml}");
    assert!(
        doc(&yaml, "Job").contains("claimName: team-hf-cache\n"),
        "{yaml}"
    );
    assert!(
        doc(&yaml, "Deployment").contains("claimName: team-hf-cache\n          readOnly: true"),
        "{yaml}"
    );
    check_valid("claim", &yaml);
    let sized = ok(
        "sized",
        &serve(&["--tools-image", TOOLS, "--weights-size", "1Ti"]),
    );
    assert!(
        doc(&sized, "PersistentVolumeClaim").contains("storage: 1Ti"),
        "{sized}"
    );
}

#[test]
fn without_tools_image_the_fleet_is_unchanged_and_says_how_to_fill_the_claim() {
    let out = serve(&[]);
    let yaml = ok("plain", &out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with('!') && l.contains("--tools-image"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("tt-model-hf-hub"), "{stderr}");
    for kind in ["ConfigMap", "PersistentVolumeClaim", "Job"] {
        assert!(!kinds(&yaml).iter().any(|k| k == kind), "{kind}:\n{yaml}");
    }
    assert!(!yaml.contains("weights-check"), "{yaml}");
    // Pods that download their own weights read no claim: nothing to fill, nothing to warn.
    let own = serve(&["--no-weights"]);
    let stderr = String::from_utf8_lossy(&own.stderr);
    assert!(
        own.status.success() && !stderr.contains("--tools-image"),
        "{stderr}"
    );
}

#[test]
fn tools_image_refusals_name_what_to_fix() {
    let tagged = serve(&["--tools-image", "ghcr.io/acme/tt-model:1"]);
    let stderr = String::from_utf8_lossy(&tagged.stderr);
    assert_eq!(tagged.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ghcr.io/acme/tt-model:1") && stderr.contains("not pinned by digest"),
        "{stderr}"
    );
    // The pods download their own weights with --no-weights: no claim to fill.
    let both = serve(&["--tools-image", TOOLS, "--no-weights"]);
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert_eq!(both.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--no-weights"), "{stderr}");
    // A size means nothing for a claim that exists.
    let sized = serve(&[
        "--tools-image",
        TOOLS,
        "--weights-claim",
        "x",
        "--weights-size",
        "1Ti",
    ]);
    assert_eq!(sized.status.code(), Some(2));
}

/// Every servable example's fleet with `--tools-image`: those with weights get the ConfigMap,
/// the claim, the Job and the pods' check, those without stay as they were; all pass
/// `kubernetes-validate --strict`.
#[test]
fn every_servable_example_with_tools_image_renders_a_fleet_kubernetes_accepts() {
    let root = example().join("../..").canonicalize().unwrap();
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("tt-model.yaml").is_file())
        .collect();
    examples.sort();
    let tmp = std::env::temp_dir().join(format!("tt-model-k8s-weights-all-{}", std::process::id()));
    let (mut filled, mut plain) = (0, 0);
    for dir in examples {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let run = |args: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_tt-model"))
                .current_dir(&dir)
                .args(["serve", ".", "--print"])
                .args(args)
                .env("NO_COLOR", "1")
                .env("TT_MODEL_HOME", tmp.join("state"))
                .env("HF_HUB_CACHE", tmp.join("hub"))
                .env_remove("HF_TOKEN")
                .env_remove("HF_ENDPOINT")
                .output()
                .unwrap()
        };
        if !run(&[]).status.success() {
            continue; // not servable
        }
        let image = format!("registry.example/tt-model/{name}@{DIGEST}");
        let yaml = ok(
            &name,
            &run(&["k8s", "--image", &image, "--tools-image", TOOLS]),
        );
        let has_weights = yaml.contains("tt.model.weights:");
        let k = kinds(&yaml);
        for kind in ["ConfigMap", "PersistentVolumeClaim", "Job"] {
            assert_eq!(
                k.iter().any(|x| x == kind),
                has_weights,
                "{name}: {kind}\n{yaml}"
            );
        }
        assert_eq!(yaml.contains("name: weights-check"), has_weights, "{name}");
        assert!(
            !yaml.contains("HF_ENDPOINT"),
            "{name}: the public Hub needs no variable"
        );
        check_valid(&name, &yaml);
        if has_weights { filled += 1 } else { plain += 1 }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        filled >= 2,
        "examples with weights rendered: {filled} (and {plain} without)"
    );
}
