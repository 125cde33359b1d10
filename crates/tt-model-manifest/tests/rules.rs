//! Schema 5.1's identity, serve, profile and runtime rules with their messages and locations
//! (sources, verify, the card and warnings are in `rules_sources.rs`).

use crate::common;

use common::{BASE, check, edit, errors, one_error, warnings};

#[test]
fn base_manifest_is_clean() {
    let report = check(BASE);
    assert!(report.diagnostics.is_empty(), "{:#?}", report.diagnostics);
    let m = report.manifest.expect("valid");
    assert_eq!(
        m.kind,
        tt_model_manifest::Kind::VllmPlugin,
        "kind defaults to vllm-plugin"
    );
    assert_eq!(m.image.registry, "hf");
    assert_eq!(m.profiles()[0].name, "default");
    assert_eq!(m.device_count(), 1);
}

#[test]
fn unknown_top_level_key_suggests_the_closest() {
    let d = one_error(&format!("{BASE}defualt_profile: x\n"));
    assert_eq!(d.code, "unknown-key");
    assert_eq!(d.message, "unknown key `defualt_profile` in the manifest");
    assert_eq!(d.label.as_deref(), Some("did you mean `default_profile`?"));
    assert_eq!((d.pos.line, d.pos.col), (9, 1));
    assert_eq!(d.path, "defualt_profile");
}

#[test]
fn unknown_nested_keys_are_all_reported() {
    let src = edit("revision: 0123", "allow_pattern: [x], revison: 0123");
    let errs = errors(&src);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!(
        errs[0],
        "unknown-key 4:25 unknown key `allow_pattern` in `weights`"
    );
    assert!(
        errs[1].starts_with("unknown-key 4:45 unknown key `revison` in `weights`"),
        "{errs:#?}"
    );
}

#[test]
fn a_typo_is_not_reported_twice() {
    let d = one_error(&edit("mesh_device: P150", "mesh_devcie: P150"));
    assert_eq!(d.message, "unknown key `mesh_devcie` in `serve`");
    let d = one_error(&edit("arch: blackhole", "acrh: blackhole"));
    assert_eq!(d.label.as_deref(), Some("did you mean `arch`?"));
    // A typo elsewhere does not hide a missing key.
    let errs = errors(&format!(
        "{}card: {{mesh_devcie: x}}\n",
        edit("mesh_device: P150, ", "")
    ));
    assert_eq!(errs.len(), 2, "{errs:#?}");
}

#[test]
fn wrong_type_names_expected_and_found() {
    let d = one_error(&edit("max_num_seqs: 32", "max_num_seqs: lots"));
    assert_eq!(d.code, "type");
    assert_eq!(d.path, "serve.max_num_seqs");
    assert_eq!(d.message, "expected a whole number, found a string");
    assert_eq!((d.pos.line, d.pos.col), (8, 58));
}

#[test]
fn missing_required_key_points_at_parent() {
    let d = one_error(&edit("ubuntu: \"22.04\", ", ""));
    assert_eq!(d.code, "missing-key");
    assert_eq!(d.message, "`source` is missing the required key `ubuntu`");
    assert_eq!(d.path, "source.ubuntu");
    assert_eq!(d.pos.line, 6);
}

#[test]
fn schema_must_be_the_string_5_1() {
    let d = one_error(&edit("schema: \"5.1\"", "schema: \"5.10\""));
    assert_eq!(
        d.message,
        "unsupported manifest schema '5.10'; this tt-model authors schema '5.1'"
    );
    // An unquoted 5.10 keeps its text (it is not the float 5.1).
    let d = one_error(&edit("schema: \"5.1\"", "schema: 5.10"));
    assert_eq!(
        d.message,
        "unsupported manifest schema '5.10'; this tt-model authors schema '5.1'"
    );
    assert!(errors(&edit("schema: \"5.1\"", "schema: 5.1")).is_empty());
    // Omitted: defaults to 5.1.
    assert!(errors(&edit("schema: \"5.1\"\n", "")).is_empty());
}

