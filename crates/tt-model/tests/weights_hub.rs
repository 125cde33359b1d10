//! `tt-model weights TARGET [--check]` against the Hub-protocol test server: every weights
//! repository of a staged package (the primary with its `allow_patterns`, and an auxiliary
//! one) is fetched at its pinned revision into a private HF cache, and `--check` then passes;
//! `--check` on an empty cache fails naming the repo, and a pin the Hub does not have is
//! refused naming the repo and the revision. What a fleet's weights Job and its pods' init
//! containers run (`serve --print k8s --tools-image`). No engine needed.

use std::path::{Path, PathBuf};

use crate::common;

use common::*;
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

const PRIMARY: &str = "acme/minimal-http-weights";
const PRIMARY_COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const AUX: &str = "acme/drafter";
const AUX_COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";
const UNKNOWN: &str = "ffffffffffffffffffffffffffffffffffffffff";

/// A staged package pinning `revision` of the primary weights (only `*.safetensors` and
/// `config.json`) and the drafter at its commit.
fn manifest(dir: &Path, revision: &str) -> PathBuf {
    let m = serde_json::json!({
        "schema_version": "5.1", "name": "echo", "arch": "blackhole",
        "weights": {"repo_id": PRIMARY, "revision": revision,
                    "allow_patterns": ["*.safetensors", "config.json"]},
        "auxiliary_weights": [{"repo_id": AUX, "revision": AUX_COMMIT}],
        "container": {
            "image": {"registry": "hf", "repository": "echo", "tag": "1"},
            "built": {"image": "tt-model/echo:1", "image_digest": "sha256:b", "tt_model_version": "5.1.0",
                      "created_at": "2026-12-02T00:00:00Z"},
            "kind": "http-server",
            "runtime": {"command": ["/serve.sh", "{port}"], "health_path": "/healthz"},
            "serve_profiles": [{"name": "default"}], "default_profile": "default"
        }
    });
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("tt_kernel_manifest.json");
    std::fs::write(&path, m.to_string()).unwrap();
    path
}

fn repos() -> Vec<FakeRepo> {
    let mut primary = FakeRepo::new(
        PRIMARY,
        vec![
            FakeFile::lfs("model.safetensors", vec![1u8; 4096]),
            FakeFile::regular("config.json", b"{\"hidden\": 8}".to_vec()),
            FakeFile::lfs("original/consolidated.pth", vec![2u8; 2048]),
        ],
    );
    primary.commit = PRIMARY_COMMIT.into();
    let mut aux = FakeRepo::new(
        AUX,
        vec![FakeFile::lfs("drafter.safetensors", vec![3u8; 1024])],
    );
    aux.commit = AUX_COMMIT.into();
    vec![primary, aux]
}

fn snapshot(hub: &Path, repo: &str, commit: &str) -> PathBuf {
    hub.join(format!("models--{}", repo.replace('/', "--")))
        .join("snapshots")
        .join(commit)
}

#[tokio::test(flavor = "multi_thread")]
async fn weights_fetches_every_pinned_repo_and_check_then_passes() {
    let server = HubServer::start(repos()).await.unwrap();
    let tmp = TempDir::new("weights-fill");
    let t = tmp.0.clone();
    let endpoint = server.endpoint();
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let path = manifest(&t.join("pkg"), PRIMARY_COMMIT);
    let target = path.to_str().unwrap();
    let run = |args: &[&str]| tokio::task::block_in_place(|| tt_model(&t, &env, args));

    // Nothing in the cache yet: the check fails, naming each missing repo at its revision.
    let empty = run(&["weights", "--check", target]);
    let text = stderr(&empty);
    assert_eq!(empty.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{PRIMARY}@{PRIMARY_COMMIT}"))
            && text.contains(&format!("{AUX}@{AUX_COMMIT}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("tt-model weights {target}")),
        "{text}"
    );
    assert!(
        !t.join("hub")
            .join(format!("models--{}", PRIMARY.replace('/', "--")))
            .exists()
    );

    let fill = run(&["weights", target]);
    let text = stderr(&fill);
    assert_eq!(fill.status.code(), Some(0), "{text}");
    let primary = snapshot(&t.join("hub"), PRIMARY, PRIMARY_COMMIT);
    assert_eq!(
        std::fs::read(primary.join("model.safetensors")).unwrap(),
        vec![1u8; 4096]
    );
    assert_eq!(
        std::fs::read(primary.join("config.json")).unwrap(),
        b"{\"hidden\": 8}"
    );
    assert!(
        !primary.join("original/consolidated.pth").exists(),
        "allow_patterns honoured"
    );
    let aux = snapshot(&t.join("hub"), AUX, AUX_COMMIT);
    assert_eq!(
        std::fs::read(aux.join("drafter.safetensors")).unwrap(),
        vec![3u8; 1024]
    );

    // Complete at the pinned revisions: the check passes, with no Hub needed.
    let check = tokio::task::block_in_place(|| tt_model(&t, &[], &["weights", "--check", target]));
    assert_eq!(check.status.code(), Some(0), "{}", stderr(&check));

    // Run again: nothing to fetch, still 0.
    let again = run(&["weights", target]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revision_the_hub_does_not_have_is_refused_naming_it() {
    let server = HubServer::start(repos()).await.unwrap();
    let tmp = TempDir::new("weights-unknown");
    let t = tmp.0.clone();
    let endpoint = server.endpoint();
    let path = manifest(&t.join("pkg"), UNKNOWN);
    let out = tokio::task::block_in_place(|| {
        tt_model(
            &t,
            &[("HF_ENDPOINT", endpoint.as_str())],
            &["weights", path.to_str().unwrap()],
        )
    });
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("{PRIMARY}@{UNKNOWN}")), "{text}");
    assert!(
        !snapshot(&t.join("hub"), PRIMARY, UNKNOWN).exists(),
        "nothing stored under the unknown revision"
    );
    // And the check agrees: nothing is there at that revision.
    let check = tokio::task::block_in_place(|| {
        tt_model(&t, &[], &["weights", "--check", path.to_str().unwrap()])
    });
    let text = stderr(&check);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("{PRIMARY}@{UNKNOWN}")), "{text}");
}
