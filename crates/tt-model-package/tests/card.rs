//! The model card: frontmatter, section order, provenance, and cell escaping.

use crate::common;

use tt_model_manifest::wire::{Built, TtMetalBuild};
use tt_model_package::card::render_card;
use tt_model_package::spec::{CardSettings, License, ProfileSummary};

fn facts() -> Built {
    Built {
        tt_model_version: "0.0.0-test".into(),
        created_at: "2026-11-30T00:00:00Z".into(),
        code_sha256: Some(
            "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".into(),
        ),
        tt_metal: TtMetalBuild {
            sha: Some("668c2907575aaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into()),
            remote: Some("git@github.com:tenstorrent/tt-metal.git".into()),
            dirty: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn a_card_names_its_bases_and_says_when_it_is_the_local_python_base() {
    let spec = common::vllm_plugin();
    let base = "local/python:tt-model@sha256:".to_string() + &"ab".repeat(32);
    let mut local = facts();
    local.base_images.insert("builder".into(), base.clone());
    local.base_images.insert("runtime".into(), base.clone());
    let card = render_card(&spec, &local).unwrap();
    assert!(
        card.contains(&format!("| runtime base | `{base}` |")),
        "{card}"
    );
    assert!(
        card.contains("Built on tt-model's local Debian base"),
        "{card}"
    );
    let mut upstream = facts();
    upstream.base_images.insert(
        "runtime".into(),
        "ubuntu:22.04@sha256:".to_string() + &"cd".repeat(32),
    );
    let card = render_card(&spec, &upstream).unwrap();
    assert!(
        card.contains("| runtime base | `ubuntu:22.04@sha256:"),
        "{card}"
    );
    assert!(!card.contains("local Debian base"), "{card}");
}

#[test]
fn a_full_card_with_two_profiles() {
    let mut spec = common::vllm_plugin();
    spec.card = Some(CardSettings {
        description: Some("Llama on four p150s.\n".into()),
        intended_use: Some("Chat.".into()),
        out_of_scope_use: Some("Medical advice.".into()),
        performance: Some("40 tok/s | per user".into()),
        limitations: Some("   ".into()),
        status: Some("beta".into()),
        license: Some(License {
            id: "other".into(),
            name: Some("Llama 3.1 Community License".into()),
            link: Some("https://llama.meta.com/license".into()),
        }),
        ..Default::default()
    });
    spec.profiles.push(ProfileSummary {
        name: "long".into(),
        default: false,
        hardware: Some("p150x4".into()),
        mesh: Some("P150x4".into()),
        max_model_len: Some(131072),
    });
    let card = render_card(&spec, &facts()).unwrap();
    insta::assert_snapshot!(card);
    // Section order of the original.
    let order = [
        "# demo-vllm-plugin",
        "## At a glance",
        "## Intended use",
        "## Quickstart",
        "## Serve profiles",
        "## Using it",
        "## Expected performance",
        "## Limitations",
        "## Provenance",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|h| card.find(h).unwrap_or_else(|| panic!("{h} missing")))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(card.contains("40 tok/s \\| per user") || card.contains("40 tok/s | per user"));
    assert!(
        card.contains("## Limitations\n\n_Not provided by the package author._"),
        "whitespace-only counts as missing"
    );
    assert!(card.contains("https://github.com/tenstorrent/tt-metal/commit/668c2907575"));
    assert!(card.contains("dirty tree"));
    assert!(card.contains("license_name: llama-3-1-community-license"));
    assert!(card.contains("pipeline_tag: text-generation"));
}

#[test]
fn a_minimal_card_defaults_base_model_to_the_weights() {
    let spec = common::http_server();
    let card = render_card(
        &spec,
        &Built {
            tt_metal: TtMetalBuild::default(),
            ..facts()
        },
    )
    .unwrap();
    assert!(
        card.contains("base_model:\n- acme/demo-weights\n"),
        "{card}"
    );
    assert!(!card.contains("pipeline_tag"), "{card}");
    assert!(card.contains("a local tree without git metadata"), "{card}");
    assert!(card.contains("`0123456789abcdef`"), "{card}");
}

#[test]
fn a_card_records_the_shipped_rust_binary() {
    let spec = common::http_server();
    let cargo = tt_model_manifest::wire::CargoBuild {
        package: "gr00t-server".into(),
        version: "0.1.0".into(),
        bin: "gr00t-server".into(),
        path: "/usr/local/bin/gr00t-server".into(),
        sha256: "ab".repeat(32),
        bytes: 12_000_000,
        features: vec![],
        profile: "release".into(),
        target: "x86_64-unknown-linux-gnu".into(),
        static_link: true,
        debuginfo: false,
        rustc: "rustc 1.95.0 (59807616e 2026-04-14)".into(),
        workspace_commit: Some("18db6a4".repeat(5) + "abcde"),
        workspace_dirty: true,
        cargo_lock_sha256: "cd".repeat(32),
    };
    let card = render_card(
        &spec,
        &Built {
            cargo: Some(cargo),
            ..facts()
        },
    )
    .unwrap();
    assert!(
        card.contains("| runtime binary | `/usr/local/bin/gr00t-server`: gr00t-server 0.1.0, release, statically linked for x86_64-unknown-linux-gnu, sha256 `abababababababab` |"),
        "{card}"
    );
    assert!(card.contains("(dirty — uncommitted changes were built), `Cargo.lock` sha256 `cdcdcdcdcdcdcdcd`, rustc 1.95.0 (59807616e 2026-04-14) |"), "{card}");
    let plain = render_card(&spec, &facts()).unwrap();
    assert!(!plain.contains("runtime binary"), "{plain}");
}

/// What `tt` relies on: the tags it finds and classifies bundles by (`tt-model-cache`,
/// `tt-model-container`, arch, kind, every profile's hardware lowercased), the `tt` quickstart
/// fence before tt-model's own, and the author's `card.architecture` in the glance table.
#[test]
fn a_card_carries_the_tags_and_quickstart_tt_reads() {
    let mut spec = common::vllm_plugin();
    spec.card = Some(CardSettings {
        architecture: Some("Llama 3.1 decoder, 8B".into()),
        ..Default::default()
    });
    spec.profiles.push(ProfileSummary {
        name: "wide".into(),
        default: false,
        hardware: Some("P300x2".into()),
        mesh: None,
        max_model_len: None,
    });
    let card = render_card(&spec, &facts()).unwrap();
    let front = card.split("\n---\n").next().unwrap();
    for tag in [
        "- tt-model-cache\n",
        "- tt-model-container\n",
        "- blackhole\n",
        "- vllm-plugin\n",
        "- p150x4\n",
        "- p300x2\n",
    ] {
        assert!(front.contains(tag), "{tag} missing from {front}");
    }
    let tt = card
        .find("uv tool install tenstorrent\ntt model pull acme/demo\ntt serve acme/demo\n")
        .expect(&card);
    let own = card
        .find("tt-model pull acme/demo --with-weights\ntt-model serve acme/demo\n")
        .expect(&card);
    assert!(tt < own, "the tt fence comes first");
    assert!(card.contains("Without tt-cli — tt-model alone does the whole job"));
    assert!(
        card.contains("| Architecture | Llama 3.1 decoder, 8B |"),
        "{card}"
    );
}
