//! Snapshot tests of every generated build file for every kind, and the hostile-value tests:
//! authored values that reach a shell must arrive as single, inert arguments.

use crate::common;

use std::path::Path;
use std::process::Command;

use tt_model_package::spec::{Kind, VerifyStep};
use tt_model_package::templates::{RenderOptions, render};

fn options(has_lock: bool) -> RenderOptions {
    RenderOptions {
        tool_version: "0.0.0-test".into(),
        torch_pin: Some("2.7.1".into()),
        install_apt: true,
        has_lock,
        openmpi: None,
        build_cache: false,
    }
}

#[test]
fn every_kind_renders_every_file() {
    for (kind, spec) in common::all() {
        let rendered = render(&spec, &options(spec.runtime.lock().is_some())).unwrap();
        for (path, text) in &rendered.files {
            let name = format!("{kind}__{}", path.replace('/', "__"));
            insta::assert_snapshot!(name, text);
        }
    }
}

#[test]
fn dockerfile_respects_the_engine_limits_and_layer_order() {
    for (kind, spec) in common::all() {
        let rendered = render(&spec, &options(false)).unwrap();
        let dockerfile = &rendered.files["tt-model/Dockerfile"];
        let first = dockerfile.lines().next().unwrap();
        assert!(
            !first.to_lowercase().starts_with("# syntax"),
            "{kind}: no syntax line (the engine would pull a frontend)"
        );
        for line in dockerfile
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
        {
            assert!(
                !line.contains("--link"),
                "{kind}: COPY --link is unknown to dockerd 20.10: {line}"
            );
            assert!(
                !line.contains("--mount"),
                "{kind}: the classic builder has no RUN --mount: {line}"
            );
        }
        // Stable before volatile: code/ is the last content COPY into the runtime stage.
        let runtime = &dockerfile[dockerfile.find("AS runtime").unwrap()..];
        let code = runtime.find("COPY --chown=1000:1000 code/").unwrap();
        let metal = runtime.find("/opt/tt-metal /opt/tt-metal").unwrap();
        assert!(
            metal < code,
            "{kind}: the tt-metal build must come before code/"
        );
        for stable in ["runtime_setup.sh", "COPY --from=engine /opt/tt-venv"] {
            if let Some(at) = runtime.find(stable) {
                assert!(at < code, "{kind}: {stable} must come before code/");
            }
        }
    }
}

#[test]
fn only_python_kinds_get_a_venv() {
    let http = render(&common::http_server(), &options(false)).unwrap();
    assert!(!http.files["tt-model/Dockerfile"].contains("/opt/tt-venv /opt/tt-venv"));
    let mut with_packages = common::http_server();
    common::http_runtime(&mut with_packages).packages = vec!["aiohttp".into()];
    let http = render(&with_packages, &options(false)).unwrap();
    assert!(
        http.files["tt-model/Dockerfile"].contains("COPY --from=engine /opt/tt-venv /opt/tt-venv")
    );
    assert!(http.files["tt-model/install_engine.sh"].contains("$UV aiohttp"));
}

#[test]
fn checks_are_kind_checks_then_the_authors() {
    let spec = common::tt_dit_server();
    let rendered = render(&spec, &options(false)).unwrap();
    let texts: Vec<&str> = rendered.checks.iter().map(VerifyStep::text).collect();
    assert_eq!(texts[0], "import ttnn");
    assert!(
        texts.iter().any(|t| t.contains("\"2.7.1\"")),
        "torch pin check: {texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("importlib.import_module(\"demo_server.app\")"))
    );
    assert_eq!(
        &texts[texts.len() - 2..],
        &[
            "import demo_server.app",
            "test -f /opt/tt-metal/models/demos/demo/config.json"
        ]
    );
}

const HOSTILE: &str = "1.0; touch pwned";

/// Runs `script` with `sh` in `dir`, with fake `uv` and `$VENV/bin/python` that record their
/// argv one argument per NUL-terminated record.
fn run_with_fakes(
    dir: &Path,
    script: &str,
    extra_env: &[(&str, &str)],
) -> (bool, Vec<String>, String) {
    let bin = dir.join("bin");
    let venv_bin = dir.join("venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&venv_bin).unwrap();
    let recorder = "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\" >> \"$ARGLOG\"; done\nprintf '\\n\\0' >> \"$ARGLOG\"\n";
    for fake in [bin.join("uv"), venv_bin.join("python")] {
        std::fs::write(&fake, recorder).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&fake)
            .status()
            .unwrap();
    }
    let script_path = dir.join("script.sh");
    std::fs::write(&script_path, script).unwrap();
    let log = dir.join("args.log");
    let out = Command::new("sh")
        .arg(&script_path)
        .current_dir(dir)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("VENV", dir.join("venv"))
        .env("ARGLOG", &log)
        .envs(extra_env.iter().copied())
        .output()
        .unwrap();
    let args = std::fs::read(&log)
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let stdout =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), args, stdout)
}

