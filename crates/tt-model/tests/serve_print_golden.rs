//! `tt-model serve <example> --print` before anything is built: the container argv for a
//! host with a card, pinned as a golden file per example. Nothing runs and no engine is needed.
//! `UPDATE_GOLDEN=1` rewrites the files (review the diff).

use std::path::Path;
use std::process::Command;

fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The argv with this machine's parts replaced by stable names.
fn normalized(line: &str, tmp: &Path) -> String {
    let mut out = Vec::new();
    let mut words = line.split(' ').peekable();
    while let Some(w) = words.next() {
        match w {
            "--user" => {
                words.next();
                out.push("--user $UID:$GID".to_string());
            }
            // Present only where the host has 1 GiB hugepages mounted.
            "--mount" if words.peek().is_some_and(|m| m.contains("hugepages")) => {
                words.next();
            }
            _ => out.push(w.replace(&tmp.display().to_string(), "$TMP")),
        }
    }
    out.join(" ")
}

fn print_argv(example: &str, args: &[&str]) -> (String, String) {
    let tmp = std::env::temp_dir().join(format!("tt-model-print-{example}-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .current_dir(repo_root().join("examples").join(example))
        .args(["serve", "."])
        .args(args)
        .env("NO_COLOR", "1")
        .env("TT_MODEL_HOME", tmp.join("state"))
        .env("HF_HUB_CACHE", tmp.join("hub"))
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let line = normalized(String::from_utf8_lossy(&out.stdout).trim_end(), &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    (line, stderr)
}

fn check_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, format!("{actual}\n")).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        actual,
        want.trim_end(),
        "{} differs (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

#[test]
fn gr00t_rs_example_prints_the_card_argv_before_it_is_built() {
    let (line, stderr) = print_argv("gr00t-n1.6-3b-p150-rs", &["--print", "--device-id", "0"]);
    assert!(
        stderr.contains("is not packaged yet")
            && stderr.contains("tt-model/gr00t-n1.6-3b-p150-rs:unbuilt"),
        "{stderr}"
    );
    // What a card host needs, and the Rust server as the command.
    for part in [
        "--device /dev/tenstorrent/0:/dev/tenstorrent/0",
        "--ipc host",
        "--cap-add IPC_LOCK",
        "--env GR00T_DIT_BACKEND=megakernel",
        "--env GR00T_MK_DEVICE=p150a",
        "--env TT_WEIGHTS_REVISION=d0814e7ecb19202e7c8468b46098b0b7ef3a6d61",
        "--label tt.model.health_path=/health",
        "tt-model/gr00t-n1.6-3b-p150-rs:unbuilt gr00t-server --host 0.0.0.0 --port 20000",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
    check_golden("serve-print-gr00t-n1.6-3b-p150-rs.txt", &line);
}

#[test]
fn gr00t_tiny_example_prints_a_cpu_argv() {
    let (line, _) = print_argv("gr00t-tiny", &["--print"]);
    assert!(
        !line.contains("/dev/tenstorrent"),
        "runtime.device: none: {line}"
    );
    assert!(!line.contains("--cap-add"), "{line}");
    check_golden("serve-print-gr00t-tiny.txt", &line);
}

/// A published vLLM package pins its weights: `serve --print` shows `vllm serve <id>
/// --revision <sha>` (the engine loads the snapshot serve mounted, not the branch tip), and
/// the same pin in `TT_MODEL_WEIGHTS_REVISION`.
#[test]
fn a_vllm_package_serves_its_pinned_weights_revision() {
    let tmp = std::env::temp_dir().join(format!("tt-model-print-vllm-{}", std::process::id()));
    let dir = tmp.join("out/qwen3-8b");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = serde_json::json!({
        "schema_version": "5.1",
        "name": "qwen3-8b",
        "weights": {"repo_id": "Qwen/Qwen3-8B", "revision": "b968826d9c46dd6066d109eabc6255188de91218"},
        "container": {
            "image": {"registry": "hf", "repository": "tt-model/qwen3-8b", "tag": "0.1.0"},
            "kind": "vllm-plugin",
            "runtime": {},
            "serve": {"hardware": "p150", "mesh_device": "P150", "max_num_seqs": 32, "block_size": 64},
            "serve_profiles": [{"name": "p150"}],
            "default_profile": "p150"
        }
    });
    let path = dir.join("tt_kernel_manifest.json");
    std::fs::write(&path, manifest.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .args([
            "serve",
            path.to_str().unwrap(),
            "--print",
            "--device-id",
            "0",
        ])
        .env("NO_COLOR", "1")
        .env("TT_MODEL_HOME", tmp.join("state"))
        .env("HF_HUB_CACHE", tmp.join("hub"))
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = normalized(String::from_utf8_lossy(&out.stdout).trim_end(), &tmp);
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        line.ends_with(
            "tt-model/qwen3-8b:0.1.0 vllm serve Qwen/Qwen3-8B --revision \
             b968826d9c46dd6066d109eabc6255188de91218 --max-num-seqs 32 --block-size 64 --port 20000"
        ),
        "{line}"
    );
    check_golden("serve-print-vllm-plugin-revision.txt", &line);
}
