//! Schema 5.1's rules on sources, verify steps, placeholders, legacy schemas, the card and
//! warnings, with their messages and locations (the identity, serve and runtime rules are in
//! `rules.rs`).

use crate::common;

use common::{BASE, check, edit, errors, one_error, warnings};

#[test]
fn source_rules() {
    let errs = errors(&edit("code: [models/m]", "code: [/abs, ../up, \"\"]"));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(errs[0].ends_with("source.code paths must be relative to the tt-metal tree: '/abs'"));
    assert!(
        one_error(&edit("code: [models/m]", "code: []"))
            .message
            .starts_with("source.code must list at least one path")
    );
    let extra = edit(
        "code: [models/m],",
        "code: [models/m], extra_code: [{root: code, paths: [../x]}],",
    );
    assert_eq!(
        one_error(&extra).message,
        "source.extra_code paths must be relative to their root: '../x'"
    );
    assert_eq!(
        one_error(&edit("python: \"3.12\"", "python: \"3\"")).message,
        "source.python '3' must be a Python version like \"3.12\""
    );
    // An unquoted 3.10 stays "3.10".
    let m = check(&edit("python: \"3.12\"", "python: 3.10"))
        .manifest
        .expect("valid");
    assert_eq!(m.source.python, "3.10");
    let git = edit(
        "tt_metal: tt",
        "tt_metal: {repo: tenstorrent/tt-metal, ref: main}",
    );
    assert!(errors(&git).is_empty());
    let report = check(&edit(
        "tt_metal: tt",
        "tt_metal: {repo: tenstorrent/tt-metal, reff: main}",
    ));
    let labels: Vec<_> = report
        .diagnostics
        .iter()
        .map(|d| (d.code, d.label.clone()))
        .collect();
    assert_eq!(
        labels,
        vec![("unknown-key", Some("did you mean `ref`?".to_owned()))],
        "the typo explains the missing key: one problem, one message"
    );
}

#[test]
fn verify_entries_are_python_or_shell() {
    let m = check(&format!(
        "{BASE}verify:\n  - \"import m\"\n  - sh: test -f /opt/x\n"
    ))
    .manifest
    .expect("valid");
    assert_eq!(m.verify.len(), 2);
    assert_eq!(m.verify[1].text(), "test -f /opt/x");
    let report = check(&format!("{BASE}verify:\n  - {{shell: ls}}\n"));
    assert!(
        report
            .diagnostics
            .iter()
            .any(|d| d.label.as_deref() == Some("did you mean `sh`?")),
        "{:#?}",
        report.diagnostics
    );
    assert_eq!(
        one_error(&format!("{BASE}verify:\n  - 42\n")).message,
        "expected a Python statement (string) or {sh: \"command\"}, found an integer"
    );
}

#[test]
fn a_shell_step_takes_only_sh() {
    let d = one_error(&format!("{BASE}verify:\n  - {{sh: ls, cwd: /tmp}}\n"));
    assert_eq!(d.code, "unknown-key");
    assert_eq!(d.path, "verify[0].cwd");
    assert_eq!(d.message, "unknown key `cwd` in `verify[0]`");
}

#[test]
fn a_placeholder_revision_is_called_a_placeholder() {
    for rev in ["\"<sha>\"", "\"{commit}\"", "TODO", "xxxxxxxx"] {
        let w = warnings(&edit(
            "revision: 0123456789abcdef0123456789abcdef01234567",
            &format!("revision: {rev}"),
        ));
        assert_eq!(w.len(), 1, "{rev}: {w:#?}");
        assert!(
            w[0].contains("is a placeholder, not a revision"),
            "{rev}: {w:#?}"
        );
        assert!(!w[0].contains("branch or tag"), "{rev}: {w:#?}");
    }
    // A branch name is still a branch that can move.
    let w = warnings(&edit(
        "revision: 0123456789abcdef0123456789abcdef01234567",
        "revision: v1.2",
    ));
    assert!(w[0].contains("a branch or tag can move"), "{w:#?}");
}