#[test]
fn repo_weights_and_name_rules() {
    assert_eq!(
        one_error(&edit("repo: acme/m", "repo: m")).message,
        "repo must be a namespaced HF id (org/name), got 'm'"
    );
    assert_eq!(
        one_error(&edit("{repo: acme/w,", "{repo: w,")).message,
        "weights must be a namespaced HF id (org/name), got 'w'"
    );
    assert_eq!(
        one_error(&edit("name: m", "name: -M")).message,
        "name '-M' is not a safe slug — use lowercase letters, digits and '.'/'_'/'-', starting alphanumeric (it becomes a cache path + container name)."
    );
    let d = one_error(&format!("{BASE}auxiliary_weights: [acme/d, acme/d]\n"));
    assert_eq!(
        d.message,
        "duplicate weight repositories across weights/auxiliary_weights: ['acme/d']"
    );
    assert_eq!(d.path, "auxiliary_weights[1]");
}

#[test]
fn kind_and_arch_are_closed_sets() {
    let d = one_error(&format!("{BASE}kind: vllm-plugn\n"));
    assert_eq!(
        d.message,
        "kind must be one of ('vllm-plugin', 'vllm-fork', 'tt-dit-server', 'http-server'), got 'vllm-plugn'"
    );
    assert_eq!(d.label.as_deref(), Some("did you mean `vllm-plugin`?"));
    let d = one_error(&edit("arch: blackhole", "arch: grayskull"));
    assert_eq!(
        d.message,
        "arch must be one of ('blackhole', 'wormhole_b0'), got 'grayskull'"
    );
}

#[test]
fn hardware_labels() {
    let d = one_error(&edit("hardware: p150", "hardware: QB2"));
    assert_eq!(d.code, "hardware-label");
    assert!(
        d.message
            .starts_with("serve profile 'default': hardware 'QB2' is not a recognised board label"),
        "{}",
        d.message
    );
    assert!(
        d.message
            .contains("'QB2' is a box, not a board label: write 'p300x2'")
    );
    assert!(d.message.contains("a T3000 is 'n300x4', a QB2 is 'p300x2'"));
    assert_eq!(
        one_error(&edit("hardware: p150", "hardware: p150x0")).message,
        "serve profile 'default': hardware 'p150x0' names zero boards"
    );
    assert!(
        errors(&edit("hardware: p150", "hardware: P150a")).is_empty(),
        "revision letter and case are tolerated"
    );
}

#[test]
fn mesh_presets_literals_and_chip_cross_check() {
    let d = one_error(&edit("mesh_device: P150", "mesh_device: P15O"));
    assert!(
        d.message
            .starts_with("invalid mesh_device: 'P15O'. Expected one of ['N150', "),
        "{}",
        d.message
    );
    assert_eq!(d.label.as_deref(), Some("did you mean `P150`?"));
    let d = one_error(&edit(
        "hardware: p150, mesh_device: P150",
        "hardware: p150x4, mesh_device: P150x2",
    ));
    assert_eq!(
        d.message,
        "serve profile 'default': mesh_device 'P150x2' opens a 1x2 mesh (2 chips) but hardware 'p150x4' implies 4"
    );
    assert!(
        errors(&edit(
            "hardware: p150, mesh_device: P150",
            "hardware: p300x2, mesh_device: \"(2, 2)\""
        ))
        .is_empty()
    );
    assert!(
        errors(&edit(
            "hardware: p150, mesh_device: P150",
            "hardware: n300x4, mesh_device: T3K"
        ))
        .is_empty()
    );
}

