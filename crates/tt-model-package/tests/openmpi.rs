//! OpenMPI ULFM in the runtime image: when the builder base carries it, the Dockerfile copies
//! it into the runtime stage and puts its `lib` on `LD_LIBRARY_PATH`, and verify checks that
//! the loader finds it (golden files for two kinds); without it nothing about OpenMPI is
//! rendered. The check itself runs here on the host against a stand-in library.

use crate::common;

use std::path::Path;
use std::process::Command;

use tt_model_package::launcher::openmpi_check;
use tt_model_package::pipeline::OPENMPI_DIR;
use tt_model_package::spec::VerifyStep;
use tt_model_package::templates::{RenderOptions, render};

fn options(openmpi: bool) -> RenderOptions {
    RenderOptions {
        tool_version: "0.0.0-test".into(),
        torch_pin: Some("2.7.1".into()),
        install_apt: true,
        has_lock: false,
        openmpi: openmpi.then(|| OPENMPI_DIR.to_string()),
        build_cache: false,
    }
}

#[test]
fn a_base_with_openmpi_gives_the_runtime_image_a_copy_on_the_library_path() {
    for (kind, spec) in [
        ("vllm-plugin", common::vllm_plugin()),
        ("http-server", common::http_server()),
    ] {
        let rendered = render(&spec, &options(true)).unwrap();
        for file in ["tt-model/Dockerfile", "tt-model/verify.sh"] {
            let name = format!("{kind}__{}", file.replace('/', "__"));
            insta::assert_snapshot!(name, rendered.files[file]);
        }
        let dockerfile = &rendered.files["tt-model/Dockerfile"];
        let runtime = &dockerfile[dockerfile.find("AS runtime").unwrap()..];
        let copy = runtime
            .find(&format!("COPY --from=builder {OPENMPI_DIR} {OPENMPI_DIR}"))
            .unwrap_or_else(|| panic!("{kind}: no OpenMPI copy in the runtime stage"));
        let code = runtime.find("COPY --chown=1000:1000 code/").unwrap();
        assert!(
            copy < code,
            "{kind}: OpenMPI is a stable layer, before code/"
        );
        assert!(
            runtime.contains(&format!(
                "LD_LIBRARY_PATH=/opt/tt-metal/build/lib:{OPENMPI_DIR}/lib "
            )),
            "{kind}: both library paths"
        );
        // The OpenMPI check runs after the kind's own and before the author's.
        let without = render(&spec, &options(false)).unwrap();
        let kind_count = without.checks.len() - spec.verify.len();
        assert_eq!(rendered.checks.len(), without.checks.len() + 1, "{kind}");
        assert_eq!(rendered.checks[kind_count], openmpi_check(OPENMPI_DIR));
    }
}

#[test]
fn a_base_without_openmpi_renders_nothing_about_it() {
    for (kind, spec) in common::all() {
        let rendered = render(&spec, &options(false)).unwrap();
        for (path, text) in &rendered.files {
            assert!(
                !text.to_lowercase().contains("openmpi"),
                "{kind}: {path} mentions OpenMPI"
            );
        }
        assert!(
            rendered.checks.iter().all(|c| !c.text().contains("libmpi")),
            "{kind}"
        );
    }
}

/// Runs the check's shell text with `LD_LIBRARY_PATH` set (or not).
fn run_check(check: &VerifyStep, ld_library_path: Option<&str>) -> (bool, String) {
    assert_eq!(check.lang(), "sh", "the OpenMPI check is a shell check");
    let code = check.text();
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(code).env_remove("LD_LIBRARY_PATH");
    if let Some(p) = ld_library_path {
        cmd.env("LD_LIBRARY_PATH", p);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A real shared library of the host (zlib) serves as the stand-in `libmpi.so.40`: the
/// loader resolves it and its dependencies like any library.
fn stand_in_library() -> &'static Path {
    [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/libz.so.1",
        "/usr/lib/libz.so.1",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.is_file())
    .expect("zlib is installed (a Debian essential dependency)")
}

#[test]
fn the_check_passes_only_when_the_loader_path_reaches_libmpi() {
    let dir = tempfile::tempdir().unwrap();
    let ompi = dir.path().join("openmpi-v5.0.7-ulfm");
    let lib = ompi.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let check = openmpi_check(ompi.to_str().unwrap());
    let lib_s = lib.to_str().unwrap();

    let (ok, out) = run_check(&check, Some(&format!("/opt/tt-metal/build/lib:{lib_s}")));
    assert!(!ok, "no libmpi.so.40 yet: {out}");
    assert!(out.contains("libmpi.so.40 is missing"), "{out}");

    std::fs::copy(stand_in_library(), lib.join("libmpi.so.40")).unwrap();
    let (ok, out) = run_check(&check, Some(&format!("/opt/tt-metal/build/lib:{lib_s}")));
    assert!(ok, "{out}");

    let (ok, out) = run_check(&check, Some("/opt/tt-metal/build/lib"));
    assert!(!ok, "{out}");
    assert!(out.contains("is not on LD_LIBRARY_PATH"), "{out}");
    let (ok, out) = run_check(&check, None);
    assert!(!ok, "{out}");
}