#[test]
fn hostile_install_values_stay_single_arguments() {
    let mut spec = common::tt_dit_server();
    common::dit_runtime(&mut spec).packages = vec![
        format!("fastapi=={HOSTILE}"),
        "x$(touch pwned2)".into(),
        "it's".into(),
    ];
    let rendered = render(
        &spec,
        &RenderOptions {
            torch_pin: Some(HOSTILE.into()),
            ..options(false)
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ok, args, out) = run_with_fakes(
        dir.path(),
        &rendered.files["tt-model/install_engine.sh"],
        &[],
    );
    assert!(ok, "{out}");
    assert!(
        !dir.path().join("pwned").exists() && !dir.path().join("pwned2").exists(),
        "{out}"
    );
    for want in [
        format!("torch=={HOSTILE}"),
        format!("fastapi=={HOSTILE}"),
        "x$(touch pwned2)".into(),
        "it's".into(),
    ] {
        assert!(
            args.contains(&want),
            "{want:?} not passed as one argument: {args:?}"
        );
    }

    let mut spec = common::vllm_plugin();
    let rt = common::plugin_runtime(&mut spec);
    rt.vllm = Some(tt_model_package::spec::ComponentSource::Version {
        version: HOSTILE.into(),
    });
    rt.overrides = vec![format!("numpy=={HOSTILE}")];
    rt.plugin = Some(tt_model_package::spec::ComponentSource::Version {
        version: HOSTILE.into(),
    });
    let rendered = render(&spec, &options(false)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = rendered.files["tt-model/install_engine.sh"]
        .replace("/tmp/tt-overrides.txt", "overrides.txt");
    let (ok, args, out) = run_with_fakes(dir.path(), &script, &[]);
    assert!(ok, "{out}");
    assert!(!dir.path().join("pwned").exists(), "{out}");
    assert!(args.contains(&format!("vllm=={HOSTILE}")), "{args:?}");
    assert!(
        args.contains(&format!("vllm-tt-plugin=={HOSTILE}")),
        "{args:?}"
    );
    let overrides = std::fs::read_to_string(dir.path().join("overrides.txt")).unwrap();
    assert!(
        overrides.lines().any(|l| l == format!("numpy=={HOSTILE}")),
        "{overrides}"
    );
}

#[test]
fn hostile_verify_checks_arrive_intact() {
    let mut spec = common::http_server();
    spec.kind = Kind::TtDitServer; // a Python kind: checks go through $VENV/bin/python
    spec.verify = vec![
        VerifyStep::Python(format!("print('{HOSTILE}')")),
        VerifyStep::sh(format!("printf '%s' '{HOSTILE}'")),
    ];
    let rendered = render(&spec, &options(false)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ok, args, out) = run_with_fakes(dir.path(), &rendered.files["tt-model/verify.sh"], &[]);
    assert!(ok, "{out}");
    assert!(args.contains(&format!("print('{HOSTILE}')")), "{args:?}");
    // The sh check ran as code (that is what it is for) and printed the literal text.
    assert!(out.contains(HOSTILE), "{out}");
    assert!(!dir.path().join("pwned").exists());
    assert!(
        out.contains(&format!(
            "tt-model-verify: passed {}",
            rendered.checks.len()
        )),
        "{out}"
    );
}

#[test]
fn hostile_serve_values_reach_the_server_verbatim() {
    let mut spec = common::http_server();
    common::http_runtime(&mut spec).command = vec![
        "sh".into(),
        "-c".into(),
        "printf '%s|%s|' \"$HOSTILE\" \"$1\"".into(),
        "x".into(),
        HOSTILE.into(),
    ];
    spec.serve.env.insert(
        "HOSTILE".into(),
        "$(touch pwned) `touch pwned`; it's".into(),
    );
    let rendered = render(&spec, &options(false)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, out) = run_with_fakes(
        dir.path(),
        &rendered.files["tt-model/serve-default.sh"],
        &[("TT_MODEL_NO_DEVICE_CHECK", "1")],
    );
    assert!(ok, "{out}");
    assert_eq!(
        out,
        format!("$(touch pwned) `touch pwned`; it's|{HOSTILE}|")
    );
    assert!(!dir.path().join("pwned").exists());
}

#[test]
fn serve_default_refuses_to_start_without_a_device() {
    let rendered = render(&common::http_server(), &options(false)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    if Path::new("/dev/tenstorrent").exists() {
        return; // a real card is attached: the check passes by design
    }
    let (ok, _, out) = run_with_fakes(
        dir.path(),
        &rendered.files["tt-model/serve-default.sh"],
        &[],
    );
    assert!(!ok);
    assert!(out.contains("--device /dev/tenstorrent"), "{out}");
}

#[test]
fn bad_env_names_are_refused() {
    let mut spec = common::http_server();
    spec.serve.env.insert("BAD;NAME".into(), "x".into());
    let err = render(&spec, &options(false)).unwrap_err();
    assert!(err.to_string().contains("BAD;NAME"), "{err}");
}

/// The GR00T Rust example for a card (issue 16, item 4): the server is built with its device
/// backend, the image's Python environment (3.12: the ttnn wheel is cp312-only) carries ttnn
/// for the backend's worker and tt-smi for stop's reset, and the served env selects the card.
#[test]
fn gr00t_rs_example_carries_the_device_backend() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/gr00t-n1.6-3b-p150-rs/tt-model.yaml");
    let (manifest, _) =
        tt_model_manifest::load_path(&example, &tt_model_manifest::CheckOptions::default())
            .expect("the example lints");
    let spec = tt_model_package::from_manifest::spec_from_manifest(
        &manifest,
        &example,
        example.parent().unwrap(),
    )
    .unwrap();
    let cargo = spec.runtime.cargo().expect("runtime.cargo");
    assert_eq!(cargo.features, ["device"]);
    assert!(spec.needs_python());
    let rendered = render(&spec, &options(false)).unwrap();
    let prep = &rendered.files["tt-model/prep.sh"];
    assert!(prep.contains("--python 3.12"), "{prep}");
    let install = &rendered.files["tt-model/install_engine.sh"];
    assert!(install.contains("ttnn==0.81.1"), "{install}");
    assert!(install.contains("tt-smi=="), "{install}");
    let dockerfile = &rendered.files["tt-model/Dockerfile"];
    assert!(
        dockerfile.contains("COPY --from=engine /opt/tt-venv /opt/tt-venv"),
        "{dockerfile}"
    );
    // The worker's interpreter: gr00t-server takes VIRTUAL_ENV's python3.
    assert!(
        dockerfile.contains("VIRTUAL_ENV=/opt/tt-venv"),
        "{dockerfile}"
    );
    let env = tt_model_package::launcher::serve_env(&spec);
    assert_eq!(env["GR00T_DIT_BACKEND"], "megakernel");
    assert_eq!(env["GR00T_MK_DEVICE"], "p150a");
}

#[test]
fn buildkit_builds_get_the_build_cache_mount_and_the_rebuild_argument() {
    let spec = common::tt_dit_server();
    let classic = render(&spec, &options(false)).unwrap();
    let buildkit = render(
        &spec,
        &RenderOptions {
            build_cache: true,
            ..options(false)
        },
    )
    .unwrap();
    let dockerfile = &buildkit.files["tt-model/Dockerfile"];
    // The tt-metal build step, and only it, gets the mount.
    assert_eq!(
        dockerfile.matches("--mount=type=cache").count(),
        1,
        "{dockerfile}"
    );
    assert!(dockerfile.contains(
        "RUN --mount=type=cache,id=tt-model-tt-metal,target=/var/cache/tt-model,sharing=locked \\\n    TT_MODEL_BUILD_CACHE=/var/cache/tt-model sh /ctx/build_tt_metal.sh"
    ));
    // Every stage declares what `--no-cache` changes, right after its FROM.
    for stage in ["AS builder", "AS engine", "AS runtime"] {
        let after = dockerfile.split(stage).nth(1).unwrap();
        let next_instruction = after
            .lines()
            .skip(1)
            .find(|l| !l.starts_with('#') && !l.trim().is_empty())
            .unwrap();
        assert_eq!(next_instruction, "ARG TT_MODEL_REBUILD=", "{stage}");
    }
    // The classic builder's Dockerfile has neither (its engine rejects `--mount`).
    let plain = &classic.files["tt-model/Dockerfile"];
    assert!(
        !plain.contains("--mount") && !plain.contains("TT_MODEL_REBUILD"),
        "{plain}"
    );
    // The build script puts ccache and CPM in the mount and runs tt-metal's ccache build.
    let script = &buildkit.files["tt-model/build_tt_metal.sh"];
    assert!(script.contains("export CCACHE_DIR=\"$TT_MODEL_BUILD_CACHE/ccache\" CPM_SOURCE_CACHE=\"$TT_MODEL_BUILD_CACHE/cpm\""));
    assert!(script.contains("./build_metal.sh --enable-ccache"));
    assert_eq!(
        script, &classic.files["tt-model/build_tt_metal.sh"],
        "one script for both builders: the mount's variable switches it"
    );
}