#[test]
fn a_schema_1_manifest_is_named_and_ported_not_judged_as_vllm_plugin() {
    let src = r#"schema: 1
repo: acme/m
name: m
type: vllm
weights: acme/w
arch: blackhole
source: {tt_metal: tt, code: [models/m], ubuntu: "22.04", python: "3.12"}
serve_profiles:
  - {name: p150, hardware: p150, mesh_device: P150}
"#;
    let report = check(src);
    let errs: Vec<_> = report.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errs.len(), 1, "{:#?}", report.diagnostics);
    let d = errs[0];
    assert_eq!(d.code, "schema-1");
    assert_eq!(d.path, "type");
    assert!(d.message.contains("schema-1 manifest"), "{}", d.message);
    assert_eq!(d.label.as_deref(), Some("write `kind: vllm-plugin`"));
    let help = d.help.as_deref().unwrap();
    assert!(
        help.contains("`type: vllm` is `kind: vllm-plugin`"),
        "{help}"
    );
    assert!(
        help.contains("`type: vllm-legacy` is `kind: vllm-fork`"),
        "{help}"
    );
    assert!(report.manifest.is_none());

    let legacy = check(&src.replace("type: vllm", "type: vllm-legacy"));
    let errs: Vec<_> = legacy.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errs.len(), 1, "{:#?}", legacy.diagnostics);
    assert_eq!(errs[0].label.as_deref(), Some("write `kind: vllm-fork`"));
}

#[test]
fn card_rules_and_normalisation() {
    let d = one_error(&format!("{BASE}card:\n  limitiations: x\n"));
    assert_eq!(d.label.as_deref(), Some("did you mean `limitations`?"));
    let d = one_error(&format!(
        "{BASE}card:\n  performance: p\n  limitations: l\n  license:\n    id: >\n      other\n"
    ));
    assert_eq!(
        d.message,
        "card.license.id 'other' needs a card.license.name (and preferably a link)"
    );
    assert!(
        one_error(&format!(
            "{BASE}card:\n  performance: p\n  limitations: l\n  license: {{id: Apache 2}}\n"
        ))
        .message
        .contains("does not look like a Hub licence identifier")
    );
}

#[test]
fn capability_typo_is_refused() {
    let d = one_error(&edit(
        "block_size: 64}",
        "block_size: 64, capabilities: {tool_praser: hermes}}",
    ));
    assert_eq!(d.label.as_deref(), Some("did you mean `tool_parser`?"));
    assert_eq!(d.path, "serve.capabilities.tool_praser");
}

#[test]
fn warnings_revision_env_and_card() {
    assert_eq!(
        warnings(&edit(
            "revision: 0123456789abcdef0123456789abcdef01234567",
            "revision: main"
        )),
        vec![
            "unpinned-weights 4:35 weights.revision 'main' is not a 40-hex commit; a branch or tag can move"
        ]
    );
    assert_eq!(
        warnings(&edit(
            "weights: {repo: acme/w, revision: 0123456789abcdef0123456789abcdef01234567}",
            "weights: acme/w"
        )),
        vec![
            "unpinned-weights 4:10 weights 'acme/w' follows the default branch; the files served can change under you"
        ]
    );
    let env = edit(
        "block_size: 64}",
        "block_size: 64, env: {TT_WEIGHTS_REVISION: abc}}",
    );
    assert_eq!(
        warnings(&env),
        vec![
            "env-contradiction 8:105 serve.env TT_WEIGHTS_REVISION='abc' contradicts weights.revision '0123456789abcdef0123456789abcdef01234567'"
        ]
    );
    assert_eq!(
        warnings(&format!("{BASE}card:\n  description: d\n")),
        vec![
            "card-gaps 9:1 card has no performance or limitations section; a publish would be refused"
        ]
    );
    assert!(
        warnings(&format!(
            "{BASE}card:\n  performance: p\n  limitations: \"  \"\n"
        ))[0]
            .contains("card has no limitations section")
    );
}

