//! `examples/gr00t-n1.7-tiny` against the loopback Hub-protocol server, without an engine: the
//! example pins exactly the revisions the fixture repos are served at (the golden tiny N1.7
//! checkpoint, and the backbone's processor files as auxiliary weights), `tt-model weights`
//! fetches both with the example's `allow_patterns` into an HF cache, the `serve.env` that
//! points `gr00t-server` at the two snapshots names the same pins, and `serve --print` then
//! mounts that cache read-only and offline. (The docker end to end is N1.6's, gr00t_image.rs:
//! the packaging and serving path is the same binary and the same code; N1.7's serving is
//! checked against NVIDIA's reference in gr00t-server's tests.)

use crate::common;

use std::path::{Path, PathBuf};

use base64::Engine;
use common::*;
use tt_model_manifest::wire::WeightsRef;
use tt_model_manifest::{CheckOptions, load_path};
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

/// The N1.7 checkpoint repository the example pins, and the revision the fixture is served at
/// (a fixture's name: sha1 of the repository id, not a commit of any real Hub).
pub(crate) const WEIGHTS_REPO: &str = "tt-model-fixtures/gr00t-n1.7-tiny";
pub(crate) const REVISION: &str = "b1eb40826e5095ca8084574b0c859b5e0602386b";
/// The backbone's processor files (tiny Cosmos-Reason2 layout), pinned the same way.
pub(crate) const PROCESSOR_REPO: &str = "tt-model-fixtures/cosmos-reason2-tiny";
pub(crate) const PROCESSOR_REVISION: &str = "0e6accb54a882bc2ff623b80be086d87b0dbe5a3";
/// What the weights snapshot must hold for `gr00t-server` (and nothing of the processor's).
const CHECKPOINT_FILES: [&str; 8] = [
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "processor_config.json",
    "statistics.json",
    "embodiment_id.json",
    "demo/request.json",
    "demo/expected.json",
];
/// What the processor snapshot must hold for N1.7's prompt, image processor and backbone.
const PROCESSOR_FILES: [&str; 6] = [
    "config.json",
    "vocab.json",
    "merges.txt",
    "tokenizer_config.json",
    "chat_template.json",
    "preprocessor_config.json",
];

fn golden() -> PathBuf {
    repo_root().join("../shared/golden/gr00t-n17-tiny")
}

fn example() -> PathBuf {
    repo_root().join("examples/gr00t-n1.7-tiny")
}

/// One f32 tensor of a safetensors file: (shape, values) (read by hand: this crate needs no
/// safetensors).
fn f32_tensor(file: &Path, name: &str) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(file).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let t = &header[name];
    assert_eq!(t["dtype"], "F32", "{name}");
    let shape = t["shape"].as_array().unwrap();
    let shape = shape.iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let at = |i: usize| t["data_offsets"][i].as_u64().unwrap() as usize;
    let data = bytes[8 + n + at(0)..8 + n + at(1)]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (shape, data)
}

/// The golden case1 as a client sends it: each camera's frames (oldest first), each state
/// group's rows, the raw instruction and the reference's noise `[1, 40, 132]`.
fn case1_request() -> serde_json::Value {
    let case = golden().join("case1");
    let obs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(case.join("observation.json")).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut images = serde_json::Map::new();
    for (cam, frames) in obs["video_frames"].as_object().unwrap() {
        let list: Vec<String> = frames
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let png = case.join(format!("observation.{}.png", f.as_str().unwrap()));
                b64.encode(std::fs::read(png).unwrap())
            })
            .collect();
        images.insert(cam.clone(), serde_json::json!(list));
    }
    let mut state = serde_json::Map::new();
    for (g, v) in obs["state_raw"].as_object().unwrap() {
        state.insert(g.clone(), v[0].clone()); // [1, T, D] -> the T rows
    }
    let (shape, noise) = f32_tensor(&case.join("observation.safetensors"), "noise");
    let rows: Vec<Vec<f32>> = noise
        .chunks(*shape.last().unwrap())
        .map(<[f32]>::to_vec)
        .collect();
    serde_json::json!({"images": images, "state": state,
                       "instruction": obs["instruction_raw"], "noise": [rows]})
}

/// NVIDIA's decoded actions for case1, `{group: [[…] × 40]}`.
fn case1_actions() -> serde_json::Value {
    let taps = golden().join("case1/taps.safetensors");
    let mut m = serde_json::Map::new();
    for (g, _) in case1_request()["state"].as_object().unwrap() {
        let (shape, v) = f32_tensor(&taps, &format!("output.action.{g}"));
        let d = *shape.last().unwrap();
        m.insert(
            g.clone(),
            serde_json::json!(v.chunks(d).collect::<Vec<_>>()),
        );
    }
    serde_json::Value::Object(m)
}

/// The golden tiny N1.7 checkpoint as the Hub repo the example pins, with a demo (case1 and
/// NVIDIA's actions) for the boot self-check. No processor files: they are their own repo.
pub(crate) fn weights_repo() -> FakeRepo {
    let case = golden().join("case1");
    let mut files = vec![FakeFile::lfs(
        "model.safetensors",
        std::fs::read(case.join("model.safetensors")).unwrap(),
    )];
    for f in &CHECKPOINT_FILES[..6] {
        if *f != "model.safetensors" {
            files.push(FakeFile::regular(f, std::fs::read(case.join(f)).unwrap()));
        }
    }
    // A file the example's allow_patterns leave on the Hub.
    files.push(FakeFile::regular("taps.md", b"not for serving".to_vec()));
    files.push(FakeFile::regular(
        "demo/request.json",
        serde_json::to_vec(&case1_request()).unwrap(),
    ));
    files.push(FakeFile::regular(
        "demo/expected.json",
        serde_json::to_vec(&serde_json::json!({"actions": case1_actions()})).unwrap(),
    ));
    let mut repo = FakeRepo::new(WEIGHTS_REPO, files);
    repo.commit = REVISION.into();
    repo
}

