//! `whitelist` / `unwhitelist` against the Hub-protocol test server: a listed community package
//! is copied server-side into `Tenstorrent/<weights name>`, the copy's card records the review
//! (four frontmatter keys, one attribution block) and is listed; a re-run re-records instead of
//! stacking; a copy of another source is never overwritten; unlisted sources and non-Tenstorrent
//! ids are refused; `unwhitelist` delists the copy and keeps it.

use crate::common;

use common::*;
use serde_json::json;
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer, HubUser};

const REVIEWER: &str = "hf_reviewer";
const COPY: &str = "Tenstorrent/gr00t-n1.6-tiny";

fn package(id: &str, listed: bool) -> FakeRepo {
    let manifest = json!({
        "schema_version": "5.1", "name": "gr00t-tiny", "arch": "blackhole",
        "weights": {"repo_id": "tt-model-fixtures/gr00t-n1.6-tiny", "revision": "main"},
        "container": {"image": {"registry": "hf", "repository": "gr00t-tiny"}, "kind": "http-server"}
    });
    let tags = if listed {
        "tags:\n- tt-model-cache\n- tt-model-catalog\n"
    } else {
        "tags:\n- tt-model-cache\n"
    };
    FakeRepo::new(
        id,
        vec![
            FakeFile::regular("tt_kernel_manifest.json", manifest.to_string()),
            FakeFile::regular(
                "README.md",
                format!("---\nlicense: apache-2.0\n{tags}---\n# GR00T tiny\n"),
            ),
        ],
    )
}

async fn readme(endpoint: &str, repo: &str) -> String {
    let r = tt_model_local::openai::get(endpoint, &format!("/{repo}/resolve/main/README.md"))
        .await
        .expect("the Hub answers");
    assert_eq!(r.status, 200);
    String::from_utf8(r.body).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn whitelist_copies_records_and_lists_and_unwhitelist_delists() {
    let server = HubServer::start_with(
        vec![
            package("alice/gr00t-pkg", true),
            package("alice/unlisted", false),
            package("bob/same-weights", true),
        ],
        vec![HubUser::new(REVIEWER, "reviewer", &["Tenstorrent"])],
    )
    .await
    .unwrap();
    let tmp = TempDir::new("whitelist");
    let t = tmp.0.clone();
    let endpoint = server.endpoint();
    let env = [("HF_ENDPOINT", endpoint.as_str()), ("HF_TOKEN", REVIEWER)];
    let run = |args: &[&str]| tokio::task::block_in_place(|| tt_model(&t, &env, args));

    let unlisted = run(&["whitelist", "alice/unlisted"]);
    assert_eq!(unlisted.status.code(), Some(1));
    assert!(
        stderr(&unlisted).contains("is not in the community catalog"),
        "{}",
        stderr(&unlisted)
    );

    let first = run(&["whitelist", "alice/gr00t-pkg"]);
    let err = stderr(&first);
    assert!(first.status.success(), "{err}");
    assert!(
        err.contains("✓ copied alice/gr00t-pkg → Tenstorrent/gr00t-n1.6-tiny"),
        "{err}"
    );
    assert!(
        err.contains("→ withdraw it:  tt-model unwhitelist Tenstorrent/gr00t-n1.6-tiny"),
        "{err}"
    );
    assert!(server.tags(COPY).contains(&"tt-model-catalog".to_string()));
    assert_eq!(server.is_private(COPY), Some(false));
    let card = readme(&endpoint, COPY).await;
    let review = tt_model_hub::review::read(&card).expect("the review is on the card");
    assert_eq!(review.source, "alice/gr00t-pkg");
    assert_eq!(review.reviewer, "reviewer");
    assert_eq!(review.revision, server.head("alice/gr00t-pkg"));
    assert!(
        card.contains("license: apache-2.0"),
        "other frontmatter kept: {card}"
    );
    assert!(card.contains("**Published by [alice]"), "{card}");
    assert!(
        server
            .files(COPY, "main")
            .unwrap()
            .iter()
            .any(|f| f.path == "tt_kernel_manifest.json")
    );
    assert!(
        !readme(&endpoint, "alice/gr00t-pkg")
            .await
            .contains("tt_whitelist"),
        "the source is never written"
    );

    let again = run(&["whitelist", "alice/gr00t-pkg"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("re-recording the review"),
        "{}",
        stderr(&again)
    );
    let card = readme(&endpoint, COPY).await;
    assert_eq!(
        card.matches("<!-- tt-whitelist-attribution -->").count(),
        1,
        "{card}"
    );

    let clash = run(&["whitelist", "bob/same-weights"]);
    assert_eq!(clash.status.code(), Some(1));
    assert!(
        stderr(&clash).contains("already holds the reviewed copy of alice/gr00t-pkg"),
        "{}",
        stderr(&clash)
    );

    let not_ours = run(&["unwhitelist", "alice/gr00t-pkg"]);
    assert_eq!(not_ours.status.code(), Some(1));
    assert!(stderr(&not_ours).contains("is not a Tenstorrent copy"));
    let delist = run(&["unwhitelist", COPY]);
    assert!(delist.status.success(), "{}", stderr(&delist));
    assert!(!server.tags(COPY).contains(&"tt-model-catalog".to_string()));
    assert!(server.head(COPY).is_some(), "the copy stays");
    let twice = run(&["unwhitelist", COPY]);
    assert!(twice.status.success());
    assert!(
        stderr(&twice).contains("is not listed"),
        "{}",
        stderr(&twice)
    );

    let anonymous = tokio::task::block_in_place(|| {
        tt_model(
            &t,
            &[("HF_ENDPOINT", endpoint.as_str())],
            &["whitelist", "alice/gr00t-pkg"],
        )
    });
    assert_eq!(anonymous.status.code(), Some(1));
    assert!(
        stderr(&anonymous).contains("tt-model login"),
        "{}",
        stderr(&anonymous)
    );
}