#[test]
fn required_serve_fields_per_kind() {
    let d = one_error(&edit(", max_num_seqs: 32", ""));
    assert_eq!(
        d.message,
        "serve profile 'default': max_num_seqs is required (set it on the profile or under serve:). The TT backend rejects vLLM's own default."
    );
    assert_eq!(d.path, "serve.max_num_seqs");
    let d = one_error(&edit("hardware: p150, ", ""));
    assert_eq!(
        d.message,
        "serve profile 'default': hardware is required (set it on the profile or under serve:)."
    );
    // tt-dit-server needs only hardware and mesh_device.
    let dit = edit(
        "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}",
        "kind: tt-dit-server\nruntime: {app: \"models.m.server:app\"}",
    )
    .replace(", max_num_seqs: 32, block_size: 64", "");
    assert!(errors(&dit).is_empty(), "{:#?}", errors(&dit));
}

#[test]
fn profiles_merge_and_default_rules() {
    let two = format!("{BASE}serve_profiles:\n  - {{name: a}}\n  - {{name: b, max_num_seqs: 4}}\n");
    let d = one_error(&two);
    assert_eq!(
        d.message,
        "a manifest with multiple serve profiles must name a default_profile — the author decides the default, not the consumer's luck. Profiles: ['a', 'b']"
    );
    let m = check(&format!("{two}default_profile: b\n"))
        .manifest
        .expect("valid");
    assert_eq!(m.effective_serve(None).unwrap().max_num_seqs, Some(4));
    assert_eq!(m.effective_serve(Some("a")).unwrap().max_num_seqs, Some(32));
    assert_eq!(
        m.effective_serve(Some("a")).unwrap().hardware.as_deref(),
        Some("p150")
    );
    let d = one_error(&format!("{two}default_profile: c\n"));
    assert_eq!(
        d.message,
        "default_profile 'c' names no profile; available: ['a', 'b']"
    );
    let d = one_error(&format!(
        "{BASE}serve_profiles:\n  - {{name: a}}\n  - {{name: a}}\ndefault_profile: a\n"
    ));
    assert_eq!(d.message, "duplicate serve profile names: ['a']");
    assert_eq!(
        (d.path.as_str(), d.pos.line),
        ("serve_profiles[1].name", 11)
    );
    // A profile's own bad field is reported at the profile.
    let d = one_error(&format!(
        "{BASE}serve_profiles:\n  - {{name: a, hardware: p150x2}}\n"
    ));
    assert_eq!(
        d.path, "serve.mesh_device",
        "the inherited field is reported where it is written"
    );
    assert_eq!(
        d.message,
        "serve profile 'a': mesh_device 'P150' opens a 1x1 mesh (1 chips) but hardware 'p150x2' implies 2"
    );
}

#[test]
fn vllm_plugin_runtime_rules() {
    let rt = |r: &str| {
        edit(
            "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}",
            r,
        )
    };
    assert_eq!(
        one_error(&rt(
            "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}, vlm: x}"
        ))
        .message,
        "kind vllm-plugin does not understand runtime.vlm; expected one of vllm, plugin, extension, extra_models_dir, lock, overrides, wheels, health_path, device"
    );
    assert!(one_error(&rt("runtime: {vllm: {repo: tenstorrent/vllm}, plugin: {path: p}}")).message.starts_with("runtime.vllm.repo describes the tenstorrent/vllm fork — that is kind vllm-fork, not vllm-plugin."));
    assert_eq!(
        one_error(&rt(
            "runtime: {vllm: {version: \"1\", path: v}, plugin: {path: p}}"
        ))
        .message,
        "runtime.vllm: give exactly one of version / wheel / path, got version, path"
    );
    assert!(
        one_error(&rt("runtime: {plugin: {path: p}}"))
            .message
            .starts_with("kind vllm-plugin requires runtime.vllm: give exactly one of")
    );
    assert!(
        one_error(&rt("runtime: {vllm: {version: \"1\"}}"))
            .message
            .starts_with("kind vllm-plugin requires runtime.plugin")
    );
    assert_eq!(
        one_error(&rt(
            "runtime: {vllm: {version: \"1\"}, plugin: {path: p, version: \"2\"}}"
        ))
        .message,
        "runtime.plugin: give exactly one of path / {repo, ref} / version, got path, version"
    );
    assert_eq!(
        one_error(&rt(
            "runtime: {vllm: {wheel: dist/torch-2.whl}, plugin: {path: p}}"
        ))
        .message,
        "runtime.vllm.wheel 'dist/torch-2.whl' must name a vllm-*.whl"
    );
    assert_eq!(
        one_error(&rt(
            "runtime: {vllm: {version: \"1\"}, plugin: {path: p}, wheels: [w/vllm-1.whl]}"
        ))
        .message,
        "runtime.wheels may not carry vLLM ('w/vllm-1.whl'); use runtime.vllm.wheel"
    );
    assert_eq!(
        one_error(&rt(
            "runtime: {vllm: {version: \"1\"}, plugin: {path: p}, extra_models_dir: models/x}"
        ))
        .message,
        "runtime.extra_models_dir 'models/x' is not covered by source.code — the plugin would scan a directory that never entered the image"
    );
    assert!(errors(&rt("runtime: {vllm: {version: \"1\"}, plugin: {repo: t/p, ref: main}, extra_models_dir: models/m/vllm}")).is_empty());
}