/// The backbone's processor files of the golden (`cosmos_reason2_tiny/`), as their own repo.
pub(crate) fn processor_repo() -> FakeRepo {
    let mut files = Vec::new();
    repo_files(&golden().join("cosmos_reason2_tiny"), "", &mut files);
    let mut repo = FakeRepo::new(PROCESSOR_REPO, files);
    repo.commit = PROCESSOR_REVISION.into();
    repo
}

fn snapshot(hub: &Path, repo: &str, commit: &str) -> PathBuf {
    hub.join(format!("models--{}", repo.replace('/', "--")))
        .join("snapshots")
        .join(commit)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_n17_example_pins_what_the_fixture_hub_serves_and_serves_offline() {
    let (m, warnings) = load_path(&example().join("tt-model.yaml"), &CheckOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warnings.is_empty(), "{warnings:?}");
    let weights = WeightsRef::from(&m.weights);
    let aux: Vec<WeightsRef> = m.auxiliary_weights.iter().map(WeightsRef::from).collect();
    assert_eq!(
        (weights.repo_id.as_str(), weights.revision.as_deref()),
        (WEIGHTS_REPO, Some(REVISION))
    );
    assert_eq!(aux.len(), 1, "{aux:?}");
    assert_eq!(
        (aux[0].repo_id.as_str(), aux[0].revision.as_deref()),
        (PROCESSOR_REPO, Some(PROCESSOR_REVISION))
    );
    // The server is pointed at the same two snapshots, offline.
    let env = &m.serve.env;
    for (k, v) in [
        ("TT_WEIGHTS_REPO", WEIGHTS_REPO),
        ("TT_WEIGHTS_REVISION", REVISION),
        ("GR00T_TOKENIZER_REPO", PROCESSOR_REPO),
        ("GR00T_TOKENIZER_REVISION", PROCESSOR_REVISION),
        ("GR00T_VERSION", "n17"),
    ] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "serve.env.{k}");
    }

    // `tt-model weights` on a staged package with the example's weights blocks.
    let server = HubServer::start(vec![weights_repo(), processor_repo()])
        .await
        .unwrap();
    let tmp = TempDir::new("gr00t-n17-example");
    let t = tmp.0.clone();
    let staged = t.join("pkg/tt_kernel_manifest.json");
    std::fs::create_dir_all(staged.parent().unwrap()).unwrap();
    let wire = serde_json::json!({
        "schema_version": "5.1", "name": m.name, "arch": "blackhole",
        "weights": weights, "auxiliary_weights": aux,
        "container": {
            "image": {"registry": "hf", "repository": m.name, "tag": "1"},
            "built": {"image": "tt-model/gr00t-n17-tiny:1", "image_digest": "sha256:b",
                      "tt_model_version": "5.1.0", "created_at": "2026-12-06T00:00:00Z"},
            "kind": "http-server",
            "runtime": {"command": ["gr00t-server"], "health_path": "/health"},
            "serve_profiles": [{"name": "default"}], "default_profile": "default"
        }
    });
    std::fs::write(&staged, wire.to_string()).unwrap();
    let target = staged.to_str().unwrap();
    let endpoint = server.endpoint();
    let fill = tokio::task::block_in_place(|| {
        tt_model(
            &t,
            &[("HF_ENDPOINT", endpoint.as_str())],
            &["weights", target],
        )
    });
    assert_eq!(fill.status.code(), Some(0), "{}", stderr(&fill));
    let hub = t.join("hub");
    let ckpt = snapshot(&hub, WEIGHTS_REPO, REVISION);
    for f in CHECKPOINT_FILES {
        assert!(ckpt.join(f).is_file(), "{f} in the weights snapshot");
    }
    assert!(!ckpt.join("taps.md").exists(), "allow_patterns honoured");
    assert_eq!(
        std::fs::read(ckpt.join("model.safetensors")).unwrap(),
        std::fs::read(golden().join("case1/model.safetensors")).unwrap()
    );
    let proc = snapshot(&hub, PROCESSOR_REPO, PROCESSOR_REVISION);
    for f in PROCESSOR_FILES {
        assert_eq!(
            std::fs::read(proc.join(f)).unwrap(),
            std::fs::read(golden().join("cosmos_reason2_tiny").join(f)).unwrap(),
            "{f} in the processor snapshot"
        );
    }
    let check = tokio::task::block_in_place(|| tt_model(&t, &[], &["weights", "--check", target]));
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));

    // Both snapshots complete: serve gives the container the cache read-only and offline, so
    // the gated backbone's files are never asked of a Hub.
    let print = std::process::Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .current_dir(example())
        .args(["serve", ".", "--print", "--device", "none"])
        .env("NO_COLOR", "1")
        .env("TT_MODEL_HOME", t.join("state"))
        .env("HF_HUB_CACHE", &hub)
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_TOKEN")
        .output()
        .unwrap();
    let argv = stdout(&print);
    assert!(print.status.success(), "{}", stderr(&print));
    assert!(
        argv.contains("dst=/hf-hub,readonly") && argv.contains("HF_HUB_OFFLINE=1"),
        "{argv}"
    );
    assert!(
        argv.contains(&format!("GR00T_TOKENIZER_REVISION={PROCESSOR_REVISION}")),
        "{argv}"
    );
}