#[test]
fn check_sources_finds_missing_paths_and_unshipped_app() {
    let dir =
        std::env::temp_dir().join(format!("tt-model-manifest-sources-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("tt/models/m")).unwrap();
    std::fs::create_dir_all(dir.join("code/srv")).unwrap();
    std::fs::create_dir_all(dir.join("p")).unwrap();
    std::fs::write(dir.join("p/pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    let options = tt_model_manifest::CheckOptions {
        sources_base: Some(dir.clone()),
    };
    let ok = tt_model_manifest::check_str(BASE, &options);
    assert!(ok.diagnostics.is_empty(), "{:#?}", ok.diagnostics);
    // Local runtime sources as package stages them: a plugin directory that is not a
    // pip-installable project, a vLLM wheel and extra wheels that match no file.
    let local = edit(
        "plugin: {path: p}",
        "plugin: {path: code}, wheels: [w/x-1.0-py3-none-any.whl, \"w/*.whl\"]",
    );
    let errs: Vec<String> = tt_model_manifest::check_str(&local, &options)
        .diagnostics
        .iter()
        .map(common::short)
        .collect();
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0].starts_with(
            "source-missing 7:53 runtime.plugin.path 'code' has neither pyproject.toml nor setup.py"
        ),
        "{errs:#?}"
    );
    assert!(
        errs[1].starts_with(
            "source-missing 7:69 runtime.wheels entry 'w/x-1.0-py3-none-any.whl' matches no file"
        ),
        "{errs:#?}"
    );
    assert!(
        errs[2].starts_with("source-missing 7:95 runtime.wheels entry 'w/*.whl' matches no file"),
        "{errs:#?}"
    );
    let missing_vllm = edit("vllm: {version: \"0.10.1\"}", "vllm: {path: nowhere}");
    let errs: Vec<String> = tt_model_manifest::check_str(&missing_vllm, &options)
        .diagnostics
        .iter()
        .map(common::short)
        .collect();
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].contains("runtime.vllm.path 'nowhere' is not a directory"),
        "{errs:#?}"
    );
    let missing = tt_model_manifest::check_str(
        &edit("code: [models/m]", "code: [models/m, models/gone]"),
        &options,
    );
    let errs: Vec<String> = missing.diagnostics.iter().map(common::short).collect();
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with(
            "source-missing 6:41 source.code path 'models/gone' does not exist under "
        ),
        "{errs:#?}"
    );
    let dit = edit(
        "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}",
        "kind: tt-dit-server\nruntime: {app: \"srv.app:app\"}",
    )
    .replace(", max_num_seqs: 32, block_size: 64", "");
    let errs: Vec<String> = tt_model_manifest::check_str(&dit, &options)
        .diagnostics
        .iter()
        .map(common::short)
        .collect();
    assert_eq!(
        errs,
        vec![
            "app-not-shipped 8:16 runtime.app 'srv.app:app' imports package 'srv', which no source.code or source.extra_code entry ships"
        ]
    );
    let shipped = dit.replace(
        "ubuntu:",
        "extra_code: [{root: code, paths: [srv]}], ubuntu:",
    );
    assert!(
        tt_model_manifest::check_str(&shipped, &options)
            .diagnostics
            .is_empty()
    );
    // Without the option nothing touches the file system.
    assert!(
        check(&edit("code: [models/m]", "code: [models/gone]"))
            .diagnostics
            .is_empty()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An invalid `kind` or `arch` is reported and everything that does not depend on it is still
/// checked (before, it hid every other finding); the kind's own runtime rules are skipped.
#[test]
fn a_bad_kind_or_arch_hides_no_other_finding() {
    let src = "schema: \"5.1\"\nrepo: acme/x\nname: x\nweights: {repo: acme/w, revision: main}\n\
               kind: vllm-plugn\narch: blackhol\n\
               source: {tt_metal: /t, code: [/abs], ubuntu: \"22.04\", python: \"3\"}\n\
               serve: {mesh_device: P150, port: 8000}\n";
    let errs = errors(src);
    let codes: Vec<&str> = errs.iter().map(|e| e.split(' ').next().unwrap()).collect();
    assert_eq!(
        codes,
        [
            "invalid-value",
            "invalid-value",
            "source-path",
            "source-python",
            "required-serve-field"
        ],
        "{errs:#?}"
    );
    assert!(errs[0].contains("got 'vllm-plugn'") && errs[1].contains("got 'blackhol'"));
    assert!(
        !errs.iter().any(|e| e.contains("runtime")),
        "no runtime rule of a kind the author did not choose: {errs:#?}"
    );
    assert_eq!(warnings(src).len(), 1, "the unpinned revision");
}