#[test]
fn vllm_fork_runtime_rules() {
    let fork = |r: &str| {
        edit(
            "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}",
            &format!("kind: vllm-fork\n{r}"),
        )
    };
    assert!(
        errors(&fork(
            "runtime: {vllm: {repo: tenstorrent/vllm, ref: dev}, model_dir: models/m}"
        ))
        .is_empty()
    );
    assert!(one_error(&fork("runtime: {vllm: {version: \"1\"}, model_dir: models/m}")).message.starts_with("runtime.vllm.version describes stock vLLM from PyPI — that is kind vllm-plugin, not vllm-fork."));
    assert!(
        one_error(&fork("runtime: {model_dir: models/m}"))
            .message
            .starts_with("kind vllm-fork requires runtime.vllm.{repo, ref}")
    );
    assert!(
        one_error(&fork(
            "runtime: {vllm: {repo: r, ref: x}, plugin: {path: p}, model_dir: models/m}"
        ))
        .message
        .starts_with("kind vllm-fork takes no runtime.plugin")
    );
    assert_eq!(
        one_error(&fork(
            "runtime: {vllm: {repo: r, ref: x}, model_dir: elsewhere}"
        ))
        .message,
        "runtime.model_dir 'elsewhere' is not covered by source.code — the launcher would not find the model inside the image"
    );
    assert!(
        one_error(&fork("runtime: {vllm: {repo: r, ref: x}}"))
            .message
            .starts_with("kind vllm-fork requires runtime.model_dir")
    );
}

#[test]
fn tt_dit_server_runtime_rules() {
    let dit = |r: &str| {
        edit(
            "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}",
            &format!("kind: tt-dit-server\n{r}"),
        )
        .replace(", max_num_seqs: 32, block_size: 64", "")
    };
    assert!(one_error(&dit("runtime: {}")).message.starts_with("kind tt-dit-server requires runtime.app, the ASGI target to serve, as \"module.path:attribute\""));
    assert!(
        one_error(&dit("runtime: {app: m.server}"))
            .message
            .starts_with("runtime.app 'm.server' must look like \"module.path:attribute\"")
    );
    assert_eq!(
        one_error(&dit("runtime: {app: \"m:app\", workers: 2}")).message,
        "runtime key 'workers' is not valid for kind tt-dit-server; allowed: app, packages, lock, mesh_shape_env, health_path, device"
    );
    assert!(
        one_error(&dit(
            "runtime: {app: \"m:app\", mesh_shape_env: MESH-SHAPE}"
        ))
        .message
        .starts_with(
            "runtime.mesh_shape_env 'MESH-SHAPE' is not a valid environment variable name"
        )
    );
}

#[test]
fn http_server_runtime_rules() {
    let http = |r: &str| {
        edit(
            "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}",
            &format!("kind: http-server\n{r}"),
        )
        .replace(", max_num_seqs: 32, block_size: 64", "")
    };
    assert!(
        errors(&http(
            "runtime: {command: [srv, --port, \"{port}\"], ready_line: ready}"
        ))
        .is_empty()
    );
    assert!(
        one_error(&http("runtime: {ready_line: ready}"))
            .message
            .starts_with("kind http-server requires runtime.command")
    );
    let d = one_error(&http("runtime: {command: [srv, --port, \"{prot}\"]}"));
    assert_eq!(
        d.message,
        "unknown placeholder `{prot}` in runtime.command; only {host} and {port} are filled in"
    );
    assert_eq!(d.label.as_deref(), Some("did you mean `{port}`?"));
    assert_eq!(
        warnings(&http("runtime: {command: [srv]}")),
        vec![
            "http-port 8:11 runtime.command has no `{port}` placeholder, so `tt-model serve --port` cannot move the server's port"
        ]
    );
}

#[test]
fn runtime_cargo_health_path_and_device_rules() {
    let http = |r: &str| {
        edit(
            "runtime: {vllm: {version: \"0.10.1\"}, plugin: {path: p}}",
            &format!("kind: http-server\n{r}"),
        )
        .replace(", max_num_seqs: 32, block_size: 64", "")
    };
    let ok = "runtime: {cargo: {workspace: ../.., package: gr00t-server, features: [x]}, command: [gr00t-server, --port, \"{port}\"], health_path: /health, device: none}";
    assert!(errors(&http(ok)).is_empty(), "{:?}", errors(&http(ok)));
    assert!(warnings(&http(ok)).is_empty(), "{:?}", warnings(&http(ok)));
    // A typo inside runtime.cargo: located, with did-you-mean.
    let d = one_error(&http(
        "runtime: {cargo: {workspace: ., pakage: srv}, command: [srv, --port, \"{port}\"]}",
    ));
    assert_eq!(d.code, "unknown-key");
    assert_eq!(d.path, "runtime.cargo.pakage");
    assert_eq!(d.label.as_deref(), Some("did you mean `package`?"));
    assert_eq!((d.pos.line, d.pos.col), (8, 33));
    let d = one_error(&http(
        "runtime: {cargo: {workspace: ., package: \"a b\"}, command: [srv, --port, \"{port}\"]}",
    ));
    assert_eq!(
        d.message,
        "runtime.cargo.package 'a b' is not a Cargo target name (letters, digits, '-' and '_')"
    );
    // The command should start the binary the image ships.
    assert_eq!(
        warnings(&http(
            "runtime: {cargo: {workspace: ., package: srv}, command: [other, --port, \"{port}\"]}"
        )),
        vec![
            "cargo-command 8:48 runtime.command runs 'other', not the binary runtime.cargo ships (/usr/local/bin/srv)"
        ]
    );
    // runtime.cargo is an http-server key; health_path and device are every kind's.
    let d = one_error(&edit(
        "plugin: {path: p}}",
        "plugin: {path: p}, cargo: {workspace: ., package: x}}",
    ));
    assert_eq!(d.path, "runtime.cargo");
    assert!(
        errors(&edit(
            "plugin: {path: p}}",
            "plugin: {path: p}, health_path: /ping, device: cpu}"
        ))
        .is_empty()
    );
    let d = one_error(&http(
        "runtime: {command: [srv, --port, \"{port}\"], health_path: health}",
    ));
    assert_eq!(
        d.message,
        "runtime.health_path 'health' must be an absolute HTTP path such as \"/health\""
    );
    let d = one_error(&http(
        "runtime: {command: [srv, --port, \"{port}\"], device: nome}",
    ));
    assert_eq!(
        d.message,
        "runtime.device 'nome' is not one of card, none, cpu, emulation"
    );
    assert_eq!(d.label.as_deref(), Some("did you mean `none`?"));
}
